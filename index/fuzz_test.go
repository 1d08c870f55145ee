package index

// White-box fuzz tests of the index's record decoders: they call the
// unexported encoders and decoders, and FuzzIndexRecord writes raw values
// under real keys with Tx.set. Seed corpora are in testdata/fuzz/<FuzzName>;
// `go test` runs them, `go test -run XXX -fuzz FuzzName ./index/` searches for
// more (see README.md).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
)

// FuzzInodeRecord: a value that decodes as an inode is exactly what marshal
// writes for the result, so decode(encode(n)) == n for every inode and no
// two inodes share a record.
func FuzzInodeRecord(f *testing.F) {
	for _, n := range []*Inode{
		{Mode: modeDir | 0o755, Nlink: 2, Size: dirSize, Parent: RootIno},
		{Mode: modeReg | 0o4755, Uid: 65534, Gid: 7, Nlink: 3, Size: 1 << 40, Atime: -1, Mtime: 1, Ctime: 2, Btime: 3, Staging: 9, Owner: 4},
		{Mode: modeLnk | 0o777, Nlink: 1, Target: "../../" + strings.Repeat("x", 300)},
	} {
		f.Add(n.marshal())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := unmarshalInode(42, b)
		if err != nil {
			return
		}
		if n.Ino != 42 {
			t.Fatalf("decoded inode %d, asked for 42", n.Ino)
		}
		if again := n.marshal(); !bytes.Equal(again, b) {
			t.Fatalf("unmarshalInode(%x) = %+v, which marshals to %x", b, n, again)
		}
	})
}

// FuzzDirentRecord: a dirent record that decodes is exactly what encodeDirent
// writes for the result, or a format 1 record that reads as made at 0 (a
// record with permission bits in its mode, or made before the epoch, is
// corrupt, not silently masked), and a dirent round-trips with its type
// bits.
func FuzzDirentRecord(f *testing.F) {
	f.Add("f", encodeDirent(Dirent{Ino: 7, Mode: modeReg, Born: 1}), uint64(7), uint32(modeReg|0o644), int64(1))
	f.Add("", encodeDirent(Dirent{Ino: RootIno, Mode: modeDir}), uint64(1), uint32(modeDir), int64(0))
	f.Add(strings.Repeat("n", 255), []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xa1, 0xff}, uint64(1<<63), uint32(modeLnk|0o777), int64(1<<62))
	f.Fuzz(func(t *testing.T, name string, v []byte, ino uint64, mode uint32, born int64) {
		d, err := decodeDirent(name, v)
		if err == nil {
			if d.Name != name {
				t.Fatalf("decoded name %q, want %q", d.Name, name)
			}
			again := encodeDirent(d)
			if len(v) == direntV1Len {
				again = again[:direntV1Len]
				if d.Born != 0 {
					t.Fatalf("format 1 record %x made at %d, want 0", v, d.Born)
				}
			}
			if !bytes.Equal(again, v) {
				t.Fatalf("decodeDirent(%x) = %+v, which encodes to %x", v, d, again)
			}
		}
		born = max(born, 0)
		in := Dirent{Name: name, Ino: ino, Mode: mode, Born: born}
		out, err := decodeDirent(name, encodeDirent(in))
		if err != nil {
			t.Fatalf("decodeDirent(encodeDirent(%+v)): %v", in, err)
		}
		if want := (Dirent{Name: name, Ino: ino, Mode: mode & modeType, Born: born}); out != want {
			t.Fatalf("round trip of %+v gave %+v, want %+v", in, out, want)
		}
	})
}

