package owner_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/owner"
)

// Ids as Flink prints them.
const (
	rid  = "flink-taskmanager-7f9c-1"
	aid  = "4e1b9d6c0a2f47e8b3c5d7e9f1a3b5c7"
	jid  = "a0b1c2d3e4f5061728394a5b6c7d8e9f"
	vid  = "cbc357ccb763df2852fee8c4fc7d55f2"
	uuid = "7c1f4b1e-93d2-4c4e-9a0b-5f6e7d8c9b0a"
)

const (
	wd    = "tm_" + rid
	alloc = wd + "/localState/aid_" + aid
	job   = alloc + "/jid_" + jid
	sti   = job + "/vtx_" + vid + "_sti_3"
	chk   = sti + "/chk_42"
	// A live RocksDB instance; the operator identifier is Flink's, with
	// every character outside [A-Za-z0-9-] made '_', so it may hold "_uuid_".
	instance = wd + "/tmp/job_" + jid + "_op_KeyedProcessOperator_" + vid + "__4_8__uuid_" + uuid + "_uuid_" + uuid
	lsroot   = "localState_" + rid
)

var (
	execOwner  = owner.Owner{Executor: rid, Level: owner.LevelExecutor}
	allocOwner = owner.Owner{Executor: rid, Allocation: aid, Level: owner.LevelAllocation}
	jobOwner   = owner.Owner{Executor: rid, Allocation: aid, Job: jid, Level: owner.LevelJobInAllocation}
	stiOwner   = owner.Owner{Executor: rid, Allocation: aid, Job: jid, Vertex: vid, Subtask: "3", Level: owner.LevelSubtask}
	chkOwner   = owner.Owner{Executor: rid, Allocation: aid, Job: jid, Vertex: vid, Subtask: "3", Checkpoint: "42", Level: owner.LevelCheckpoint}
	tmpOwner   = owner.Owner{Executor: rid, Job: jid, Level: owner.LevelJob}
	unowned    = owner.Owner{}
)

func with(o owner.Owner, edit func(*owner.Owner)) owner.Owner {
	edit(&o)
	return o
}

var name255 = strings.Repeat("n", 255)

