package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/fs"
	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/owner"
)

// White-box tests of the command line: each command's flags are read into
// its options in one place, and those options are what these tests check,
// with the app run in-process and each command's action replaced by its
// options constructor.

// optionsOf are the commands whose flags are read into an options struct.
var optionsOf = map[string]func(*cli.Context) (any, error){
	"mount": func(c *cli.Context) (any, error) { return newMountOptions(c) },
	"gc":    func(c *cli.Context) (any, error) { return newGCOptions(c) },
	"csi":   func(c *cli.Context) (any, error) { return newCSIOptions(c) },
	"du":    func(c *cli.Context) (any, error) { return newDUOptions(c) },
	"scrub": func(c *cli.Context) (any, error) { return newScrubOptions(c) },
	"fsck":  func(c *cli.Context) (any, error) { return newFsckOptions(c), nil },
}

// completeArgs are arguments that make each command's line complete.
var completeArgs = map[string][]string{
	"mount": {"--store", "/var/lib/statefs/store"},
	"gc":    {"--store", "/var/lib/statefs/store"},
	"csi":   {"--node-id", "node-1", "--store", "/var/lib/statefs/store", "--mount", "/var/lib/statefs/mnt"},
	"du":    {"--store", "/var/lib/statefs/store"},
	"scrub": {"--store", "/var/lib/statefs/store"},
	"fsck":  {"--store", "/var/lib/statefs/store"},
}

// parse runs `statefs command args...` in-process and returns the options
// the command's flags were read into, or the error main would print. It
// fails the test if the app printed anything itself (a help page).
func parse(t *testing.T, command string, args ...string) (any, error) {
	t.Helper()
	app := newApp()
	var printed bytes.Buffer
	app.Writer, app.ErrWriter = &printed, &printed
	var opts any
	for _, cmd := range app.Commands {
		if cmd.Name == command {
			cmd.Action = func(c *cli.Context) (err error) {
				opts, err = optionsOf[command](c)
				return err
			}
		}
	}
	err := app.Run(append([]string{"statefs", command}, args...))
	if printed.Len() > 0 {
		t.Errorf("statefs %s %q printed, want nothing but the error main prints:\n%s", command, args, printed.String())
	}
	return opts, err
}

// complete is a command line of command with args: its required flags
// first, and for mount a MOUNTPOINT last.
func complete(command string, args ...string) []string {
	line := append(slices.Clone(completeArgs[command]), args...)
	if command == "mount" {
		line = append(line, "/mnt")
	}
	return line
}

func mustParse(t *testing.T, command string, args ...string) any {
	t.Helper()
	opts, err := parse(t, command, complete(command, args...)...)
	if err != nil {
		t.Fatalf("statefs %s %q: %v", command, args, err)
	}
	return opts
}

// The background scrub and verified reads read as asked: any interval
// (0 turns the scrub off), a humanized rate (0: no limit).
func TestMountScrubAndVerifyOptions(t *testing.T) {
	for _, c := range []struct {
		args     []string
		interval time.Duration
		rate     int64
		verify   bool
	}{
		{[]string{"--scrub-interval", "0"}, 0, 32 << 20, false},
		{[]string{"--scrub-interval", "90m", "--scrub-rate", "100MiB"}, 90 * time.Minute, 100 << 20, false},
		{[]string{"--scrub-rate", "0", "--verify-reads"}, 24 * time.Hour, 0, true},
		{[]string{"--scrub-rate", "1.5 MB"}, 24 * time.Hour, 1500000, false},
	} {
		o := mustParse(t, "mount", c.args...).(mountOptions)
		if o.ScrubInterval != c.interval || o.ScrubRate != c.rate || o.FS.VerifyReads != c.verify {
			t.Errorf("mount %q: scrub every %v at %d B/s, verify reads %v; want %v, %d, %v",
				c.args, o.ScrubInterval, o.ScrubRate, o.FS.VerifyReads, c.interval, c.rate, c.verify)
		}
	}
}

func TestMountOptionsDefaults(t *testing.T) {
	got := mustParse(t, "mount")
	want := mountOptions{
		Store: "/var/lib/statefs/store",
		FS: fs.Options{
			SealDelay:       2 * time.Second,
			Passthrough:     true,
			Sealers:         1,
			Rules:           owner.FlinkRules(),
			MaxKernelInodes: fs.DefaultMaxKernelInodes,
			Hold:            hold.Options{TTL: 24 * time.Hour, MinFree: 0.1, Window: 5 * time.Second},
		},
		CacheTimeout:  fs.DefaultCacheTimeout,
		ReadAhead:     4 << 20,
		ReadCache:     32 << 20,
		MemoryLimit:   200 << 20,
		GC:            control.GCRequest{Grace: 10 * time.Minute},
		ScrubInterval: 24 * time.Hour,
		ScrubRate:     32 << 20,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mount's defaults read as\n%+v\nwant\n%+v", got, want)
	}
}

