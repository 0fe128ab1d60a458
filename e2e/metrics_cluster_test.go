package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
)

// sample is one line of a /metrics exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeAll reads a node's /metrics: the samples and the raw text.
func scrapeAll(t *testing.T, base string) ([]sample, []byte) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s %v", base, resp.Status, err)
	}
	var out []sample
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: %q", base, line)
		}
		s := sample{name: line[:i], labels: map[string]string{}, value: v}
		if j := strings.IndexByte(line[:i], '{'); j >= 0 {
			s.name = line[:j]
			for _, m := range labelRE.FindAllStringSubmatch(line[j:i], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out = append(out, s)
	}
	return out, raw
}

// sumOf adds up the samples of name whose labels include want.
func sumOf(samples []sample, name string, want map[string]string) (float64, int) {
	sum, n := 0.0, 0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
		n++
	}
	return sum, n
}

// promtoolCheck runs `promtool check metrics` on an exposition; the test
// fails without promtool (scripts/services.sh installs it).
func promtoolCheck(t *testing.T, raw []byte) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (Debian package prometheus; scripts/services.sh installs it)")
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestMetricsCluster: three `ontime serve` nodes on one MariaDB. The rules
// of the metrics hold: topic and dest labels stay bounded (metrics.
// max_topics 4, two receivers of which one is configured), the table's
// gauges come from the leader alone with every status present, so sum()
// over the three nodes equals the table; the per-topic counters add up to
// the deliveries made; promtool finds nothing to say about any node's
// /metrics while it delivers.
func TestMetricsCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := testdb.MySQL(t)
	good := newReceiver(t)
	var failMu sync.Mutex
	failed := 0
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failMu.Lock()
		failed++
		failMu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(bad.Close)
	cfgPath := filepath.Join(dir, "ontime.yaml")
	cfg := fmt.Sprintf(`data_dir: %s
store:
  driver: mysql
  databases: [%q]
  tables: 4
  segments: 2
hot:
  window: 1s
cluster:
  coordinator: database
  lease_ttl: 2s
delivery:
  lease_ttl: 2s
  retry_base: 50ms
  retry_max: 100ms
  max_attempts: 2
  breaker_failures: 1000    # the failing receiver's tasks die, not wait
destinations:
  %q: {concurrency: 8}
metrics:
  max_topics: 4
`, filepath.Join(dir, "data"), dsn, good.srv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{"n1", "n2", "n3"}
	addrs, _ := startServeCluster(t, cfgPath, names)
	waitBalanced(t, addrs["n1"], names)

	// 10 topics; per topic 30 tasks to the configured receiver (due now),
	// 5 to the failing one (dead after 2 attempts), 5 due in an hour.
	const topics, okPer, badPer, laterPer = 10, 30, 5, 5
	for i := range topics {
		c := newAPIClient(t, "http://"+addrs[names[i%3]])
		var reqs []apiv1.TaskRequest
		topic := fmt.Sprintf("m.topic%02d", i)
		for j := range okPer {
			reqs = append(reqs, apiv1.TaskRequest{Topic: topic, Key: fmt.Sprint("ok", j), Target: good.srv.URL + "/hook"})
		}
		for j := range badPer {
			reqs = append(reqs, apiv1.TaskRequest{Topic: topic, Key: fmt.Sprint("bad", j), Target: bad.URL + "/hook"})
		}
		for j := range laterPer {
			reqs = append(reqs, apiv1.TaskRequest{Topic: topic, Key: fmt.Sprint("later", j), Delay: "1h", Target: good.srv.URL})
		}
		items, err := c.SubmitBatch(t.Context(), reqs)
		if err != nil || len(items) != len(reqs) {
			t.Fatalf("batch submit: %v", err)
		}
		// Under load: each node's exposition passes promtool.
		if i == topics/2 {
			for _, n := range names {
				_, raw := scrapeAll(t, "http://"+addrs[n])
				promtoolCheck(t, raw)
			}
		}
	}
	waitFor(t, 90*time.Second, "every task delivered or dead", func() bool {
		failMu.Lock()
		f := failed
		failMu.Unlock()
		return len(good.delivered()) >= topics*okPer && f >= topics*badPer*2
	})

	// The table, as the database counts it.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	statuses := []string{"pending", "claimed", "running", "done", "dead", "cancelled"}
	table := func() map[string]float64 {
		out := map[string]float64{}
		for i := range 4 {
			rows, err := db.QueryContext(t.Context(), fmt.Sprintf("SELECT status, COUNT(*) FROM ontime_tasks_%04d GROUP BY status", i))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var st, n int
				if err := rows.Scan(&st, &n); err != nil {
					t.Fatal(err)
				}
				out[statuses[st]] += float64(n)
			}
			rows.Close()
		}
		return out
	}
	// The receiver sees a task's last failure before its node writes the
	// outcome (batched): wait for the table to say dead.
	var want map[string]float64
	waitFor(t, 60*time.Second, "the table holds every outcome", func() bool {
		want = table()
		return want["done"] == topics*okPer && want["dead"] == topics*badPer && want["pending"] == topics*laterPer
	})
	// The leader reads the counts at most every 5 s: wait for a count that
	// matches, then check every rule on one scrape of each node.
	var per map[string][]sample
	waitFor(t, 60*time.Second, "sum(ontime_tasks) over the nodes equals the table, every node sees 3 live", func() bool {
		per = map[string][]sample{}
		for _, n := range names {
			per[n], _ = scrapeAll(t, "http://"+addrs[n])
		}
		for _, st := range statuses {
			sum := 0.0
			for _, n := range names {
				v, _ := sumOf(per[n], "ontime_tasks", map[string]string{"status": st})
				sum += v
			}
			if sum != want[st] {
				return false
			}
		}
		// Each node's view of the membership is read by its own rounds,
		// made when a scrape finds the last one stale: wait for all three.
		for _, n := range names {
			if live, _ := sumOf(per[n], "ontime_cluster_nodes_live", nil); live != 3 {
				return false
			}
		}
		return true
	})
	reporters, leaders := 0, 0.0
	for _, n := range names {
		s := per[n]
		l, _ := sumOf(s, "ontime_cluster_leader", nil)
		leaders += l
		_, tasks := sumOf(s, "ontime_tasks", nil)
		_, topicTasks := sumOf(s, "ontime_topic_tasks", nil)
		_, overdue := sumOf(s, "ontime_topic_oldest_overdue_seconds", nil)
		_, lag := sumOf(s, "ontime_scan_lag_max_seconds", nil)
		if l == 1 {
			reporters++
			if tasks != len(statuses) {
				t.Errorf("leader %s: %d ontime_tasks series, want every status (%d)", n, tasks, len(statuses))
			}
			// 4 topics of their own and _other, each with every status.
			if topicTasks != 5*len(statuses) || overdue != 5 || lag != 1 {
				t.Errorf("leader %s: %d topic × status series (want 30), %d overdue (want 5), %d lag max (want 1)", n, topicTasks, overdue, lag)
			}
			for _, st := range statuses {
				all, _ := sumOf(s, "ontime_topic_tasks", map[string]string{"status": st})
				if all != want[st] {
					t.Errorf("leader %s: ontime_topic_tasks{status=%q} adds up to %v, the table has %v", n, st, all, want[st])
				}
			}
		} else if tasks+topicTasks+overdue+lag != 0 {
			t.Errorf("follower %s reports cluster-wide series: %d tasks, %d topic tasks, %d overdue, %d lag", n, tasks, topicTasks, overdue, lag)
		}
		if live, _ := sumOf(s, "ontime_cluster_nodes_live", nil); live != 3 {
			t.Errorf("%s: nodes live %v, want 3", n, live)
		}
		if b, c := sumOf(s, "ontime_build_info", nil); b != 1 || c != 1 {
			t.Errorf("%s: build info %v in %d series", n, b, c)
		}
		// Bounded labels: at most max_topics + 1 topic values; dest only
		// the configured receiver, handler or _other.
		topicVals := map[string]bool{}
		for _, x := range s {
			if v, ok := x.labels["topic"]; ok && strings.HasPrefix(x.name, "ontime_") {
				topicVals[v] = true
			}
			if d, ok := x.labels["dest"]; ok && d != good.srv.URL && d != "handler" && d != "_other" {
				t.Errorf("%s: %s has dest=%q, not a configured destination", n, x.name, d)
			}
		}
		if len(topicVals) > 5 {
			t.Errorf("%s: %d topic label values, want at most max_topics + 1: %v", n, len(topicVals), topicVals)
		}
	}
	if leaders != 1 || reporters != 1 {
		t.Errorf("sum(ontime_cluster_leader) = %v, %d nodes report the table; want 1 and 1", leaders, reporters)
	}
	// Per-node counters add up over the nodes to what happened.
	sum := func(name string, labels map[string]string) float64 {
		total := 0.0
		for _, n := range names {
			v, _ := sumOf(per[n], name, labels)
			total += v
		}
		return total
	}
	if got := sum("ontime_topic_submitted_total", nil); got != topics*(okPer+badPer+laterPer) {
		t.Errorf("sum(ontime_topic_submitted_total) = %v, want %d", got, topics*(okPer+badPer+laterPer))
	}
	if got := sum("ontime_topic_deliveries_total", map[string]string{"outcome": "done"}); got != want["done"] {
		t.Errorf("done deliveries over the nodes: %v, want %v", got, want["done"])
	}
	if got := sum("ontime_topic_deliveries_total", map[string]string{"outcome": "dead"}); got != want["dead"] {
		t.Errorf("dead deliveries over the nodes: %v, want %v", got, want["dead"])
	}
	if got := sum("ontime_delivery_failures_total", map[string]string{"dest": "_other", "class": "5xx"}); got != topics*badPer*2 {
		t.Errorf("5xx failures of the unconfigured receiver: %v, want %d", got, topics*badPer*2)
	}
	if got := sum("ontime_topic_lateness_seconds_count", nil); got != topics*(okPer+badPer) {
		t.Errorf("first-attempt lateness observations: %v, want %d", got, topics*(okPer+badPer))
	}
}