// flinkCases are paths a Flink TaskManager writes, or that a hostile or
// confused writer could make, with their owners.
var flinkCases = []struct {
	name string
	path string
	want owner.Owner
}{
	// The working directory.
	{"mount root", "", unowned},
	{"working dir", wd, execOwner},
	{"blob storage", wd + "/blobStorage/job_" + jid + "/blob_p-0123", execOwner},
	{"slot allocation snapshot", wd + "/slotAllocationSnapshots/0.bin", execOwner},
	{"local state dir", wd + "/localState", execOwner},
	{"allocation", alloc, allocOwner},
	{"job in allocation", job, jobOwner},
	{"subtask", sti, stiOwner},
	{"subtask 0", job + "/vtx_" + vid + "_sti_0", with(stiOwner, func(o *owner.Owner) { o.Subtask = "0" })},
	{"checkpoint", chk, chkOwner},
	{"checkpoint 0", sti + "/chk_0", with(chkOwner, func(o *owner.Owner) { o.Checkpoint = "0" })},
	{"checkpoint id max long", sti + "/chk_9223372036854775807", with(chkOwner, func(o *owner.Owner) { o.Checkpoint = "9223372036854775807" })},
	{"task state snapshot", chk + "/_task_state_snapshot", chkOwner},
	{"rocksdb checkpoint sst", chk + "/" + uuid + "/000012.sst", chkOwner},
	{"rocksdb checkpoint manifest", chk + "/" + uuid + "/MANIFEST-000005", chkOwner},
	{"rocksdb checkpoint being made", chk + "/" + uuid + ".tmp/CURRENT", chkOwner},
	{"file of 255 bytes in checkpoint", chk + "/" + name255, chkOwner},
	{"file in subtask dir", sti + "/lock", stiOwner},
	{"tmp", wd + "/tmp", execOwner},
	{"rocksdb instance", instance, tmpOwner},
	{"rocksdb instance db", instance + "/db", tmpOwner},
	{"rocksdb instance sst", instance + "/db/000012.sst", tmpOwner},
	{"rocksdb instance simple operator", wd + "/tmp/job_" + jid + "_op_Map-1_uuid_" + uuid + "/db/LOCK", tmpOwner},
	{"other tmp file", wd + "/tmp/rocksdb-lib-0123/librocksdbjni-linux64.so", execOwner},
	// Flink 2's ForSt: the asynchronous backend's per-job directory, and its
	// file cache, which is the executor's whatever job's SSTs it copies.
	{"forst job dir", wd + "/tmp/" + jid, tmpOwner},
	{"forst operator attempt", wd + "/tmp/" + jid + "/op_KeyedProcessOperator_" + vid + "__4_8__attempt_0", tmpOwner},
	{"forst db file", wd + "/tmp/" + jid + "/op_Window_1_attempt_12/db/MANIFEST-000004", tmpOwner},
	{"forst cache", wd + "/tmp/cache", execOwner},
	{"forst cache sst", wd + "/tmp/cache/" + jid + "-000012.sst", execOwner},
	{"forst job dir upper-case", wd + "/tmp/" + strings.ToUpper(jid) + "/op_x_attempt_0", execOwner},
	{"forst job dir 31 hex", wd + "/tmp/" + jid[:31] + "/op_x_attempt_0", execOwner},
	{"forst job dir 33 hex", wd + "/tmp/" + jid + "0/op_x_attempt_0", execOwner},
	{"forst job dir outside tmp", wd + "/" + jid + "/op_x_attempt_0", execOwner},
	{"volume forst db file", "volumes/tm-3/" + wd + "/tmp/" + jid + "/op_Map_attempt_1/db/000009.sst", tmpOwner},
	// taskmanager.state.local.root-dirs.
	{"local state root", lsroot, execOwner},
	{"local state root allocation", lsroot + "/aid_" + aid, allocOwner},
	{"local state root checkpoint file", lsroot + "/aid_" + aid + "/jid_" + jid + "/vtx_" + vid + "_sti_3/chk_42/_task_state_snapshot", chkOwner},
	{"local state root without aid", lsroot + "/jid_" + jid, execOwner},

	// A CSI volume's tree holds a working directory or a local state root.
	{"volume working dir", "volumes/flink-taskmanager-3/" + wd, execOwner},
	{"volume checkpoint", "volumes/flink-taskmanager-3/" + chk + "/000012.sst", chkOwner},
	{"volume rocksdb instance", "volumes/tm-3/" + instance + "/db/LOCK", tmpOwner},
	{"volume local state root", "volumes/v_1.a/" + lsroot + "/aid_" + aid, allocOwner},
	{"volume name of 253 bytes", "volumes/" + strings.Repeat("v", 253) + "/" + alloc, allocOwner},
	{"volume name of 254 bytes", "volumes/" + strings.Repeat("v", 254) + "/" + alloc, unowned},
	{"volume dir", "volumes/flink-taskmanager-3", unowned},
	{"volumes dir", "volumes", unowned},
	{"volume name starting with a dot", "volumes/.v/" + alloc, unowned},
	{"volume name with a slash-free odd byte", "volumes/v:1/" + alloc, unowned},
	{"empty volume name", "volumes//" + alloc, unowned},
	{"two volume levels", "volumes/a/volumes/b/" + alloc, unowned},
	{"tm under a volume's subdir", "volumes/a/data/" + alloc, unowned},

	// Outside tm_*: unowned.
	{"local state at root", "localState/aid_" + aid + "/jid_" + jid, unowned},
	{"local state root without id", "localState_/aid_" + aid, unowned},
	{"other root dir", "flink-io-0123/file", unowned},
	{"upper-case TM", "TM_" + rid + "/localState/aid_" + aid, unowned},
	{"tm below root", "data/" + alloc, unowned},
	{"leading slash", "/" + chk, unowned},
	{"tm_ without id", "tm_/localState/aid_" + aid, unowned},

	// Resource ids.
	{"resource id dot", "tm_./localState/aid_" + aid, unowned},
	{"resource id dot dot", "tm_../localState/aid_" + aid, unowned},
	{"resource id three dots", "tm_...", with(execOwner, func(o *owner.Owner) { o.Executor = "..." })},
	{"resource id dot file", "tm_.x", with(execOwner, func(o *owner.Owner) { o.Executor = ".x" })},
	{"resource id 252 bytes (255-byte name)", "tm_" + name255[:252], with(execOwner, func(o *owner.Owner) { o.Executor = name255[:252] })},
	{"resource id 255 bytes", lsroot[:11] + name255, with(execOwner, func(o *owner.Owner) { o.Executor = name255 })},
	{"resource id 256 bytes", "tm_" + name255 + "n", unowned},
	{"resource id with colon (default host:port-hex)", "tm_10.0.0.7:6122-a1b2c3", unowned},
	{"resource id with slash-free unicode", "tm_tm-ü", unowned},
	{"resource id with space", "tm_tm 1", unowned},

	// Hostile and malformed components stay at their parent's level.
	{"jid_.. then ..", alloc + "/jid_../..", allocOwner},
	{"jid_..", alloc + "/jid_..", allocOwner},
	{"jid_ empty", alloc + "/jid_", allocOwner},
	{"jid 31 hex", alloc + "/jid_" + jid[:31], allocOwner},
	{"jid 33 hex", alloc + "/jid_" + jid + "0", allocOwner},
	{"jid upper-case hex", alloc + "/jid_" + strings.ToUpper(jid), allocOwner},
	{"jid with suffix", alloc + "/jid_" + jid + ".tmp", allocOwner},
	{"jid 255 bytes", alloc + "/jid_" + name255[:251], allocOwner},
	{"jid under bad jid", alloc + "/jid_x/jid_" + jid, allocOwner},
	{"aid_ empty", wd + "/localState/aid_/jid_" + jid, execOwner},
	{"aid_..", wd + "/localState/aid_../jid_" + jid, execOwner},
	{"aid upper-case", wd + "/localState/aid_" + strings.ToUpper(aid), execOwner},
	{"aid non-hex", wd + "/localState/aid_" + strings.Repeat("g", 32), execOwner},
	{"jid without aid", wd + "/localState/jid_" + jid, execOwner},
	{"aid outside localState", wd + "/aid_" + aid, execOwner},
	{"vtx without sti", job + "/vtx_" + vid, jobOwner},
	{"sti empty", job + "/vtx_" + vid + "_sti_", jobOwner},
	{"sti negative", job + "/vtx_" + vid + "_sti_-1", jobOwner},
	{"sti leading zero", job + "/vtx_" + vid + "_sti_03", jobOwner},
	{"sti 11 digits", job + "/vtx_" + vid + "_sti_12345678901", jobOwner},
	{"sti arabic-indic digit", job + "/vtx_" + vid + "_sti_\u0663", jobOwner},
	{"vtx short", job + "/vtx_" + vid[:30] + "_sti_3", jobOwner},
	{"vtx upper-case", job + "/vtx_" + strings.ToUpper(vid) + "_sti_3", jobOwner},
	{"chk_ empty", sti + "/chk_", stiOwner},
	{"chk_-1", sti + "/chk_-1", stiOwner},
	{"chk_01a", sti + "/chk_01a", stiOwner},
	{"chk_01", sti + "/chk_01", stiOwner},
	{"chk_+1", sti + "/chk_+1", stiOwner},
	{"chk_1e3", sti + "/chk_1e3", stiOwner},
	{"chk 20 digits", sti + "/chk_12345678901234567890", stiOwner},
	{"chk fullwidth digit", sti + "/chk_\uff15", stiOwner},
	{"chk_..", sti + "/chk_../..", stiOwner},
	{"chk in job dir", job + "/chk_42", jobOwner},
	{"double slash", wd + "//localState/aid_" + aid, execOwner},
	{"tmp job upper-case uuid", wd + "/tmp/job_" + jid + "_op_Map_uuid_" + strings.ToUpper(uuid), execOwner},
	{"tmp job without uuid", wd + "/tmp/job_" + jid + "_op_Map", execOwner},
	{"tmp job empty operator", wd + "/tmp/job_" + jid + "_op__uuid_" + uuid, execOwner},
	{"tmp job operator with dot", wd + "/tmp/job_" + jid + "_op_a.b_uuid_" + uuid, execOwner},
	{"tmp job bad id", wd + "/tmp/job_.._op_Map_uuid_" + uuid, execOwner},
	{"tmp job not in tmp", wd + "/job_" + jid + "_op_Map_uuid_" + uuid, execOwner},
	{"tmp job nested in tmp", wd + "/tmp/x/job_" + jid + "_op_Map_uuid_" + uuid, execOwner},
}