// Every spelling of a flag, its name or an alias, reads into the same
// options, on every command that takes the flag.
func TestFlagAliasesParseAlike(t *testing.T) {
	aliased := 0
	for _, cmd := range newApp().Commands {
		if optionsOf[cmd.Name] == nil {
			continue
		}
		for _, f := range cmd.Flags {
			names := f.Names()
			if len(names) == 1 {
				continue
			}
			aliased++
			var value string
			switch f.(type) {
			case *cli.DurationFlag:
				value = "3m7s"
			default:
				t.Fatalf("statefs %s --%s: no sample value for a %T; add one", cmd.Name, names[0], f)
			}
			byName := mustParse(t, cmd.Name, "--"+names[0], value)
			if reflect.DeepEqual(byName, mustParse(t, cmd.Name)) {
				t.Errorf("statefs %s --%s %s reads as the default", cmd.Name, names[0], value)
			}
			for _, alias := range names[1:] {
				if got := mustParse(t, cmd.Name, "--"+alias, value); !reflect.DeepEqual(got, byName) {
					t.Errorf("statefs %s --%s %s reads as\n%+v\nwant it as --%s:\n%+v", cmd.Name, alias, value, got, names[0], byName)
				}
			}
		}
	}
	if aliased == 0 {
		t.Fatal("no flag has an alias; --grace should be one of --gc-grace")
	}
}

// The collector's flags are the same flags on mount and gc: same names,
// aliases, defaults and usage, and they ask for the same collector runs.
func TestCollectorFlagsSameOnMountAndGC(t *testing.T) {
	flagsOf := func(cmd *cli.Command) map[string]cli.Flag {
		m := map[string]cli.Flag{}
		for _, f := range cmd.Flags {
			m[f.Names()[0]] = f
		}
		return m
	}
	mount, gc := flagsOf(mountCommand()), flagsOf(gcCommand())
	for _, want := range collectorFlags() {
		name := want.Names()[0]
		if !reflect.DeepEqual(mount[name], want) {
			t.Errorf("mount --%s is %+v, want the collector's %+v", name, mount[name], want)
		}
		if !reflect.DeepEqual(gc[name], want) {
			t.Errorf("gc --%s is %+v, want the collector's %+v", name, gc[name], want)
		}
	}

	for _, args := range [][]string{
		nil,
		{"--grace", "0s"},
		{"--gc-grace", "1h", "--flink-url", "http://a:8081", "--flink-url", "http://b:8081", "--job-result-store", "/jrs", "--not-found-is-gone"},
	} {
		m := mustParse(t, "mount", args...).(mountOptions)
		g := mustParse(t, "gc", args...).(gcOptions)
		if !reflect.DeepEqual(m.GC, g.Request) {
			t.Errorf("with %q mount's collector reads as %+v, gc's as %+v", args, m.GC, g.Request)
		}
	}
}