// FuzzOwnerRecord: an owner record that decodes is exactly what encodeOwner
// writes for the result: OwnerID finds owners by their encoding, so a
// second encoding of one owner would intern it twice. Every owner of a
// known level round-trips.
func FuzzOwnerRecord(f *testing.F) {
	for _, o := range []owner.Owner{
		{},
		{Level: owner.LevelExecutor, Executor: "tm-1"},
		{Level: owner.LevelCheckpoint, Executor: "tm-1", Allocation: "a", Job: "j", Vertex: "v", Subtask: "0", Checkpoint: "7"},
		{Level: owner.LevelJob, Job: strings.Repeat("j", 200)}, // a two-byte length
	} {
		f.Add(encodeOwner(o), uint8(o.Level), o.Executor, o.Job, o.Checkpoint)
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint8(9), "", "", "") // a huge length
	f.Fuzz(func(t *testing.T, b []byte, level uint8, executor, job, checkpoint string) {
		o, err := decodeOwner(b)
		if err == nil {
			if again := encodeOwner(o); !bytes.Equal(again, b) {
				t.Fatalf("decodeOwner(%x) = %+v, which encodes to %x", b, o, again)
			}
		}
		in := owner.Owner{Level: owner.Level(level), Executor: executor, Job: job, Checkpoint: checkpoint}
		out, err := decodeOwner(encodeOwner(in))
		switch {
		case in.Level > owner.LevelCheckpoint:
			if err == nil {
				t.Fatalf("decoded an owner of unknown level %d: %+v", level, out)
			}
		case err != nil:
			t.Fatalf("decodeOwner(encodeOwner(%+v)): %v", in, err)
		case out != in:
			t.Fatalf("round trip of %+v gave %+v", in, out)
		}
	})
}

