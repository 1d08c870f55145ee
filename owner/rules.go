package owner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
)

// Rules map a path (relative to the mount root, slash-separated, no leading
// slash, e.g. "tm_tm-1/localState/aid_x/jid_y/vtx_z_sti_0/chk_5/_task_state_snapshot")
// to its Owner. A Rules is immutable and safe for concurrent use.
//
// # Rules files
//
// A rules file (statefs mount --rules FILE) has one entry per line. Blank
// lines and lines whose first non-blank character is '#' are ignored; there
// are no trailing comments ('#' may be part of a pattern). An entry is
//
//	LEVEL PATTERN
//	define NAME PATTERN
//
// separated by spaces or tabs; PATTERN is the rest of the line without its
// surrounding blanks, a Go regexp (RE2 syntax).
//
// LEVEL is one of executor, job, allocation, job-in-allocation, subtask,
// checkpoint. A rule's pattern is matched against the path from its start and
// only up to a component boundary: it is compiled as ^(?:PATTERN)(?:/|$), so
// "(?P<job>[a-z]+)" matches "app" and "app/0_1/rocksdb" (job "app") but not
// "app1" or "app1/x". A pattern therefore must not end in '/'.
//
// Named captures say what the rule learns: executor, allocation, job, vertex,
// subtask, checkpoint, and no other name, each at most once per rule. A
// capture must not be able to match '/', so every id lies within one path
// component. A rule must capture the ids its level is about: executor for
// executor, job for job, allocation for allocation, allocation and job for
// job-in-allocation, subtask for subtask, checkpoint for checkpoint. A rule
// matches a path only if its pattern matches and those captures are
// non-empty; its other captures count where they are non-empty.
//
// A path's Owner is merged from every rule that matches it: Level is the
// deepest level among them, and each id comes from the deepest matching rule
// that captures it (among rules of equal level, the one earlier in the file).
// No matching rule: LevelNone, unowned, never collected automatically. A path
// keeps every id of its parent directory's Owner as long as each rule names
// its components one by one, as flink.rules does (a rule like
// "(?:[^/]+/)*(?P<job>[a-z]+)" does not: its job is the last component).
//
// "define NAME PATTERN" names a pattern (NAME: a letter or '_', then letters,
// digits, '_'); "${NAME}" in any later pattern stands for (?:PATTERN).
// Definitions keep id syntaxes in one place; they are not rules.
//
// A file is refused, with "FILE:LINE: reason", for an unknown level keyword,
// a pattern that does not compile, an unknown or repeated capture name, a
// capture that can match '/', a rule without the captures its level needs, a
// pattern ending in '/', an undefined or redefined NAME, the same pattern
// twice (at any level), or no rules at all.
//
// Owner runs on every create, mkdir and rename, so rules are tried deepest
// level first and a rule that could add nothing to what deeper rules found is
// skipped; still, Go regexps are slow on long paths, some thirty times
// slower than a parser for a file in a RocksDB checkpoint (go test -bench
// Owner ./owner/). That is why Flink's layout (FlinkRules) is built in,
// parsed component by component with no allocation. flink.rules in this
// package states the
// same rules in this format, as a starting point for other layouts, and the
// tests hold the two to agreement.
type Rules struct {
	rules []rule // deepest level first, file order within a level
	flink bool   // the built-in Flink layout, not rules
}

// rule is one compiled rule line.
type rule struct {
	level Level
	re    *regexp.Regexp
	caps  []capture
	has   fieldSet // every field the rule captures
	need  fieldSet // the fields its level needs non-empty
}

// capture ties a capture group of a rule's regexp to an Owner field.
type capture struct {
	group int
	f     field
}

// field is an id field of Owner.
type field uint8

const (
	fieldExecutor field = iota
	fieldAllocation
	fieldJob
	fieldVertex
	fieldSubtask
	fieldCheckpoint
	numFields
)