// A bad value of a flag the command checks is one line that names the
// flag, and no help page (DESIGN invariant 7).
func TestBadFlagValueIsOneLine(t *testing.T) {
	badRules := filepath.Join(t.TempDir(), "bad.rules")
	if err := os.WriteFile(badRules, []byte("not a rule\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		command string
		args    []string
		flag    string // the flag the error line must name
	}{
		{"mount", []string{"--seal-delay", "-1s"}, "--seal-delay"},
		{"mount", []string{"--seal-delay", "soon"}, "--seal-delay"},
		{"mount", []string{"--gc-interval", "-1s"}, "--gc-interval"},
		{"mount", []string{"--gc-grace", "-1s"}, "--gc-grace"},
		{"mount", []string{"--flink-url", "notaurl"}, "--flink-url"},
		{"mount", []string{"--flink-url", "http://jobmanager:8081", "--flink-url", "jobmanager:8081"}, "--flink-url"},
		{"gc", []string{"--flink-url", "ftp://jobmanager"}, "--flink-url"},
		{"mount", []string{"--grace", "-1s"}, "--gc-grace"},
		{"mount", []string{"--hold-ttl", "-1s"}, "--hold-ttl"},
		{"mount", []string{"--hold-window", "-1s"}, "--hold-window"},
		{"mount", []string{"--hold-min-free", "101"}, "--hold-min-free"},
		{"mount", []string{"--hold-min-free", "-1"}, "--hold-min-free"},
		{"mount", []string{"--max-kernel-inodes", "-1"}, "--max-kernel-inodes"},
		{"mount", []string{"--cache-timeout", "-1s"}, "--cache-timeout"},
		{"mount", []string{"--hold-min-free", "lots"}, "-hold-min-free"},
		{"mount", []string{"--memory-limit", "lots"}, "--memory-limit"},
		{"mount", []string{"--memory-limit", "20EiB"}, "--memory-limit"},
		{"mount", []string{"--read-ahead", "lots"}, "--read-ahead"},
		{"mount", []string{"--read-cache", "lots"}, "--read-cache"},
		{"mount", []string{"--scrub-interval", "-1s"}, "--scrub-interval"},
		{"mount", []string{"--scrub-interval", "daily"}, "--scrub-interval"},
		{"mount", []string{"--scrub-rate", "lots"}, "--scrub-rate"},
		{"mount", []string{"--scrub-rate", "20EiB"}, "--scrub-rate"},
		{"mount", []string{"--scrub-rate", "-1MiB"}, "--scrub-rate"},
		{"mount", []string{"--verify-reads=maybe"}, "verify-reads"},
		{"mount", []string{"--rules", filepath.Join(t.TempDir(), "missing.rules")}, "--rules"},
		{"mount", []string{"--rules", badRules}, "--rules"},
		{"gc", []string{"--gc-grace", "-1s"}, "--gc-grace"},
		{"gc", []string{"--grace", "-1s"}, "--gc-grace"},
		{"gc", []string{"--grace", "soon"}, "--grace"},
		{"gc", []string{"--grace", "1m", "--gc-grace", "2m"}, "gc-grace"},
		{"scrub", []string{"--max-rate", "lots"}, "--max-rate"},
		{"du", []string{"--by", "size"}, "--by"},
		{"csi", []string{"--endpoint", "tcp://localhost:1"}, "--endpoint"},
		{"csi", []string{"--node-id", ""}, "--node-id"},
		{"csi", []string{"--rebind-interval", "0s"}, "--rebind-interval"},
		{"csi", []string{"--store", "relative/store"}, "--store"},
		{"csi", []string{"--mount", "relative/mnt"}, "--mount"},
		{"csi", []string{"--health-addr", "9808"}, "--health-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.command+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parse(t, tt.command, complete(tt.command, tt.args...)...)
			if err == nil {
				t.Fatalf("statefs %s %q was accepted", tt.command, tt.args)
			}
			if line := oneLine(err); line != err.Error() || !strings.Contains(line, tt.flag) {
				t.Errorf("statefs %s %q: error %q, want one line naming %s", tt.command, tt.args, err, tt.flag)
			}
		})
	}
}

// Every command that takes --store refuses its absence in one line naming
// it, and no help page; STATEFS_STORE gives it instead.
func TestStoreIsRequiredInOneLine(t *testing.T) {
	for _, cmd := range newApp().Commands {
		if !slices.ContainsFunc(cmd.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "store") }) {
			continue
		}
		t.Run(cmd.Name, func(t *testing.T) {
			t.Setenv("STATEFS_STORE", "")
			app := newApp()
			var printed strings.Builder
			app.Writer, app.ErrWriter = &printed, &printed
			line := []string{"statefs", cmd.Name}
			if cmd.Name == "csi" { // its other required flags
				line = append(line, "--node-id", "node-1", "--mount", "/mnt")
			}
			err := app.Run(line)
			if err == nil || !strings.Contains(err.Error(), "--store") || oneLine(err) != err.Error() || printed.Len() > 0 {
				t.Errorf("statefs %s without --store: %v, printed %q; want one line naming --store", cmd.Name, err, printed.String())
			}
		})
	}
	t.Setenv("STATEFS_STORE", filepath.Join(t.TempDir(), "nostore"))
	if err := newApp().Run([]string{"statefs", "jobs"}); err == nil || !strings.Contains(err.Error(), "nostore is not a statefs store") {
		t.Errorf("statefs jobs with STATEFS_STORE set: %v; want it to look at that store", err)
	}
}

