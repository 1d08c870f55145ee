package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is one run of the harness: what it ran on and how, and a table
// per workload. It is written as JSON and as Markdown.
type Report struct {
	Command     string            `json:"command"`
	Machine     Machine           `json:"machine"`
	Targets     map[string]string `json:"targets"` // how each target was run
	TookSeconds float64           `json:"took_seconds"`
	Workloads   []*Workload       `json:"workloads"`
}

// Workload is one table: the medians of a workload's metrics per target.
type Workload struct {
	ID      int       `json:"id"`
	Title   string    `json:"title"`
	Setup   string    `json:"setup"` // sizes and method, one paragraph
	Reps    int       `json:"reps"`
	Caches  string    `json:"caches"`
	Notes   []string  `json:"notes,omitempty"`
	Error   string    `json:"error,omitempty"` // set when the workload could not finish
	Metrics []*Metric `json:"metrics"`
}

// Metric is one row: samples per target, their medians, statefs's ratios
// to the other two, and its target, if it has one.
type Metric struct {
	Name                string               `json:"name"`
	Unit                string               `json:"unit"`
	HigherIsBetter      bool                 `json:"higher_is_better"`
	Samples             map[string][]float64 `json:"samples"`
	Median              map[string]float64   `json:"median"`
	StatefsOverNative   *float64             `json:"statefs_over_native,omitempty"`
	StatefsOverLoopback *float64             `json:"statefs_over_loopback,omitempty"`
	StatefsOverNoKeeper *float64             `json:"statefs_over_no_keeper,omitempty"`
	Goal                *Goal                `json:"goal,omitempty"`
	Met                 *bool                `json:"met,omitempty"`
	// KeeperMet says whether statefs is within keeperBound of noKeeper,
	// judged on a row with a Goal where both were measured.
	KeeperMet *bool `json:"keeper_met,omitempty"`
}

// keeperBound is how much worse than noKeeper statefs may be on a row with
// a target, as a fraction: the keeper must cost nothing measurable.
const keeperBound = 0.05

// keeperGoal is the target on statefs's ratio to noKeeper, on a row with a
// target: within keeperBound, the way the row gets better.
func (m *Metric) keeperGoal() *Goal {
	if m.HigherIsBetter {
		return ratioGoal(">=", 1-keeperBound, noKeeper)
	}
	return ratioGoal("<=", 1+keeperBound, noKeeper)
}

// Goal is a target of the benchmark: statefs's ratio to Against (or, with
// Against empty, statefs's own value) compared by Op with Bound.
type Goal struct {
	Text    string  `json:"text"`
	Against string  `json:"against,omitempty"`
	Op      string  `json:"op"` // ">=", "<=" or "<"
	Bound   float64 `json:"bound"`
}

// ratioGoal is a target on statefs's ratio to another target.
func ratioGoal(op string, bound float64, against string) *Goal {
	sym := map[string]string{">=": "≥", "<=": "≤", "<": "<"}[op]
	digits := 1
	if bound*10 != math.Trunc(bound*10) {
		digits = 2
	}
	return &Goal{Text: fmt.Sprintf("%s %.*f× %s", sym, digits, bound, against), Against: against, Op: op, Bound: bound}
}

// valueGoal is a target on statefs's own value.
func valueGoal(op string, bound float64, text string) *Goal {
	return &Goal{Text: text, Op: op, Bound: bound}
}

func newWorkload(id int, title string, reps int) *Workload {
	return &Workload{ID: id, Title: title, Reps: reps}
}

// metric adds a row to the table.
func (w *Workload) metric(name, unit string, higher bool, goal *Goal) *Metric {
	m := &Metric{Name: name, Unit: unit, HigherIsBetter: higher, Goal: goal,
		Samples: map[string][]float64{}, Median: map[string]float64{}}
	w.Metrics = append(w.Metrics, m)
	return m
}

func (w *Workload) note(format string, args ...any) {
	w.Notes = append(w.Notes, fmt.Sprintf(format, args...))
}

func (w *Workload) fail(err error) {
	if w.Error == "" {
		w.Error = err.Error()
	}
}

func (m *Metric) add(target string, v float64) {
	m.Samples[target] = append(m.Samples[target], v)
}

// finish computes the medians, ratios and whether each goal is met.
func (w *Workload) finish(c *caches) {
	w.Caches = c.State()
	for _, m := range w.Metrics {
		m.finish()
	}
}

func (m *Metric) finish() {
	for t, s := range m.Samples {
		m.Median[t] = median(s)
	}
	m.StatefsOverNative = m.ratio(native)
	m.StatefsOverLoopback = m.ratio(loopback)
	m.StatefsOverNoKeeper = m.ratio(noKeeper)
	if m.Goal == nil {
		return
	}
	if m.StatefsOverNoKeeper != nil {
		met := m.keeperGoal().judge(*m.StatefsOverNoKeeper)
		m.KeeperMet = &met
	}
	v, ok := m.Median[statefs], m.Samples[statefs] != nil
	if m.Goal.Against != "" {
		r := m.ratio(m.Goal.Against)
		v, ok = 0, r != nil
		if r != nil {
			v = *r
		}
	}
	if !ok {
		return
	}
	met := m.Goal.judge(v)
	m.Met = &met
}

// judge reports whether v meets the goal.
func (g *Goal) judge(v float64) bool {
	return map[string]bool{">=": v >= g.Bound, "<=": v <= g.Bound, "<": v < g.Bound}[g.Op]
}

