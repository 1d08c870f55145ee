# statefs build, test and local run. `make test` is what CI runs (see .ci/run).

# Go lives in /usr/local/go on the CI image; the integration tests also run `go build`.
export PATH := $(PATH):/usr/local/go/bin
GO       ?= go
BIN      := bin/statefs
VAR      := $(CURDIR)/var
STORE    := $(VAR)/store
MNT      := $(VAR)/mnt

.PHONY: all build test test-deps vet run clean bench soak

all: build

# VERSION is what `statefs --version` says: the commit it was built from
# (git describe), or what the image build passes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/statefs

# test-deps installs the Debian packages whose programs the tests drive:
# rocksdb-tools (db_bench, ldb: test/rocksdb_test.go uses them as a real
# RocksDB client) and prometheus (promtool: deploy/monitoring_test.go checks
# the alert rules with it, as a Prometheus release loads them). It only
# touches the system when a program is missing.
TEST_TOOLS := db_bench:rocksdb-tools ldb:rocksdb-tools promtool:prometheus
test-deps:
	@missing=""; \
	for tp in $(TEST_TOOLS); do \
		command -v "$${tp%%:*}" >/dev/null 2>&1 || missing="$$missing $${tp#*:}"; \
	done; \
	missing=$$(echo $$missing | tr ' ' '\n' | sort -u | xargs); \
	if [ -z "$$missing" ]; then \
		exit 0; \
	fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "make test: installing $$missing needs root (run as root, or: sudo apt-get install -y $$missing)" >&2; \
		exit 1; \
	fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
		echo "make test: $$missing missing and apt-get is not available to install them" >&2; \
		exit 1; \
	fi; \
	echo "installing $$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get -o DPkg::Lock::Timeout=300 update -q && apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends $$missing </dev/null || { \
		echo "make test: apt-get install $$missing failed" >&2; exit 1; }

vet:
	$(GO) vet ./...

# test runs every package, then the packages whose locks the daemon's
# requests, seals and sweeps share under the race detector (but for the
# store's tests of one goroutine: format upgrades, refusals, a corrupt
# chunk, the read-only open, fsck's findings), then the mounted suite again
# without FUSE passthrough (the path kernels before 6.9 take), but for the
# tests passthrough cannot change: names and directories alone, modes,
# owners, extended attributes and the checks of who may do what (the
# kernel's and the daemon's, made before any read or write), the
# collector, held deletes, CSI, the CLI, the views, the metrics, and the
# crash points, which stop the daemon at steps of its own (seals, index
# commits, releases, sweeps), after a client's bytes reached their staging
# file, whichever way they came; the tests that choose passthrough
# themselves; and the upgrade from the previous commit's binary, which would
# build it again for a hand-over that is the same without passthrough. That
# pass kills the server under load (TestServerKilledUnderLoad) for 20 s, not
# a minute.
RACE_SKIP := ^(TestOpenUpgradesVersion1|TestOpenUpgradesVersion2|TestOpenRefusesForeignDirectories|TestReadCorruptChunk|TestOpenReadOnlyChangesNothing|TestCheckFindsEachFileProblem)$$
NO_PASSTHROUGH_SKIP := ^(TestPosixBigDirectory|TestPosixReaddir|TestPosixMkdirRmdir|TestPosixNames|TestPosixDeepPath|TestPosixSymlink|TestPosixChmodChown|TestPosixUmask|TestPosixPermissions|TestPosixSetgidDirectory|TestPosixXattr|TestPosixStatfs|TestSecurityPathsStayInside|TestSecurityStoreSymlinks|TestSecurityAllowOther|TestSecurityStatefsReadOnly|TestKillPrivLikeTheDisk|TestObjectReadThroughPassthrough|TestGC.*|TestJobVerdict.*|TestHeld.*|TestHold.*|TestDeletesNotHeld|TestPrunedCheckpointsSharingAnSSTGo|TestCSI.*|TestStopWithBinds|TestPodWithItsStoreMovesToAnotherNode|TestMountOverDeadMount|TestInspect.*|TestMetrics.*|TestLogFormat.*|TestFsck.*|TestReadOnlyCommandsChangeNothing|TestCLI.*|TestStatusView|TestViewTimes|TestDaemonSaysItsVersion|TestInventoryView|TestSecurityControl.*|TestCrashPoints|TestCrashPointsCovered|TestCacheSeesTheCollector|TestCacheSeesARestore|TestCacheSeesAHoldGo|TestUpgradeFromThePreviousCommit)$$
test: test-deps vet
	$(GO) test -count=1 -timeout 18m ./...
	$(GO) test -count=1 -race -timeout 10m -skip '$(RACE_SKIP)' ./fs/ ./store/ ./hold/
	STATEFS_TEST_MOUNT_ARGS=--passthrough=false STATEFS_KILL_LOAD_DURATION=20s $(GO) test -count=1 -timeout 18m -skip '$(NO_PASSTHROUGH_SKIP)' ./test/

# soak runs the crash campaign (test/campaign_test.go) for SOAK_DURATION
# with seed SOAK_SEED (0: from the clock) and prints its figures: kills,
# operations and bytes verified, failures. A failure prints the seed that
# replays it: make soak SOAK_SEED=<seed>.
SOAK_DURATION ?= 1h
SOAK_SEED     ?= 0
# SOAK_INDEX_MEMTABLE_MIB=1 makes the index's memtables 1 MiB instead of 16,
# so that badger flushes and compacts all the time under the kills.
SOAK_INDEX_MEMTABLE_MIB ?=
soak:
	STATEFS_INDEX_MEMTABLE_MIB=$(SOAK_INDEX_MEMTABLE_MIB) $(GO) test -count=1 -timeout 0 -v -run '^TestCrashCampaign$$' ./test/ -args -soak.duration=$(SOAK_DURATION) -soak.seed=$(SOAK_SEED)

# run mounts a store under ./var in the foreground; Ctrl-C (or umount) stops it.
run: build
	@mkdir -p $(STORE) $(MNT)
	@echo "statefs: store $(STORE)"
	@echo "statefs: mounting on $(MNT); stop with Ctrl-C, kill -TERM <pid>, or: umount $(MNT)"
	$(CURDIR)/$(BIN) mount --store $(STORE) $(MNT)

# bench runs the side-by-side benchmark (statefs vs the bare disk
# vs go-fuse's loopback; as root, about 11 minutes on 2 cores) and writes
# var/bench/result.md and var/bench/result.json; BENCHMARKS.md keeps the
# latest tables. Sizes: BENCH_FLAGS="--reps 1 ..." (go run ./test/bench -h).
bench: test-deps
	$(GO) run ./test/bench --dir $(VAR)/bench --json $(VAR)/bench/result.json --markdown $(VAR)/bench/result.md $(BENCH_FLAGS)

clean:
	rm -rf bin