// A duration given as a bare number, on any duration flag of any command,
// is refused in one line that says a unit is needed and gives one.
func TestDurationWithoutUnitSaysSo(t *testing.T) {
	durations := 0
	for _, cmd := range newApp().Commands {
		for _, f := range cmd.Flags {
			if _, ok := f.(*cli.DurationFlag); !ok {
				continue
			}
			durations++
			for _, name := range f.Names() {
				_, err := parse(t, cmd.Name, complete(cmd.Name, "--"+name, "5")...)
				want := fmt.Sprintf(`usage: --%s "5": a duration needs a unit, e.g. 5s (see 'statefs %s --help')`, name, cmd.Name)
				if err == nil || err.Error() != want {
					t.Errorf("statefs %s --%s 5: %v\nwant %s", cmd.Name, name, err, want)
				}
			}
		}
	}
	if durations == 0 {
		t.Fatal("no command has a duration flag; mount --seal-delay should be one")
	}
	_, err := parse(t, "mount", complete("mount", "--seal-delay", "soon")...)
	if want := `usage: --seal-delay "soon" is not a duration such as 90s, 10m or 1h30m (see 'statefs mount --help')`; err == nil || err.Error() != want {
		t.Errorf("statefs mount --seal-delay soon: %v\nwant %s", err, want)
	}
}

// A global flag given after the command, on any command, is refused in one
// line that says where it goes, with the value as it was given.
func TestGlobalFlagAfterTheCommandSaysWhereItGoes(t *testing.T) {
	for _, cmd := range newApp().Commands {
		for _, c := range []struct{ args, want string }{
			{"--log-format json", "--log-format is a global flag, given before the command: statefs --log-format json " + cmd.Name + " ..."},
			{"--log-format=text", "--log-format is a global flag, given before the command: statefs --log-format=text " + cmd.Name + " ..."},
			{"--version", "--version is a global flag, given before any command: statefs --version"},
			{"-v", "-v is a global flag, given before any command: statefs --version"},
		} {
			_, err := parse(t, cmd.Name, complete(cmd.Name, strings.Fields(c.args)...)...)
			want := fmt.Sprintf("usage: %s (see 'statefs %s --help')", c.want, cmd.Name)
			if err == nil || err.Error() != want {
				t.Errorf("statefs %s %s: %v\nwant %s", cmd.Name, c.args, err, want)
			}
		}
	}
	_, err := parse(t, "mount", complete("mount", "--nonsense")...)
	if want := "flag provided but not defined: -nonsense (see 'statefs mount --help')"; err == nil || err.Error() != want {
		t.Errorf("statefs mount --nonsense: %v\nwant %s", err, want)
	}
}

// A size given as a bare number other than 0, on any size flag (SIZE in its
// usage), is refused in one line that asks for a unit; 0 and a size with a
// unit are read, and --help says a SIZE takes a unit.
func TestSizeWithoutUnitIsRefused(t *testing.T) {
	sizes := 0
	for _, cmd := range newApp().Commands {
		for _, f := range cmd.Flags {
			sf, ok := f.(*cli.StringFlag)
			if !ok || !strings.Contains(sf.Usage, "`SIZE`") {
				continue
			}
			sizes++
			if !strings.Contains(sf.Usage, "a SIZE takes a unit") {
				t.Errorf("statefs %s --%s: its usage does not say a SIZE takes a unit: %q", cmd.Name, sf.Name, sf.Usage)
			}
			if optionsOf[cmd.Name] == nil {
				t.Errorf("statefs %s --%s: add the command to optionsOf to check its sizes", cmd.Name, sf.Name)
				continue
			}
			_, err := parse(t, cmd.Name, complete(cmd.Name, "--"+sf.Name, "100")...)
			want := fmt.Sprintf(`usage: --%s "100": a size needs a unit, e.g. 100MiB (100B if bytes are meant)`, sf.Name)
			if err == nil || err.Error() != want {
				t.Errorf("statefs %s --%s 100: %v\nwant %s", cmd.Name, sf.Name, err, want)
			}
			for _, ok := range []string{"0", "100B", "4KiB", "1.5 MB"} {
				if _, err := parse(t, cmd.Name, complete(cmd.Name, "--"+sf.Name, ok)...); err != nil {
					t.Errorf("statefs %s --%s %s: %v", cmd.Name, sf.Name, ok, err)
				}
			}
		}
	}
	if sizes < 5 {
		t.Fatalf("%d size flags found, want at least mount's --read-ahead, --read-cache, --memory-limit, --scrub-rate and scrub's --max-rate", sizes)
	}
}