func TestFlinkOwner(t *testing.T) {
	rules := owner.FlinkRules()
	for _, tc := range flinkCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.Owner(tc.path); got != tc.want {
				t.Errorf("Owner(%q)\n got %+v\nwant %+v", tc.path, got, tc.want)
			}
		})
	}
}

// TestFlinkOwnerAllocatesNothing: Owner runs on every create, mkdir and
// rename the executor does.
func TestFlinkOwnerAllocatesNothing(t *testing.T) {
	rules := owner.FlinkRules()
	for _, path := range []string{chk + "/" + uuid + "/000012.sst", instance + "/db/LOCK", "elsewhere"} {
		if n := testing.AllocsPerRun(100, func() { rules.Owner(path) }); n != 0 {
			t.Errorf("Owner(%q) allocates %v times", path, n)
		}
	}
}

func TestIsFlinkID(t *testing.T) {
	for _, id := range []string{jid, aid, vid, "00000000000000000000000000000000", "ffffffffffffffffffffffffffffffff", "0123456789abcdef0123456789abcdef"} {
		if !owner.IsFlinkID(id) {
			t.Errorf("IsFlinkID(%q) = false, want true", id)
		}
	}
	for _, id := range flinkid.InvalidJobIDs {
		if owner.IsFlinkID(id) {
			t.Errorf("IsFlinkID(%q) = true, want false", id)
		}
	}
}

