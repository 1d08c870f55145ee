package test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/stretchr/testify/require"
)

// The jobs whose trees the inspect tests write: the same seed gives their
// SSTs the same content, so each job's SSTs deduplicate against the other's.
const (
	inspectJobX = "dddddddddddddddddddddddddddddddd"
	inspectJobY = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

// inspectOutput is the part of `statefs inspect --json` the tests read.
type inspectOutput struct {
	Type    string `json:"type"`
	Size    uint64 `json:"size"`
	Content string `json:"content"`
	Owner   struct {
		Level string `json:"level"`
		Job   string `json:"job"`
	} `json:"owner"`
	Extents []struct {
		Len       uint32 `json:"len"`
		Chunk     string `json:"chunk"`
		DiskBytes int64  `json:"disk_bytes"`
		Refs      uint64 `json:"refs"`
	} `json:"extents"`
	Sharing struct {
		UniqueBytes int64 `json:"unique_bytes"`
		SharedBytes int64 `json:"shared_bytes"`
	} `json:"sharing"`
	Entries *int `json:"entries"`
}

type duGroup struct {
	Group         string `json:"group"`
	Files         int    `json:"files"`
	LogicalBytes  int64  `json:"logical_bytes"`
	PhysicalBytes int64  `json:"physical_bytes"`
}

type duOutput struct {
	Groups            []duGroup `json:"groups"`
	Total             duGroup   `json:"total"`
	UnreferencedBytes int64     `json:"unreferenced_bytes"`
}

// inspect and du give the same answers through the daemon and offline: the
// owner and chunks of a file, its sharing with the other job's copy, and
// each job's files and bytes, which add up to the chunk store.
func TestInspectAndDU(t *testing.T) {
	m := mountFS(t, append(sealDelayZero, "--seal-as", "chunks")...)
	x := flinkTree(t, m, inspectJobX, 70)
	y := flinkTree(t, m, inspectJobY, 70)
	waitAllSealed(t, m)

	var sst string
	var logicalX, logicalY int64
	for p, b := range x {
		logicalX += int64(len(b))
		if strings.HasSuffix(p, "rocks/000012.sst") {
			sst = p
		}
	}
	for _, b := range y {
		logicalY += int64(len(b))
	}
	require.NotEmpty(t, sst)

	for _, mounted := range []bool{true, false} {
		t.Run(fmt.Sprintf("mounted=%v", mounted), func(t *testing.T) {
			if !mounted {
				m.Unmount()
			}
			var in inspectOutput
			cliJSON(t, &in, "inspect", "--store", m.Store, "--json", sst)
			require.Equal(t, "file", in.Type)
			require.Equal(t, "sealed", in.Content)
			require.Equal(t, uint64(len(x[sst])), in.Size)
			require.Equal(t, "checkpoint", in.Owner.Level)
			require.Equal(t, inspectJobX, in.Owner.Job)
			require.NotEmpty(t, in.Extents)
			var covered int64
			for _, e := range in.Extents {
				require.Equal(t, uint64(2), e.Refs, "chunk %s of %s: job Y's copy shares it", e.Chunk, sst)
				require.Greater(t, e.DiskBytes, int64(e.Len), "random bytes are stored raw, with a header")
				covered += int64(e.Len)
			}
			require.Equal(t, int64(len(x[sst])), covered)
			require.Zero(t, in.Sharing.UniqueBytes)
			require.Equal(t, covered, in.Sharing.SharedBytes)

			text := mustCLI(t, "inspect", "--store", m.Store, "--bytes", sst)
			require.Contains(t, text, "job "+inspectJobX)
			require.Contains(t, text, "sealed as chunks, "+fmt.Sprint(len(in.Extents))+" extents")
			require.Contains(t, text, in.Extents[0].Chunk)
			require.Contains(t, text, fmt.Sprintf("shared   %d in", covered))
			require.Contains(t, mustCLI(t, "inspect", "--store", m.Store, sst), fmt.Sprintf("shared   %s in", humanize.IBytes(uint64(covered))))

			var dir inspectOutput
			cliJSON(t, &dir, "inspect", "--store", m.Store, "--json", strings.TrimSuffix(sst, "/000012.sst"))
			require.Equal(t, "directory", dir.Type)
			require.NotNil(t, dir.Entries)
			require.Equal(t, 1, *dir.Entries)

			var du duOutput
			cliJSON(t, &du, "du", "--store", m.Store, "--json")
			require.Len(t, du.Groups, 2, "%+v", du.Groups)
			gx, gy := du.Groups[0], du.Groups[1]
			require.Equal(t, inspectJobX, gx.Group)
			require.Equal(t, inspectJobY, gy.Group)
			require.Equal(t, len(x), gx.Files)
			require.Equal(t, len(y), gy.Files)
			require.Equal(t, logicalX, gx.LogicalBytes)
			require.Equal(t, logicalY, gy.LogicalBytes)
			chunks := chunkBytes(t, m)
			require.Equal(t, chunks, du.Total.PhysicalBytes, "the shares add up to the chunk store")
			require.Zero(t, du.UnreferencedBytes)
			// The jobs share every chunk: each pays half, give or take a byte
			// a chunk.
			require.InDelta(t, gx.PhysicalBytes, gy.PhysicalBytes, 16)

			text = mustCLI(t, "du", "--store", m.Store, "--bytes")
			require.Regexp(t, fmt.Sprintf(`(?m)^ *%d +%d +%d +%s$`, gx.Files, gx.LogicalBytes, gx.PhysicalBytes, inspectJobX), text)
			require.Regexp(t, fmt.Sprintf(`(?m)^ *%d +%d +%d +total$`, len(x)+len(y), logicalX+logicalY, chunks), text)
			// By default sizes read as people read them, right-aligned.
			text = mustCLI(t, "du", "--store", m.Store)
			require.Regexp(t, fmt.Sprintf(`(?m)^ *%d +%s +%s +total$`, len(x)+len(y),
				regexp.QuoteMeta(humanize.IBytes(uint64(logicalX+logicalY))), regexp.QuoteMeta(humanize.IBytes(uint64(chunks)))), text)

			var byExec duOutput
			cliJSON(t, &byExec, "du", "--store", m.Store, "--by", "executor", "--json")
			require.Equal(t, []duGroup{{Group: "tm-1", Files: len(x) + len(y), LogicalBytes: logicalX + logicalY, PhysicalBytes: chunks}}, byExec.Groups)
		})
	}
}

// Bad input gets one line and exit 1, with or without a daemon.
func TestInspectAndDURefuse(t *testing.T) {
	m := mountFS(t)
	flinkTree(t, m, inspectJobX, 80)
	for _, mounted := range []bool{true, false} {
		t.Run(fmt.Sprintf("mounted=%v", mounted), func(t *testing.T) {
			absPath, absolute := m.Path("tm_tm-1"), []string{"absolute", "relative to the mount root", "not mounted"}
			if mounted {
				// A daemon takes an absolute path inside its mount, as
				// restore does, and refuses one outside it.
				require.Contains(t, mustCLI(t, "inspect", "--store", m.Store, m.Path("tm_tm-1")), "path     tm_tm-1")
				absPath, absolute = "/etc", []string{"/etc", "not inside the mount"}
			} else {
				m.Unmount()
			}
			for _, c := range []struct {
				args  []string
				names []string
			}{
				{[]string{"inspect", "--store", m.Store, absPath}, absolute},
				{[]string{"inspect", "--store", m.Store, "tm_tm-1/../tm_tm-1"}, []string{"'..'"}},
				{[]string{"inspect", "--store", m.Store}, []string{"PATH"}},
				{[]string{"inspect", "--store", m.Store, "a", "b"}, []string{"PATH"}},
				{[]string{"inspect", "--store", m.Store, "tm_tm-1/nothing/here"}, []string{"tm_tm-1/nothing: not found"}},
				{[]string{"inspect", "--store", m.Dir, "tm_tm-1"}, []string{"not a statefs store"}},
				{[]string{"du", "--store", m.Store, "--by", "vertex"}, []string{`"vertex"`, "job, executor or allocation"}},
				{[]string{"du", "--store", m.Store, "extra"}, []string{"no arguments"}},
				{[]string{"du", "--store", m.Dir}, []string{"not a statefs store"}},
			} {
				r := runCLI(t, 30*time.Second, c.args...)
				require.Equal(t, 1, r.code, "statefs %q: %s", c.args, r.stderr)
				requireOneLineError(t, r, c.names...)
			}
		})
	}
}
