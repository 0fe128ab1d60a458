// Package deploy tests what ships under deploy/: the Grafana dashboard and
// the Prometheus alert rules. It is a module of its own (like bench/) so
// that the PromQL parser, github.com/prometheus/prometheus, whose module
// graph is large, stays out of ontime's go.mod.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/ontimehq/ontime"
)

// exported starts a node (SQLite, memory tier) with a Go scan job and a
// schedule, delivers a task that succeeds and one that dies, and returns
// the name of every series its /metrics shows.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer bad.Close()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Destinations = map[string]ontime.DestinationConfig{ok.URL: {}}
	cfg.Cluster.Zone = "deploy-test" // the per-zone series
	ctx := t.Context()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.RegisterJob(ontime.Job{Name: "deploy-test", Cron: "@every 1s", Run: func(context.Context, ontime.Shard) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	for _, target := range []string{ok.URL, bad.URL} {
		if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "deploy", Target: target}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		names := scrapeNames(t, srv.URL)
		// The leader's first count after the submits (at most 15 s after
		// the start) brings the per-topic table series.
		if names["ontime_topic_lateness_seconds_count"] && names["ontime_topic_tasks"] && names["ontime_topic_oldest_overdue_seconds"] {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never showed its deliveries: %v", names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrapeNames is the names in one exposition: each family's, and a
// histogram's or summary's _bucket, _sum and _count.
func scrapeNames(t *testing.T, base string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" || f[3] == "summary" {
				names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
			}
			if f[3] == "histogram" {
				names[f[2]+"_bucket"] = true
			}
		}
	}
	return names
}

// grafanaVars stand in for Grafana's variables in a range or a selector.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

var labelValues = regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`)

// dashboardExprs is every PromQL expression of the dashboard: its panels'
// targets and its variables' queries.
func dashboardExprs(t *testing.T) []string {
	raw, err := os.ReadFile("grafana/ontime-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(series, label)", v.Name, s)
			continue
		}
		out = append(out, m[1])
	}
	return out
}

// ruleExprs is every alert's expression in the rules file.
func ruleExprs(t *testing.T) map[string]string {
	raw, err := os.ReadFile("prometheus/ontime-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
			if len(r.Annotations["runbook"]) < 80 || r.Annotations["summary"] == "" {
				t.Errorf("alert %s: wants a summary and a runbook", r.Alert)
			}
		}
	}
	return out
}

// seriesNames parses expr and returns the metric names its selectors name.
func seriesNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// Every expression of the dashboard and the rules parses and names only
// series a node exports.
func TestExpressionsNameExportedSeries(t *testing.T) {
	names := exported(t)
	exprs := dashboardExprs(t)
	for _, e := range ruleExprs(t) {
		exprs = append(exprs, e)
	}
	if len(exprs) < 40 {
		t.Fatalf("only %d expressions found", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		ns, err := seriesNames(e)
		if err != nil {
			t.Errorf("%q does not parse: %v", e, err)
			continue
		}
		if len(ns) == 0 {
			t.Errorf("%q names no series", e)
		}
		for _, n := range ns {
			used[n] = true
			if !names[n] {
				t.Errorf("%q names %s, which the node does not export", e, n)
			}
		}
	}
	// The check itself can fail: a name the node does not export is found.
	if ns, _ := seriesNames(`rate(ontime_no_such_series_total[5m])`); len(ns) != 1 || names[ns[0]] {
		t.Error("the check would not catch an unknown series")
	}
	var list []string
	for n := range used {
		list = append(list, n)
	}
	slices.Sort(list)
	t.Logf("%d expressions name %d series: %s", len(exprs), len(list), strings.Join(list, " "))
}

// promtool (Debian package prometheus; scripts/services.sh installs it).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (Debian package prometheus; scripts/services.sh installs it)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "prometheus"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

func TestRulesCheck(t *testing.T) { promtool(t, "check", "rules", "ontime-rules.yml") }

// Each alert fires on synthetic series (ontime-rules_test.yml).
func TestRulesUnit(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("prometheus", "ontime-rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for alert := range ruleExprs(t) {
		if !bytes.Contains(raw, []byte("alertname: "+alert+"\n        exp_alerts:\n          - exp_labels")) {
			t.Errorf("alert %s has no test that it fires", alert)
		}
	}
	promtool(t, "test", "rules", "ontime-rules_test.yml")
}