// fieldNames are the capture names of the fields.
var fieldNames = [numFields]string{"executor", "allocation", "job", "vertex", "subtask", "checkpoint"}

type fieldSet uint8

func (s fieldSet) has(f field) bool { return s&(1<<f) != 0 }

// levelNeeds are the fields a rule of each level must capture.
var levelNeeds = [...]fieldSet{
	LevelExecutor:        1 << fieldExecutor,
	LevelJob:             1 << fieldJob,
	LevelAllocation:      1 << fieldAllocation,
	LevelJobInAllocation: 1<<fieldAllocation | 1<<fieldJob,
	LevelSubtask:         1 << fieldSubtask,
	LevelCheckpoint:      1 << fieldCheckpoint,
}

// LoadRules reads a rules file.
func LoadRules(path string) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseRules(path, f)
}

// maxLine bounds a rules file's line, and a pattern with its ${NAME}s
// expanded.
const maxLine = 64 << 10

// ParseRules reads a rules file (see Rules) from r; name is what its errors
// call it.
func ParseRules(name string, r io.Reader) (*Rules, error) {
	p := parser{name: name, defs: map[string]string{}, seen: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(strings.TrimSpace(sc.Text())); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		p.line++ // the line it could not read
		return nil, p.errorf("%v", err)
	}
	if len(p.rules) == 0 {
		return nil, p.errorf("no rules")
	}
	sort.SliceStable(p.rules, func(i, j int) bool { return p.rules[i].level > p.rules[j].level })
	return &Rules{rules: p.rules}, nil
}

type parser struct {
	name  string
	line  int
	defs  map[string]string // define NAME -> its pattern, expanded
	seen  map[string]int    // rule pattern, expanded and simplified -> its line
	rules []rule
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.name, max(p.line, 1), fmt.Sprintf(format, args...))
}

func (p *parser) parseLine(line string) error {
	if line == "" || line[0] == '#' {
		return nil
	}
	keyword, rest := cutBlank(line)
	if keyword == "define" {
		name, pattern := cutBlank(rest)
		return p.define(name, pattern)
	}
	level := LevelNone
	for l := LevelExecutor; int(l) < len(levelNames); l++ {
		if keyword == levelNames[l] {
			level = l
		}
	}
	if level == LevelNone {
		return p.errorf("unknown level %q (want executor, job, allocation, job-in-allocation, subtask, checkpoint or define)", keyword)
	}
	return p.rule(level, rest)
}

// cutBlank splits s at its first run of blanks.
func cutBlank(s string) (before, after string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

var defName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (p *parser) define(name, pattern string) error {
	if !defName.MatchString(name) {
		return p.errorf("define: bad name %q", name)
	}
	if _, ok := p.defs[name]; ok {
		return p.errorf("define: %s is already defined", name)
	}
	if pattern == "" {
		return p.errorf("define %s: no pattern", name)
	}
	expanded, err := p.expand(pattern)
	if err != nil {
		return err
	}
	if _, err := syntax.Parse(expanded, syntax.Perl); err != nil {
		return p.errorf("define %s: %v", name, err)
	}
	p.defs[name] = expanded
	return nil
}

// expand replaces each ${NAME} in pattern by (?:its definition).
func (p *parser) expand(pattern string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(pattern, "${")
		if i < 0 {
			b.WriteString(pattern)
			return b.String(), nil
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return "", p.errorf("${ without }")
		}
		name := pattern[i+2 : i+j]
		def, ok := p.defs[name]
		if !ok {
			return "", p.errorf("${%s} is not defined", name)
		}
		b.WriteString(pattern[:i])
		b.WriteString("(?:" + def + ")")
		pattern = pattern[i+j+1:]
		// Each define may use the previous ones twice: without a bound, a
		// few dozen lines would expand to gigabytes.
		if b.Len()+len(pattern) > maxLine {
			return "", p.errorf("pattern longer than %d bytes once ${...} are expanded", maxLine)
		}
	}
}

