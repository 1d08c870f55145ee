package cas_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statefs/statefs/cas"
)

// A Bulk's chunks have no name until Flush, then read back like Put's, and
// leave no temporary file behind.
func TestBulkNamesChunksOnlyWhenFlushed(t *testing.T) {
	s, dir := openStore(t)
	have := put(t, s, []byte("stored before"))
	b := s.Bulk()
	var hashes []cas.Hash
	var datas [][]byte
	for i := range 100 {
		data := bytes.Repeat([]byte(fmt.Sprintf("chunk %d ", i)), i+1)
		h := cas.Sum(data)
		if err := b.Put(h, data); err != nil {
			t.Fatal(err)
		}
		hashes, datas = append(hashes, h), append(datas, data)
	}
	if err := b.Put(have, []byte("stored before")); err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		if ok, err := s.Has(h); err != nil || ok {
			t.Fatalf("chunk %s has a name before Flush (Has: %v, %v)", h, ok, err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, h := range hashes {
		got, err := s.Get(h, nil)
		if err != nil || !bytes.Equal(got, datas[i]) {
			t.Fatalf("Get %s after Flush: %v, %d bytes, want %d", h, err, len(got), len(datas[i]))
		}
	}
	if temps := tempFiles(t, dir); len(temps) > 0 {
		t.Fatalf("temporary files left after Flush: %v", temps)
	}
}

// A Bulk that never flushes (a crash) leaves only temporary files, which
// the next process removes (RemoveStaleTemps). The one this process left is
// renamed as another process would have named it.
func TestBulkUnflushedLeavesNothing(t *testing.T) {
	s, dir := openStore(t)
	b := s.Bulk()
	data := []byte("never flushed")
	if err := b.Put(cas.Sum(data), data); err != nil {
		t.Fatal(err)
	}
	temps := tempFiles(t, dir)
	if len(temps) != 1 {
		t.Fatal("want one temporary file before the reopen")
	}
	dead := filepath.Join(filepath.Dir(temps[0]), ".tmp-dead-"+strings.TrimPrefix(filepath.Base(temps[0]), cas.OwnTemps))
	if err := os.Rename(temps[0], dead); err != nil {
		t.Fatal(err)
	}
	s, err := cas.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Has(cas.Sum(data)); ok {
		t.Fatal("an unflushed chunk has a name")
	}
	if err := s.RemoveStaleTemps(); err != nil {
		t.Fatal(err)
	}
	if temps := tempFiles(t, dir); len(temps) > 0 {
		t.Fatalf("RemoveStaleTemps left temporary files: %v", temps)
	}
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var temps []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			temps = append(temps, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return temps
}
