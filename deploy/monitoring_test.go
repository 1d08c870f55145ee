package deploy

// The alert rules and the Grafana dashboard under helm/statefs/files/ are
// held to the daemon they watch: both are parsed with Prometheus's own rule
// and PromQL parsers, every metric they query must be one that
// metrics.New's registry gathers, every alert carries what an on-call
// reader needs and a runbook heading in README.md, and each alert's
// expression is evaluated by Prometheus's PromQL engine on a node in
// trouble, where it must fire, and on healthy ones, where it must not.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/statefs/statefs/metrics"
	"github.com/statefs/statefs/store"
)

const (
	monitoringRulesFile     = "helm/statefs/files/statefs-alerts.yaml"
	monitoringDashboardFile = "helm/statefs/files/statefs-dashboard.json"
	monitoringReadme        = "../README.md"
	// alertRunbookPrefix is where every alert's runbook_url points: README.md
	// at the repository's web address, followed by a heading's anchor.
	alertRunbookPrefix = "https://github.com/statefs/statefs/blob/main/README.md#"
)

// promqlParser parses as Prometheus does by default.
var promqlParser = parser.NewParser(parser.Options{})

// monitoringExported is every metric name a query may use: the families
// the daemon's registry gathers (metrics.New on a real store, with what
// metrics.NewServer adds), with a
// histogram's _bucket, _sum and _count and a summary's _sum and _count,
// and Prometheus's own `up`.
func monitoringExported(t *testing.T) map[string]bool {
	t.Helper()
	s, _, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := metrics.New(s)
	metrics.NewServer(m, &metrics.Health{Mountpoint: t.TempDir(), Store: s.Dir})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering the daemon's metrics: %v", err)
	}
	names := map[string]bool{"up": true}
	for _, f := range families {
		names[f.GetName()] = true
		var suffixes []string
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			suffixes = []string{"_bucket", "_sum", "_count"}
		case dto.MetricType_SUMMARY:
			suffixes = []string{"_sum", "_count"}
		}
		for _, s := range suffixes {
			names[f.GetName()+s] = true
		}
	}
	return names
}

// promqlMetricNames are the metric names the selectors of a parsed
// expression use. A selector that names no metric is an error: it cannot
// be checked, and it would read every series of its job.
func promqlMetricNames(expr parser.Expr) ([]string, error) {
	var names []string
	var errs []error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if name == "" && m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("selector %s names no metric", vs))
			return nil
		}
		names = append(names, name)
		return nil
	})
	return names, errors.Join(errs...)
}

// promqlCheck parses query and reports, as where, a parse error or each
// metric it uses that exported does not hold.
func promqlCheck(where, query string, exported map[string]bool) []error {
	expr, err := promqlParser.ParseExpr(query)
	if err != nil {
		return []error{fmt.Errorf("%s: %q: %w", where, query, err)}
	}
	names, err := promqlMetricNames(expr)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	for _, name := range names {
		if !exported[name] {
			errs = append(errs, fmt.Errorf("%s: metric %s is not one the daemon exports", where, name))
		}
	}
	return errs
}

// alertSeverities are the severities an alert may have.
var alertSeverities = []string{"warning", "critical"}

// ruleParse parses a rule file as Prometheus loads it, strictly: unknown
// fields, expressions that do not parse, templates that do not, and
// metric names Prometheus 2 would refuse are errors.
func ruleParse(content []byte) (*rulefmt.RuleGroups, []error) {
	return rulefmt.Parse(content, false, model.LegacyValidation, promqlParser, slog.New(slog.DiscardHandler))
}