func (p *parser) rule(level Level, pattern string) error {
	if pattern == "" {
		return p.errorf("%s: no pattern", level)
	}
	if strings.HasSuffix(pattern, "/") {
		return p.errorf("pattern ends in '/': a rule matches whole components, the boundary is implied")
	}
	expanded, err := p.expand(pattern)
	if err != nil {
		return err
	}
	tree, err := syntax.Parse(expanded, syntax.Perl)
	if err != nil {
		return p.errorf("%v", err)
	}
	canonical := tree.Simplify().String()
	if line, ok := p.seen[canonical]; ok {
		return p.errorf("same pattern as line %d", line)
	}
	if name := slashCapture(tree); name != "" {
		return p.errorf("capture %s can match '/': an id must lie within one path component", name)
	}
	re, err := regexp.Compile("^(?:" + expanded + ")(?:/|$)")
	if err != nil {
		return p.errorf("%v", err)
	}
	ru := rule{level: level, re: re, need: levelNeeds[level]}
	for group, name := range re.SubexpNames() {
		if name == "" {
			continue
		}
		f := field(0)
		for f < numFields && fieldNames[f] != name {
			f++
		}
		if f == numFields {
			return p.errorf("unknown capture %q (want executor, allocation, job, vertex, subtask or checkpoint)", name)
		}
		if ru.has.has(f) {
			return p.errorf("capture %s appears twice", name)
		}
		ru.caps = append(ru.caps, capture{group: group, f: f})
		ru.has |= 1 << f
	}
	if missing := ru.need &^ ru.has; missing != 0 {
		for f := range numFields {
			if missing.has(f) {
				return p.errorf("a %s rule needs a (?P<%s>...) capture", level, fieldNames[f])
			}
		}
	}
	p.seen[canonical] = p.line
	p.rules = append(p.rules, ru)
	return nil
}

// slashCapture returns the name of a named capture in re that can match '/',
// or "".
func slashCapture(re *syntax.Regexp) string {
	if re.Op == syntax.OpCapture && re.Name != "" && canMatchSlash(re) {
		return re.Name
	}
	for _, sub := range re.Sub {
		if name := slashCapture(sub); name != "" {
			return name
		}
	}
	return ""
}

func canMatchSlash(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpLiteral:
		return strings.ContainsRune(string(re.Rune), '/')
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '/' && '/' <= re.Rune[i+1] {
				return true
			}
		}
		return false
	}
	for _, sub := range re.Sub {
		if canMatchSlash(sub) {
			return true
		}
	}
	return false
}

// Owner returns the owner of path. With FlinkRules it allocates nothing;
// with a rules file, one small slice per matching rule it has to consult.
func (r *Rules) Owner(path string) Owner {
	if r.flink {
		return flinkOwner(path)
	}
	var ids [numFields]string
	var set fieldSet
	level := LevelNone
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.level <= level && ru.has&^set == 0 {
			continue // a deeper or earlier rule already said all this one could
		}
		m := ru.re.FindStringSubmatchIndex(path)
		if m == nil {
			continue
		}
		var got fieldSet
		for _, c := range ru.caps {
			if m[2*c.group+1] > m[2*c.group] {
				got |= 1 << c.f
			}
		}
		if ru.need&^got != 0 {
			continue
		}
		for _, c := range ru.caps {
			if got.has(c.f) && !set.has(c.f) {
				ids[c.f] = path[m[2*c.group]:m[2*c.group+1]]
				set |= 1 << c.f
			}
		}
		level = max(level, ru.level)
	}
	return Owner{
		Executor:   ids[fieldExecutor],
		Allocation: ids[fieldAllocation],
		Job:        ids[fieldJob],
		Vertex:     ids[fieldVertex],
		Subtask:    ids[fieldSubtask],
		Checkpoint: ids[fieldCheckpoint],
		Level:      level,
	}
}