// FuzzJSONRecords covers the records kept as JSON (jobs, executors, holds),
// in both of their forms: as stored, and as statefs prints them and the
// control socket carries them. A value that decodes encodes to a value that
// decodes to the same record, so rewriting a record (every NoteWrite does)
// never changes what it says, and a record sent over the socket arrives
// whole.
func FuzzJSONRecords(f *testing.F) {
	job := &Job{ID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", FirstWrite: 1, LastWrite: 2, Executors: []string{"tm-1"}, Verdict: VerdictGone, Since: 3, Operator: VerdictLive}
	hold := &Hold{ID: "0000000000000001", Ino: 9, Path: "tm_1/localState/aid_x", Jobs: []string{"j"}, At: 1, Files: 2, Bytes: -1, Dropping: "ttl"}
	executor := &Executor{ID: "tm-1", LastWrite: 5, Jobs: []string{"j"}, Verdict: VerdictLive, Since: 4, Operator: VerdictGone, OperatorAt: 3}
	for _, v := range []any{job, (*storedJob)(job), executor, (*storedExecutor)(executor), hold, (*storedHold)(hold)} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"\ud800","executors":[],"jobs":null,"files":1e400}`))
	type form struct {
		name   string
		decode func([]byte) (any, error)
		encode func(any) ([]byte, error)
	}
	printed := func(v any) ([]byte, error) { return json.Marshal(v) }
	into := func(v any) func([]byte) (any, error) {
		return func(b []byte) (any, error) { return v, json.Unmarshal(b, v) }
	}
	forms := []func() form{
		func() form {
			return form{"stored job", func(b []byte) (any, error) { return decodeJob(b) }, func(v any) ([]byte, error) { return encodeJob(v.(*Job)) }}
		},
		func() form { return form{"printed job", into(&Job{}), printed} },
		func() form {
			return form{"stored executor", func(b []byte) (any, error) { return decodeExecutor(b) }, func(v any) ([]byte, error) { return encodeExecutor(v.(*Executor)) }}
		},
		func() form { return form{"printed executor", into(&Executor{}), printed} },
		func() form {
			return form{"stored hold", func(b []byte) (any, error) { return decodeHold(b) }, func(v any) ([]byte, error) { return json.Marshal((*storedHold)(v.(*Hold))) }}
		},
		func() form { return form{"printed hold", into(&Hold{}), printed} },
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, newForm := range forms {
			fm := newForm()
			first, err := fm.decode(b)
			if err != nil {
				continue
			}
			enc, err := fm.encode(first)
			if err != nil {
				t.Fatalf("%s decoded from %q does not encode: %v", fm.name, b, err)
			}
			fm = newForm()
			second, err := fm.decode(enc)
			if err != nil {
				t.Fatalf("%s: %q encodes to %q, which does not decode: %v", fm.name, b, enc, err)
			}
			if again, _ := fm.encode(second); !bytes.Equal(again, enc) {
				t.Fatalf("%s: %q encodes to %q, which re-encodes to %q", fm.name, b, enc, again)
			}
		}
	})
}

// FuzzIndexRecord writes an arbitrary value under one real key of an index
// that holds every kind of record, then reads the whole index back through
// the API the daemon, the collector and the CLI use, and runs Check (statefs
// fsck). Nothing may panic, and a corruption Check calls clean must not make
// any reader fail: whatever breaks the daemon, fsck reports. The key is the
// n-th of those with the given prefix byte (keys.go lists them),
// or of all keys if none has it.
func FuzzIndexRecord(f *testing.F) {
	db, keys := recordFixture(f)
	for _, k := range keys {
		v, err := getRaw(db, k)
		if err != nil {
			f.Fatal(err)
		}
		n := uint16(slices.IndexFunc(withPrefix(keys, k[0]), func(x []byte) bool { return bytes.Equal(x, k) }))
		for _, bad := range [][]byte{{}, bytes.Repeat([]byte{0xff}, 8)} {
			f.Add(k[0], n, bad)
		}
		if len(v) > 0 {
			f.Add(k[0], n, v[:len(v)-1])
			f.Add(k[0], n, append(v, 0))
		}
	}
	f.Fuzz(func(t *testing.T, prefix byte, n uint16, value []byte) {
		candidates := withPrefix(keys, prefix)
		if len(candidates) == 0 {
			candidates = keys
		}
		key := candidates[int(n)%len(candidates)]
		old, err := getRaw(db, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *Tx) error { return tx.set(key, value) }); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := db.Update(func(tx *Tx) error { return tx.set(key, old) }); err != nil {
				t.Fatal(err)
			}
		}()
		readErr := db.View(readEverything)
		problems, _, err := db.Check()
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if readErr != nil && len(problems) == 0 {
			t.Fatalf("key %q = %x: reading the index fails (%v), but Check finds nothing wrong", key, value, readErr)
		}
	})
}

func withPrefix(keys [][]byte, prefix byte) [][]byte {
	var out [][]byte
	for _, k := range keys {
		if k[0] == prefix {
			out = append(out, k)
		}
	}
	return out
}

func getRaw(db *DB, key []byte) (v []byte, err error) {
	err = db.View(func(tx *Tx) error { v, err = tx.get(key); return err })
	return v, err
}

// recordFixture builds an index with a record of each kind: directories,
// files with owners, a hard link, a symlink, a sealed file, a staged file,
// an extended attribute, an orphan, a held tree, job and executor records.
// It returns the index and its keys (sequences and the format version
// aside: Open reads those).
func recordFixture(tb testing.TB) (*DB, [][]byte) {
	db, err := Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	rules := owner.FlinkRules()
	const sti = "tm_x/localState/aid_dddddddddddddddddddddddddddddddd/jid_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/vtx_cccccccccccccccccccccccccccccccc_sti_0"
	inos := map[string]uint64{"": RootIno}
	err = db.Update(func(tx *Tx) error {
		mk := func(p string, mode uint32, target string) (*Inode, error) {
			ino, err := db.NewIno()
			if err != nil {
				return nil, err
			}
			now := Now()
			n := &Inode{Ino: ino, Mode: mode, Atime: now, Mtime: now, Ctime: now, Btime: now, Target: target}
			if n.Owner, err = tx.OwnerID(rules.Owner(p)); err != nil {
				return nil, err
			}
			dir, name := p[:max(strings.LastIndex(p, "/"), 0)], p[strings.LastIndex(p, "/")+1:]
			if err := tx.Create(inos[dir], name, n); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			inos[p] = ino
			return n, tx.NoteWrite(rules.Owner(p), now)
		}
		for _, p := range []string{"tm_x", "tm_x/localState", "tm_x/localState/aid_dddddddddddddddddddddddddddddddd",
			"tm_x/localState/aid_dddddddddddddddddddddddddddddddd/jid_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", sti, sti + "/chk_1", "plain"} {
			if _, err := mk(p, syscall.S_IFDIR|0o755, ""); err != nil {
				return err
			}
		}
		sealed, err := mk(sti+"/chk_1/000001.sst", syscall.S_IFREG|0o644, "")
		if err != nil {
			return err
		}
		if sealed, err = tx.Link(inos["plain"], "link", sealed.Ino); err != nil {
			return err
		}
		if _, err := tx.SetStaging(sealed, 1); err != nil {
			return err
		}
		m := &manifest.Manifest{Size: 300, Extents: []manifest.Extent{
			{Off: 0, Len: 100, Hash: cas.Sum([]byte("a"))}, {Off: 200, Len: 100, Hash: cas.Sum([]byte("b"))}}}
		now := Now()
		if err := tx.Seal(sealed.Ino, 1, m, now, now); err != nil {
			return err
		}
		staged, err := mk("plain/staged", syscall.S_IFREG|0o600, "")
		if err != nil {
			return err
		}
		if _, err := tx.SetStaging(staged, 2); err != nil {
			return err
		}
		if _, err := mk("plain/symlink", syscall.S_IFLNK|0o777, "../tm_x"); err != nil {
			return err
		}
		if err := tx.SetXattr(staged.Ino, "user.k", []byte("v")); err != nil {
			return err
		}
		if _, err := mk("plain/orphan", syscall.S_IFREG|0o644, ""); err != nil {
			return err
		}
		if _, err := tx.Unlink(inos["plain"], "orphan"); err != nil {
			return err
		}
		// A held subtask: made pending as --hold-deletes does, then held.
		if _, err := mk(sti+"/chk_2", syscall.S_IFDIR|0o755, ""); err != nil {
			return err
		}
		if _, err := tx.MakePending(inos[sti], "chk_2", strings.TrimSuffix(sti, "/")); err != nil {
			return err
		}
		pending, err := tx.Attic(AtticPending, false)
		if err != nil {
			return err
		}
		return tx.HoldPending(pending.Ino, "tm_x", &Hold{ID: "0000000000000001", Path: "tm_x", At: Now()})
	})
	if err != nil {
		tb.Fatal(err)
	}
	if problems, _, err := db.Check(); err != nil || len(problems) > 0 {
		tb.Fatalf("the fixture is not consistent: %v %v", problems, err)
	}
	if err := db.View(readEverything); err != nil {
		tb.Fatalf("reading the fixture: %v", err)
	}
	var keys [][]byte
	err = db.View(func(tx *Tx) error {
		return tx.scan(nil, false, func(k, _ []byte) (bool, error) {
			if k[0] != prefixSeq && k[0] != prefixVersion && !bytes.HasPrefix(k, []byte("!badger")) {
				keys = append(keys, bytes.Clone(k))
			}
			return true, nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return db, keys
}

// readEverything reads every record of the index through the exported
// API, as the daemon, the collector and the CLI do, and returns every error.
func readEverything(tx *Tx) error {
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	tops := []uint64{RootIno}
	attic, err := tx.AtticInos()
	note(err)
	tops = append(tops, attic...)
	orphans, err := tx.Orphans()
	note(err)
	visit := func(p string, n *Inode) error {
		o, err := tx.Owner(n.Owner)
		note(err)
		if n.Owner != 0 && err == nil {
			id, err := tx.OwnerID(o)
			note(err)
			if err == nil && id != n.Owner {
				note(fmt.Errorf("%s: owner %d interned as %d", p, n.Owner, id))
			}
		}
		note(tx.Xattrs(n.Ino, func(string) {}))
		if n.IsRegular() {
			if n.Staging != 0 {
				ino, err := tx.StagingInode(n.Staging)
				note(err)
				if err == nil && ino != n.Ino {
					note(fmt.Errorf("%s: staging file %d belongs to inode %d", p, n.Staging, ino))
				}
			}
			m, err := tx.Manifest(n.Ino)
			note(err)
			if err == nil {
				for _, h := range m.Chunks() {
					_, err := tx.ChunkRefs(h)
					note(err)
				}
			}
		}
		return nil
	}
	for _, top := range tops {
		n, err := tx.Inode(top)
		note(err)
		if err == nil {
			note(visit("", n))
			note(tx.Walk(top, visit))
		}
	}
	for _, ino := range orphans {
		n, err := tx.Inode(ino)
		note(err)
		if err == nil {
			note(visit(fmt.Sprint("orphan ", ino), n))
		}
	}
	_, err = tx.Usage()
	note(err)
	jobs, err := tx.Jobs()
	note(err)
	for _, j := range jobs {
		_, err := tx.JobRoots(j.ID)
		note(err)
		_, err = tx.Job(j.ID)
		note(err)
	}
	executors, err := tx.Executors()
	note(err)
	for _, e := range executors {
		_, err := tx.ExecutorRoots(e.ID)
		note(err)
	}
	holds, err := tx.Holds()
	note(err)
	for _, h := range holds {
		_, err := tx.Hold(h.ID)
		note(err)
	}
	_, err = tx.Resolve("tm_x/localState")
	note(err)
	return errors.Join(errs...)
}