// ruleProblems is what is wrong with a rule file: what its parse
// reports, metrics the daemon does not export, and alerts without a for,
// a severity, a summary, a description, or a runbook_url that points to
// one of anchors.
func ruleProblems(content []byte, exported, anchors map[string]bool) []error {
	groups, errs := ruleParse(content)
	if len(errs) > 0 {
		return errs
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			where := "record " + r.Record
			if r.Alert != "" {
				where = "alert " + r.Alert
			}
			errs = append(errs, promqlCheck(where, r.Expr, exported)...)
			if r.Alert == "" {
				continue
			}
			if r.For <= 0 {
				errs = append(errs, fmt.Errorf("%s has no for: a single evaluation would page", where))
			}
			if !slices.Contains(alertSeverities, r.Labels["severity"]) {
				errs = append(errs, fmt.Errorf("%s: severity %q, want one of %v", where, r.Labels["severity"], alertSeverities))
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					errs = append(errs, fmt.Errorf("%s has no %s", where, a))
				}
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, alertRunbookPrefix)
			switch {
			case url == "":
			case !ok:
				errs = append(errs, fmt.Errorf("%s: runbook_url %s is not under %s", where, url, alertRunbookPrefix))
			case !anchors[anchor]:
				errs = append(errs, fmt.Errorf("%s: runbook_url %s: README.md has no heading with the anchor %q", where, url, anchor))
			}
		}
	}
	return errs
}

// monitoringAnchors are the anchors GitHub gives README.md's headings:
// lower case, spaces as hyphens, punctuation but hyphens and underscores
// dropped.
func monitoringAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(monitoringReadme)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for line := range strings.SplitSeq(string(b), "\n") {
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(title)), ""), " ", "-")
			anchors[slug] = true
		}
	}
	return anchors
}

func TestAlertRules(t *testing.T) {
	content, err := os.ReadFile(monitoringRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range ruleProblems(content, monitoringExported(t), monitoringAnchors(t)) {
		t.Error(err)
	}
}

// promtool (Debian's prometheus package, which make test installs) checks
// the rule file as the Prometheus release it comes with would load it.
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("no promtool: make test installs it (apt-get install prometheus): %v", err)
	}
	if out, err := exec.Command(promtool, "check", "rules", monitoringRulesFile).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// A misspelled metric, a missing runbook and a rule that does not parse
