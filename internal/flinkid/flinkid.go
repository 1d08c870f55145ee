// Package flinkid holds the Flink ids that tests in several packages write
// their paths with, so that each package's fixtures agree on them: test
// paths name ids by placeholder ("tm_x/localState/aid_{D}/jid_{A}") and
// Expand makes them real. It also lists the strings that must never pass
// for a job id.
package flinkid

import "strings"

// The ids the placeholders stand for, as Flink prints them.
const (
	JobA        = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"     // {A}
	JobB        = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"     // {B}
	AllocationD = "dddddddddddddddddddddddddddddddd"     // {D}
	AllocationE = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"     // {E}
	AllocationF = "ffffffffffffffffffffffffffffffff"     // {F}
	Vertex      = "cccccccccccccccccccccccccccccccc"     // {V}
	UUID        = "12345678-9abc-def0-1234-56789abcdef0" // {U}, a RocksDB instance's
)

var (
	expand = strings.NewReplacer(
		"{A}", JobA, "{B}", JobB,
		"{D}", AllocationD, "{E}", AllocationE, "{F}", AllocationF,
		"{V}", Vertex, "{U}", UUID,
	)
	shorten = strings.NewReplacer(
		JobA, "{A}", JobB, "{B}",
		AllocationD, "{D}", AllocationE, "{E}", AllocationF, "{F}",
		Vertex, "{V}", UUID, "{U}",
	)
)

// Expand replaces each placeholder in s by its id.
func Expand(s string) string { return expand.Replace(s) }

// Shorten writes the ids in s back as their placeholders, for messages.
func Shorten(s string) string { return shorten.Replace(s) }

// InvalidJobIDs are strings no code may take for a job id: each would
// escape a URL path or a directory, or is simply not the form Flink prints.
var InvalidJobIDs = []string{
	"",
	"../x",
	"a/b",
	"%2e%2e",
	"..",
	".",
	"A1B2C3D4E5F60718293A4B5C6D7E8F90",  // Flink prints lowercase
	"a1b2c3d4e5f60718293a4b5c6d7e8f9",   // 31
	"a1b2c3d4e5f60718293a4b5c6d7e8f900", // 33
	"a1b2c3d4e5f60718293a4b5c6d7e8f9g",
	"a1b2c3d4e5f60718293a4b5c6d7e8/..",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9\x00",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9\n",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9?",
	"a1b2c3d4e5f60718293a4b5c6d7e8%2f",
	"ａ1b2c3d4e5f60718293a4b5c6d7e8f90",
}