// Flink's id syntaxes, written independently of the package's parsers.
var (
	resourceIDSyntax = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	flinkIDSyntax    = regexp.MustCompile(`^[0-9a-f]{32}$`)
	subtaskSyntax    = regexp.MustCompile(`^(0|[1-9][0-9]{0,9})$`)
	checkpointSyntax = regexp.MustCompile(`^(0|[1-9][0-9]{0,18})$`)
)

// fieldsOf lists an owner's id fields by name.
func fieldsOf(o owner.Owner) map[string]string {
	return map[string]string{
		"executor": o.Executor, "allocation": o.Allocation, "job": o.Job,
		"vertex": o.Vertex, "subtask": o.Subtask, "checkpoint": o.Checkpoint,
	}
}

// flinkLevelFields are the fields a Flink owner has at each level, no more.
var flinkLevelFields = map[owner.Level][]string{
	owner.LevelNone:            nil,
	owner.LevelExecutor:        {"executor"},
	owner.LevelJob:             {"executor", "job"},
	owner.LevelAllocation:      {"executor", "allocation"},
	owner.LevelJobInAllocation: {"executor", "allocation", "job"},
	owner.LevelSubtask:         {"executor", "allocation", "job", "vertex", "subtask"},
	owner.LevelCheckpoint:      {"executor", "allocation", "job", "vertex", "subtask", "checkpoint"},
}