// are each reported.
func TestRuleProblemsAreReported(t *testing.T) {
	exported := monitoringExported(t)
	anchors := map[string]bool{"statefsdiskfull": true}
	rule := func(expr, runbook string) []byte {
		return fmt.Appendf(nil, `groups:
  - name: statefs
    rules:
      - alert: StatefsDiskFull
        expr: %s
        for: 1m
        labels: {severity: critical}
        annotations: {summary: s, description: d, runbook_url: "%s"}
`, expr, alertRunbookPrefix+runbook)
	}
	if errs := ruleProblems(rule("statefs_disk_full == 1", "statefsdiskfull"), exported, anchors); len(errs) > 0 {
		t.Fatalf("a good rule is reported: %v", errs)
	}
	for _, c := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"misspelled metric", rule("statefs_disk_ful == 1", "statefsdiskfull"), "metric statefs_disk_ful is not one the daemon exports"},
		{"missing anchor", rule("statefs_disk_full == 1", "statefsdiskfilling"), `README.md has no heading with the anchor "statefsdiskfilling"`},
		{"bad expression", rule("statefs_disk_full ==", "statefsdiskfull"), "could not parse expression"},
		{"no severity", []byte(strings.Replace(string(rule("statefs_disk_full == 1", "statefsdiskfull")), "critical", "page", 1)), `severity "page"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := ruleProblems(c.content, exported, anchors)
			if !strings.Contains(fmt.Sprint(errs), c.want) {
				t.Errorf("problems %v, want one saying %q", errs, c.want)
			}
		})
	}
}

// dashboardJSON is the part of a Grafana dashboard the checks read.
type dashboardJSON struct {
	SchemaVersion int              `json:"schemaVersion"`
	UID           string           `json:"uid"`
	Title         string           `json:"title"`
	Panels        []dashboardPanel `json:"panels"`
	Templating    struct {
		List []dashboardVariable `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	ID          int                  `json:"id"`
	Type        string               `json:"type"`
	Title       string               `json:"title"`
	Description string               `json:"description"`
	Datasource  *dashboardDatasource `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID      string               `json:"refId"`
		Expr       string               `json:"expr"`
		Datasource *dashboardDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

type dashboardDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboardVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": string}
}

// query is the variable's query, in either of the forms Grafana writes.
func (v dashboardVariable) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	json.Unmarshal(v.Query, &q)
	return q.Query
}

var (
	// dashboardDurations are Grafana's variables that stand for a duration.
	dashboardDurations = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)
	// dashboardVariables are the other variables, in Grafana's three
	// syntaxes: ${var} (with a format, ${var:regex}), [[var]] and $var.
	dashboardVariables = regexp.MustCompile(`\$\{\w+(:\w+)?\}|\[\[\w+(:\w+)?\]\]|\$\w+`)
	// dashboardLabelValues is a variable query label_values(selector, label).
	dashboardLabelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
)

// dashboardExpand replaces Grafana's variables in query with values that
// parse: a duration for the intervals, a plain word for the others (they
// are used inside label matchers).
func dashboardExpand(query string) string {
	query = dashboardDurations.ReplaceAllString(query, "5m")
	return dashboardVariables.ReplaceAllString(query, "x")
}

// dashboardProblems is what is wrong with a dashboard: queries that do not
// parse or use metrics the daemon does not export, panels without a
// description, a unit or a query, panels not on the datasource variable,
// and variables missing or of the wrong kind.
func dashboardProblems(content []byte, exported map[string]bool) []error {
	var d dashboardJSON
	if err := json.Unmarshal(content, &d); err != nil {
		return []error{err}
	}
	var errs []error
	if d.SchemaVersion < 39 || d.UID == "" || d.Title == "" {
		errs = append(errs, fmt.Errorf("dashboard: schemaVersion %d, uid %q, title %q: want 39 or later, and a uid and title", d.SchemaVersion, d.UID, d.Title))
	}
	onDatasource := func(where string, ds *dashboardDatasource) {
		if ds == nil || ds.UID != "${datasource}" {
			errs = append(errs, fmt.Errorf("%s is not on the datasource variable", where))
		}
	}
	var check func(panels []dashboardPanel)
	check = func(panels []dashboardPanel) {
		for _, p := range panels {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.Type == "row" {
				check(p.Panels)
				continue
			}
			if p.Description == "" || p.FieldConfig.Defaults.Unit == "" || len(p.Targets) == 0 {
				errs = append(errs, fmt.Errorf("%s: want a description (%q), a unit (%q) and queries (%d)", where, p.Description, p.FieldConfig.Defaults.Unit, len(p.Targets)))
			}
			onDatasource(where, p.Datasource)
			for _, target := range p.Targets {
				tw := where + " query " + target.RefID
				onDatasource(tw, target.Datasource)
				errs = append(errs, promqlCheck(tw, dashboardExpand(target.Expr), exported)...)
			}
		}
	}
	check(d.Panels)
	vars := map[string]dashboardVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		if v.Type != "query" {
			continue
		}
		where := "variable " + v.Name
		m := dashboardLabelValues.FindStringSubmatch(v.query())
		if m == nil {
			errs = append(errs, fmt.Errorf("%s: query %q is not label_values(selector, label)", where, v.query()))
			continue
		}
		errs = append(errs, promqlCheck(where, dashboardExpand(m[1]), exported)...)
	}
	if v := vars["datasource"]; v.Type != "datasource" {
		errs = append(errs, errors.New("dashboard: no datasource variable"))
	}
	if v := vars["job"]; v.Type != "query" {
		errs = append(errs, errors.New("dashboard: no job variable"))
	}
	if v := vars["instance"]; v.Type != "query" || !v.Multi || !v.IncludeAll {
		errs = append(errs, errors.New("dashboard: no instance variable that takes several values and All (one node or the fleet)"))
	}
	return errs
}

func TestDashboard(t *testing.T) {
	content, err := os.ReadFile(monitoringDashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range dashboardProblems(content, monitoringExported(t)) {
		t.Error(err)
	}
}

// A misspelled metric in a panel's query, or in a variable's, is reported.
func TestDashboardProblemsAreReported(t *testing.T) {
	exported := monitoringExported(t)
	dashboard := func(expr, variable string) []byte {
		return fmt.Appendf(nil, `{"schemaVersion": 39, "uid": "statefs", "title": "statefs",
  "panels": [{"id": 1, "type": "row", "title": "r", "panels": [{"id": 2, "type": "timeseries", "title": "Free",
    "description": "d", "datasource": {"uid": "${datasource}"}, "fieldConfig": {"defaults": {"unit": "bytes"}},
    "targets": [{"refId": "A", "datasource": {"uid": "${datasource}"}, "expr": %q}]}]}],
  "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "job", "type": "query", "query": {"query": %q}},
    {"name": "instance", "type": "query", "multi": true, "includeAll": true, "query": "label_values(up{job=~\"$job\"}, instance)"}]}}`,
			expr, variable)
	}
	const good = `sum by (instance) (rate(statefs_disk_free_bytes{job=~"$job", instance=~"${instance:regex}"}[$__rate_interval]))`
	if errs := dashboardProblems(dashboard(good, "label_values(statefs_gc_interval_seconds, job)"), exported); len(errs) > 0 {
		t.Fatalf("a good dashboard is reported: %v", errs)
	}
	for _, c := range []struct {
		name, expr, variable, want string
	}{
		{"misspelled metric in a panel", strings.Replace(good, "free", "fre", 1), "label_values(statefs_gc_interval_seconds, job)",
			`panel 2 "Free" query A: metric statefs_disk_fre_bytes is not one the daemon exports`},
		{"misspelled metric in a variable", good, "label_values(statefs_gc_intervals_seconds, job)",
			"variable job: metric statefs_gc_intervals_seconds is not one the daemon exports"},
		{"query that does not parse", "rate(statefs_disk_free_bytes[$__rate_interval]", "label_values(statefs_gc_interval_seconds, job)",
			`panel 2 "Free" query A: "rate(statefs_disk_free_bytes[5m]"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := dashboardProblems(dashboard(c.expr, c.variable), exported)
			if !strings.Contains(fmt.Sprint(errs), c.want) {
				t.Errorf("problems %v, want one saying %q", errs, c.want)
			}
		})
	}
}