// ratio is statefs's median over the target's, if both were measured.
func (m *Metric) ratio(target string) *float64 {
	s, ok1 := m.Median[statefs]
	o, ok2 := m.Median[target]
	if !ok1 || !ok2 || o == 0 {
		return nil
	}
	r := s / o
	return &r
}

func median(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func writeJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeMarkdown renders the report as BENCHMARKS.md holds it.
func writeMarkdown(w io.Writer, r *Report) {
	m := r.Machine
	fmt.Fprintf(w, "Measured %s with `%s` (took %s).\n\n", m.Date.Format("2006-01-02 15:04 MST"), r.Command,
		time.Duration(r.TookSeconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(w, "Machine: %d cores (%s), %.1f GiB RAM, Linux %s; work dir %s on %s (%s), %.0f GiB free of %.0f GiB; %s; %s; %s.\n\n",
		m.Cores, m.CPU, m.MemoryGiB, m.Kernel, m.Dir, m.Device, m.Filesystem, m.DiskFreeGiB, m.DiskSizeGiB,
		m.GoVersion, m.GoFUSE, m.RocksDB)
	fmt.Fprintln(w, "Targets, all on that disk:")
	fmt.Fprintln(w)
	for _, t := range append(slices.Clone(targetNames), noKeeper) {
		if desc, ok := r.Targets[t]; ok {
			fmt.Fprintf(w, "- **%s**: %s\n", t, desc)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each cell is the median over the repetitions (the targets take turns within each repetition); ratios are statefs's median over the other's; MB = 10^6 bytes; `—`: not measured for that target.")
	for _, wl := range r.Workloads {
		writeWorkload(w, wl)
	}
	writeSummary(w, r)
}

func writeWorkload(w io.Writer, wl *Workload) {
	reps := fmt.Sprintf("Median of %d", wl.Reps)
	if wl.Reps == 1 {
		reps = "One repetition"
	}
	fmt.Fprintf(w, "\n### %d. %s\n\n%s %s; %s.\n\n", wl.ID, wl.Title, wl.Setup, reps, wl.Caches)
	if wl.Error != "" {
		fmt.Fprintf(w, "**FAILED:** `%s`\n\n", oneLine(wl.Error))
	}
	// The columns of noKeeper come after the rest, where it ran, so that
	// every table starts the same.
	keeper := wl.measures(noKeeper)
	header, align := "| metric | native | loopback | statefs | statefs/native | statefs/loopback | target | |", "| --- | --: | --: | --: | --: | --: | --- | --- |"
	if keeper {
		header += fmt.Sprintf(" %s | keeper/no keeper | ≤ %.0f%% |", noKeeper, keeperBound*100)
		align += " --: | --: | --- |"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, align)
	for _, m := range wl.Metrics {
		fmt.Fprintf(w, "| %s (%s) | %s | %s | %s | %s | %s | %s | %s |", m.Name, m.Unit,
			cell(m, native), cell(m, loopback), cell(m, statefs),
			ratioCell(m.StatefsOverNative), ratioCell(m.StatefsOverLoopback), goalText(m), verdict(m))
		if keeper {
			fmt.Fprintf(w, " %s | %s | %s |", cell(m, noKeeper), ratioCell(m.StatefsOverNoKeeper), keeperVerdict(m))
		}
		fmt.Fprintln(w)
	}
	for _, n := range wl.Notes {
		fmt.Fprintf(w, "\n- %s", n)
	}
	if len(wl.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

// writeSummary lists every target with its verdict.
func writeSummary(w io.Writer, r *Report) {
	fmt.Fprintln(w, "\n### Targets\n\n| workload | metric | measured | target | |\n| --- | --- | --: | --- | --- |")
	for _, wl := range r.Workloads {
		for _, m := range wl.Metrics {
			if m.Goal == nil {
				continue
			}
			measured := cell(m, statefs) + " " + m.Unit
			if m.Goal.Against != "" {
				measured = ratioCell(m.ratio(m.Goal.Against))
			}
			fmt.Fprintf(w, "| %d. %s | %s | %s | %s | %s |\n", wl.ID, wl.Title, m.Name, measured, m.Goal.Text, verdict(m))
			if wl.measures(noKeeper) {
				fmt.Fprintf(w, "| %d. %s | %s, keeper/no keeper | %s | %s | %s |\n", wl.ID, wl.Title, m.Name,
					ratioCell(m.StatefsOverNoKeeper), m.keeperGoal().Text, keeperVerdict(m))
			}
		}
	}
}

// measures reports whether any row of the workload has a sample of target.
func (wl *Workload) measures(target string) bool {
	for _, m := range wl.Metrics {
		if len(m.Samples[target]) > 0 {
			return true
		}
	}
	return false
}

func cell(m *Metric, target string) string {
	v, ok := m.Median[target]
	if !ok {
		return "—"
	}
	return number(v)
}

// number prints v with about three significant digits.
func number(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000 || v == math.Trunc(v):
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// joinNumbers lists samples for a note.
func joinNumbers(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = number(v)
	}
	return strings.Join(s, ", ")
}

func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}

func ratioCell(r *float64) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f×", *r)
}

func goalText(m *Metric) string {
	if m.Goal == nil {
		return ""
	}
	return m.Goal.Text
}

func verdict(m *Metric) string { return verdictOf(m.Met, m.Goal != nil) }

// keeperVerdict judges statefs against noKeeper on a row with a target.
func keeperVerdict(m *Metric) string { return verdictOf(m.KeeperMet, m.Goal != nil) }

func verdictOf(met *bool, hasGoal bool) string {
	switch {
	case met == nil && hasGoal:
		return "not measured"
	case met == nil:
		return ""
	case *met:
		return "met"
	default:
		return "**missed**"
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