// checkFlinkOwner reports what is wrong with o as FlinkRules' owner of a path.
func checkFlinkOwner(t *testing.T, path string, o owner.Owner) {
	t.Helper()
	if o.Executor != "" && (!resourceIDSyntax.MatchString(o.Executor) || o.Executor == "." || o.Executor == "..") {
		t.Errorf("Owner(%q): executor %q is no resource id", path, o.Executor)
	}
	for name, id := range map[string]string{"allocation": o.Allocation, "job": o.Job, "vertex": o.Vertex} {
		if id != "" && !flinkIDSyntax.MatchString(id) {
			t.Errorf("Owner(%q): %s %q is no Flink id", path, name, id)
		}
	}
	if o.Subtask != "" && !subtaskSyntax.MatchString(o.Subtask) {
		t.Errorf("Owner(%q): subtask %q is no subtask index", path, o.Subtask)
	}
	if o.Checkpoint != "" && !checkpointSyntax.MatchString(o.Checkpoint) {
		t.Errorf("Owner(%q): checkpoint %q is no checkpoint id", path, o.Checkpoint)
	}
	want, ok := flinkLevelFields[o.Level]
	if !ok {
		t.Fatalf("Owner(%q): level %v", path, o.Level)
	}
	fields := fieldsOf(o)
	for _, name := range want {
		if fields[name] == "" {
			t.Errorf("Owner(%q) = %+v: %v without %s", path, o, o.Level, name)
		}
		delete(fields, name)
	}
	for name, id := range fields {
		if id != "" {
			t.Errorf("Owner(%q) = %+v: %v with %s", path, o, o.Level, name)
		}
	}
}

// FuzzOwner checks that FlinkRules' Owner never panics, that every id it
// returns has Flink's syntax and its level has exactly the ids it should,
// that a path keeps every id its parent directory has (so creating a file
// never loses ownership), and that flink.rules, run by the rules-file engine,
// agrees. The seed corpus is in testdata/fuzz/FuzzOwner.
func FuzzOwner(f *testing.F) {
	for _, tc := range flinkCases {
		f.Add(tc.path)
	}
	flinkFile, err := owner.LoadRules("flink.rules")
	if err != nil {
		f.Fatal(err)
	}
	rules := owner.FlinkRules()
	f.Fuzz(func(t *testing.T, path string) {
		o := rules.Owner(path)
		checkFlinkOwner(t, path, o)
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			parent := rules.Owner(path[:i])
			if parent.Level > o.Level {
				t.Errorf("Owner(%q).Level = %v, below its parent's %v", path, o.Level, parent.Level)
			}
			got := fieldsOf(o)
			for name, id := range fieldsOf(parent) {
				if id != "" && got[name] != id {
					t.Errorf("Owner(%q).%s = %q, parent %q has %q", path, name, got[name], path[:i], id)
				}
			}
		}
		if byFile := flinkFile.Owner(path); byFile != o {
			t.Errorf("Owner(%q):\nbuilt in    %+v\nflink.rules %+v", path, o, byFile)
		}
	})
}

func BenchmarkOwner(b *testing.B) {
	flinkFile, err := owner.LoadRules("flink.rules")
	if err != nil {
		b.Fatal(err)
	}
	kafka := mustParse(b, kafkaStreamsRules)
	for _, bc := range []struct {
		name  string
		rules *owner.Rules
		path  string
	}{
		{"flink/checkpoint-sst", owner.FlinkRules(), chk + "/" + uuid + "/000012.sst"},
		{"flink/rocksdb-instance", owner.FlinkRules(), instance + "/db/000012.sst"},
		{"flink/unowned", owner.FlinkRules(), "lost+found/x"},
		{"flink.rules/checkpoint-sst", flinkFile, chk + "/" + uuid + "/000012.sst"},
		{"flink.rules/unowned", flinkFile, "lost+found/x"},
		{"kafka-streams/store-sst", kafka, "wordcount/0_3/rocksdb/counts-store/000012.sst"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.rules.Owner(bc.path)
			}
		})
	}
}