// alertCase is a node's series, loaded as promqltest's `load 1m` reads
// them (one series a line, `name{labels} values`, the values a minute
// apart from time 0, `_` for none), and whether the alert fires at a time.
type alertCase struct {
	alert string
	state string // what the node's series show
	at    time.Duration
	fires bool
	load  string
}

var alertCases = []alertCase{
	{"StatefsDiskFillingUp", "under a fifth free and falling 50 MB a minute", 6 * time.Hour, true, `
statefs_disk_size_bytes{job="statefs",instance="a"} 100000000000x360
statefs_disk_free_bytes{job="statefs",instance="a"} 25000000000-50000000x360`},
	{"StatefsDiskFillingUp", "under a fifth free, steady", 6 * time.Hour, false, `
statefs_disk_size_bytes{job="statefs",instance="a"} 100000000000x360
statefs_disk_free_bytes{job="statefs",instance="a"} 15000000000x360`},
	{"StatefsDiskFillingUp", "falling fast with most of the disk free", 6 * time.Hour, false, `
statefs_disk_size_bytes{job="statefs",instance="a"} 100000000000x360
statefs_disk_free_bytes{job="statefs",instance="a"} 90000000000-100000000x360`},

	{"StatefsDiskFull", "full for half an hour", 40 * time.Minute, true, `
statefs_disk_full{job="statefs",instance="a"} 0x10 1x30`},
	{"StatefsDiskFull", "room", 40 * time.Minute, false, `
statefs_disk_full{job="statefs",instance="a"} 0x40`},

	{"StatefsStoreNotWritable", "read-only for ten minutes", 30 * time.Minute, true, `
statefs_store_writable{job="statefs",instance="a"} 1x20 0x10`},
	{"StatefsStoreNotWritable", "read-only for two minutes, writable again", 30 * time.Minute, false, `
statefs_store_writable{job="statefs",instance="a"} 1x20 0x2 1x8`},
	{"StatefsStoreNotWritable", "writable", 30 * time.Minute, false, `
statefs_store_writable{job="statefs",instance="a"} 1x30`},

	{"StatefsSealBacklogGrowing", "a file more every minute for eight hours", 8 * time.Hour, true, `
statefs_seal_backlog_files{job="statefs",instance="a"} 10+1x480`},
	{"StatefsSealBacklogGrowing", "grew for three hours, steady since", 8 * time.Hour, false, `
statefs_seal_backlog_files{job="statefs",instance="a"} 10+1x180 190x300`},

	{"StatefsCollectorFailing", "every run fails", 2 * time.Hour, true, `
statefs_gc_runs_total{job="statefs",instance="a",result="failed"} 0+1x120
statefs_gc_runs_total{job="statefs",instance="a",result="ok"} 0x120
statefs_gc_runs_total{job="statefs",instance="a",result="unanswered"} 0x120`},
	{"StatefsCollectorFailing", "one run failed among runs that complete", 2 * time.Hour, false, `
statefs_gc_runs_total{job="statefs",instance="a",result="failed"} 0x60 1x60
statefs_gc_runs_total{job="statefs",instance="a",result="ok"} 0+1x120
statefs_gc_runs_total{job="statefs",instance="a",result="unanswered"} 0x120`},

	{"StatefsCollectorUnanswered", "every run has a job no oracle answers for", 3 * time.Hour, true, `
statefs_gc_runs_total{job="statefs",instance="a",result="failed"} 0x180
statefs_gc_runs_total{job="statefs",instance="a",result="ok"} 0x180
statefs_gc_runs_total{job="statefs",instance="a",result="unanswered"} 0+1x180`},
	{"StatefsCollectorUnanswered", "an oracle missed once among ok runs", 3 * time.Hour, false, `
statefs_gc_runs_total{job="statefs",instance="a",result="failed"} 0x180
statefs_gc_runs_total{job="statefs",instance="a",result="ok"} 0+1x180
statefs_gc_runs_total{job="statefs",instance="a",result="unanswered"} 0x150 1x30`},

	{"StatefsJobsUnknown", "a job unknown to every oracle for more than a day", 3 * time.Hour, true, `
statefs_jobs_unknown{job="statefs",instance="a",age="under_1h"} 0x180
statefs_jobs_unknown{job="statefs",instance="a",age="1h_to_1d"} 1x60 0x120
statefs_jobs_unknown{job="statefs",instance="a",age="1d_to_7d"} 0x60 1x120
statefs_jobs_unknown{job="statefs",instance="a",age="over_7d"} 0x180`},
	{"StatefsJobsUnknown", "jobs unknown for less than a day", 3 * time.Hour, false, `
statefs_jobs_unknown{job="statefs",instance="a",age="under_1h"} 2x180
statefs_jobs_unknown{job="statefs",instance="a",age="1h_to_1d"} 3x180
statefs_jobs_unknown{job="statefs",instance="a",age="1d_to_7d"} 0x180
statefs_jobs_unknown{job="statefs",instance="a",age="over_7d"} 0x180`},

	{"StatefsCollectorNotRunning", "on every 10 minutes, last run complete at 10 minutes", 2 * time.Hour, true, `
statefs_gc_interval_seconds{job="statefs",instance="a"} 600x120
statefs_gc_last_complete_timestamp_seconds{job="statefs",instance="a"} 0x10 600x110
process_start_time_seconds{job="statefs",instance="a"} 0x120`},
	{"StatefsCollectorNotRunning", "on, runs complete", 2 * time.Hour, false, `
statefs_gc_interval_seconds{job="statefs",instance="a"} 600x120
statefs_gc_last_complete_timestamp_seconds{job="statefs",instance="a"} 0+60x120
process_start_time_seconds{job="statefs",instance="a"} 0x120`},
	{"StatefsCollectorNotRunning", "on, daemon started 10 minutes ago, no run yet", 2 * time.Hour, false, `
statefs_gc_interval_seconds{job="statefs",instance="a"} 600x120
statefs_gc_last_complete_timestamp_seconds{job="statefs",instance="a"} 0x120
process_start_time_seconds{job="statefs",instance="a"} 0x110 6600x10`},
	{"StatefsCollectorNotRunning", "off", 2 * time.Hour, false, `
statefs_gc_interval_seconds{job="statefs",instance="a"} 0x120
statefs_gc_last_complete_timestamp_seconds{job="statefs",instance="a"} 0x120
process_start_time_seconds{job="statefs",instance="a"} 0x120`},

	{"StatefsCorruptionFound", "a scrub found two damaged chunks", 30 * time.Minute, true, `
statefs_scrub_damaged{job="statefs",instance="a"} 0x10 2x20
statefs_quarantined_objects{job="statefs",instance="a"} 0x30`},
	{"StatefsCorruptionFound", "an object is quarantined", 30 * time.Minute, true, `
statefs_scrub_damaged{job="statefs",instance="a"} 0x30
statefs_quarantined_objects{job="statefs",instance="a"} 1x30`},
	{"StatefsCorruptionFound", "nothing damaged", 30 * time.Minute, false, `
statefs_scrub_damaged{job="statefs",instance="a"} 0x30
statefs_quarantined_objects{job="statefs",instance="a"} 0x30`},

	{"StatefsScrubFailing", "a pass failed, none completed", 2 * time.Hour, true, `
statefs_scrub_runs_total{job="statefs",instance="a",result="failed"} 0x60 1x60
statefs_scrub_runs_total{job="statefs",instance="a",result="ok"} 0x120`},
	{"StatefsScrubFailing", "a pass failed, the next completed", 2 * time.Hour, false, `
statefs_scrub_runs_total{job="statefs",instance="a",result="failed"} 0x60 1x60
statefs_scrub_runs_total{job="statefs",instance="a",result="ok"} 0x90 1x30`},

	{"StatefsDaemonDown", "its scrapes fail for an hour", 2 * time.Hour, true, `
up{job="statefs",instance="a"} 1x60 0x60
statefs_gc_interval_seconds{job="statefs",instance="a"} 0x60 _x60`},
	{"StatefsDaemonDown", "up, and another job's target down", 2 * time.Hour, false, `
up{job="statefs",instance="a"} 1x120
statefs_gc_interval_seconds{job="statefs",instance="a"} 0x120
up{job="other",instance="b"} 0x120`},

	{"StatefsDaemonRestarting", "started four times in the hour", 70 * time.Minute, true, `
process_start_time_seconds{job="statefs",instance="a"} 0x20 1200x10 1800x10 2400x10 3000x20
statefs_gc_interval_seconds{job="statefs",instance="a"} 0x74`},
	{"StatefsDaemonRestarting", "restarted once, and another job's process restarting", 70 * time.Minute, false, `
process_start_time_seconds{job="statefs",instance="a"} 0x30 1800x44
statefs_gc_interval_seconds{job="statefs",instance="a"} 0x74
process_start_time_seconds{job="other",instance="b"} 0x20 1200x10 1800x10 2400x10 3000x20`},

	{"StatefsServerCrashLoop", "a server replaced every two minutes", 30 * time.Minute, true, `
statefs_server_restarts_total{job="statefs",instance="a"} 0x10 0+0.5x20`},
	{"StatefsServerCrashLoop", "three servers replaced in an hour", 60 * time.Minute, false, `
statefs_server_restarts_total{job="statefs",instance="a"} 0x15 1x15 2x15 3x15`},

	{"StatefsOrphansPilingUp", "a fifth of the disk orphaned for seven hours", 7 * time.Hour, true, `
statefs_disk_size_bytes{job="statefs",instance="a"} 100000000000x420
statefs_orphan_bytes{job="statefs",instance="a"} 20000000000x420`},
	{"StatefsOrphansPilingUp", "a fifth of the disk orphaned for an hour, then closed", 7 * time.Hour, false, `
statefs_disk_size_bytes{job="statefs",instance="a"} 100000000000x420
statefs_orphan_bytes{job="statefs",instance="a"} 20000000000x60 1000000000x360`},
}

// promqlSample is one float sample of a loaded series.
type promqlSample struct {
	t int64
	f float64
}

func (s promqlSample) T() int64                      { return s.t }
func (s promqlSample) ST() int64                     { return 0 }
func (s promqlSample) F() float64                    { return s.f }
func (s promqlSample) H() *histogram.Histogram       { return nil }
func (s promqlSample) FH() *histogram.FloatHistogram { return nil }
func (s promqlSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s promqlSample) Copy() chunks.Sample           { return s }

// promqlSeriesSet walks a slice of series.
type promqlSeriesSet struct {
	series []storage.Series
	i      int
}

func (s *promqlSeriesSet) Next() bool                        { s.i++; return s.i <= len(s.series) }
func (s *promqlSeriesSet) At() storage.Series                { return s.series[s.i-1] }
func (s *promqlSeriesSet) Err() error                        { return nil }
func (s *promqlSeriesSet) Warnings() annotations.Annotations { return nil }

// promqlLoad makes a queryable of the series in text, a load command's
// body with samples step apart from time 0.
func promqlLoad(t *testing.T, text string, step time.Duration) storage.Queryable {
	t.Helper()
	var all []storage.Series
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		lset, values, err := promqlParser.ParseSeriesDesc(line)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		var samples []chunks.Sample
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, promqlSample{t: int64(i) * step.Milliseconds(), f: v.Value})
			}
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	sort.Slice(all, func(i, j int) bool { return labels.Compare(all[i].Labels(), all[j].Labels()) < 0 })
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			var selected []storage.Series
			for _, s := range all {
				if promqlMatches(s.Labels(), matchers) {
					selected = append(selected, s)
				}
			}
			return &promqlSeriesSet{series: selected}
		},
	}}
}

func promqlMatches(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// alertFires evaluates expr as Prometheus's rule manager would, every
// minute from at-hold to at, and says whether some series was in the
// result at every evaluation: whether an alert with that for is firing at
// at (with hold 0, whether it is pending).
func alertFires(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, hold, at time.Duration) bool {
	t.Helper()
	start, end := time.Unix(0, 0).Add(at-hold), time.Unix(0, 0).Add(at)
	query, err := engine.NewRangeQuery(context.Background(), q, nil, expr, start, end, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer query.Close()
	res := query.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	matrix, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range matrix {
		if len(s.Floats) == int(hold/time.Minute)+1 {
			return true
		}
	}
	return false
}

// Each alert fires on a node in the trouble it is about, and stays silent
// on healthy ones; every alert of the rule file has both kinds of case.
func TestAlertsFireOnTroubleOnly(t *testing.T) {
	content, err := os.ReadFile(monitoringRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := ruleParse(content)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	rules := map[string]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = r
			}
		}
	}
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:    1e6,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
		Parser:        promqlParser,
	})
	type alertCovered struct{ fires, silent bool }
	covered := map[string]alertCovered{}
	for _, c := range alertCases {
		r, ok := rules[c.alert]
		if !ok {
			t.Errorf("case %q: the rule file has no alert %s", c.state, c.alert)
			continue
		}
		t.Run(c.alert+"/"+c.state, func(t *testing.T) {
			q := promqlLoad(t, c.load, time.Minute)
			switch {
			case c.fires && !alertFires(t, engine, q, r.Expr, time.Duration(r.For), c.at):
				t.Errorf("%s is not firing at %v (for: %v)\n%s", c.alert, c.at, r.For, r.Expr)
			case !c.fires && alertFires(t, engine, q, r.Expr, 0, c.at):
				t.Errorf("%s is pending at %v on a healthy node\n%s", c.alert, c.at, r.Expr)
			}
		})
		k := covered[c.alert]
		k.fires, k.silent = k.fires || c.fires, k.silent || !c.fires
		covered[c.alert] = k
	}
	for name := range rules {
		if k := covered[name]; !k.fires || !k.silent {
			t.Errorf("alert %s needs a case where it fires and one where it is silent (have: %+v)", name, k)
		}
	}
}
