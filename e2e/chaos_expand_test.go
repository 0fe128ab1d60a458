package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestChaosExpand (issue 30): `ontime store expand` doubles the databases
// of a 3-node cluster (SQLite 1 → 2, MariaDB and PostgreSQL 2 → 4) while
// tasks due 0.4–2 s ahead stream in at 100/s and are delivered by webhook.
// The expander is killed with SIGKILL during the copy and during the
// cleanup and run again; a node is killed during the copy. The cutover runs
// with the nodes stopped (the load's submits wait and are retried), which
// then start again with the grown config while the cleanup runs. 0 lost,
// 0 early; 5,000 tasks submitted before (due in an hour) all answer by ID
// and key afterwards, pending, and the topic counts are the same.
func TestChaosExpand(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			chaosParallel(t)
			chaosExpand(t, engine)
		})
	}
}

// expander runs `ontime store expand` with args; with killOn, it is killed
// with SIGKILL once a line of its output contains killOn (or after
// killAfter, whichever first), and chaosExpand runs it again.
func expander(t *testing.T, killOn string, killAfter time.Duration, args ...string) (out string, killed bool) {
	t.Helper()
	cmd := exec.Command(ontimeBinary(t), append([]string{"store", "expand"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var b strings.Builder
	var timer <-chan time.Time
	if killOn != "" {
		timer = time.After(killAfter)
	}
	kill := func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		killed = true
		timer = nil
	}
	for lines != nil {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			b.WriteString(l + "\n")
			if killOn != "" && !killed && strings.Contains(l, killOn) {
				kill()
			}
		case <-timer:
			kill()
		}
	}
	err = cmd.Wait()
	if err != nil && !killed {
		t.Fatalf("ontime store expand %v: %v\n%s%s", args, err, b.String(), errb.String())
	}
	return b.String(), killed
}

func chaosExpand(t *testing.T, engine string) {
	m := 2
	if engine == "sqlite" {
		m = 1
	}
	rate := chaosSize(t, "EXPAND_RATE", 100, 500)
	const seconds = 40
	lo, hi := 400*time.Millisecond, 2*time.Second
	var old, twins []string
	if engine == "sqlite" {
		dir := t.TempDir()
		old, twins = []string{dir + "/a.db"}, []string{dir + "/b.db"}
	} else if engine == "postgres" {
		// A private server (max_connections 300): 3 nodes × 4 databases
		// of pools need more than the shared server leaves free.
		pg := testdb.StartPostgres(t)
		for range m {
			old, twins = append(old, pg.CreateDatabase()), append(twins, pg.CreateDatabase())
		}
	} else {
		old, twins = testdb.DSNs(t, engine, m), testdb.DSNs(t, engine, m)
	}
	yaml, leases := chaosYAML(engine, old, "")
	cfgA := writeChaosConfig(t, t.TempDir(), yaml)
	grownYAML, _ := chaosYAML(engine, append(append([]string{}, old...), twins...), "")
	cfgB := writeChaosConfig(t, t.TempDir(), grownYAML)
	twinArgs := []string{}
	for _, d := range twins {
		twinArgs = append(twinArgs, "--databases", d)
	}
	rcv := newChaosReceiver(t, nil)
	cl := startChaosCluster(t, cfgA, 3)
	ctx := t.Context()

	// Tasks due in an hour, keyed: they must all be there afterwards.
	c0 := newAPIClient(t, "http://"+cl.addrs[0])
	before := map[string]string{} // ID → key
	for b := range 5 {
		var reqs []apiv1.TaskRequest
		for i := range 1000 {
			reqs = append(reqs, apiv1.TaskRequest{Topic: "expand.later", Key: fmt.Sprintf("later-%d-%d", b, i), Delay: "1h", Target: rcv.srv.URL})
		}
		items, err := c0.SubmitBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range items {
			if it.Error != nil {
				t.Fatalf("preload: %+v", *it.Error)
			}
			before[it.ID] = reqs[i].Key
		}
	}

	load := newChaosLoad(t, "expand-"+engine, rcv.srv.URL, cl.addrs...)
	const batch = 10
	wait := load.streamBackground(ctx, rate*seconds, batch, time.Second*batch/time.Duration(rate), lo, hi)
	start := time.Now()
	var events []string
	event := func(e string) {
		events = append(events, fmt.Sprintf("%s at +%s", e, time.Since(start).Round(100*time.Millisecond)))
		t.Log(events[len(events)-1])
	}
	time.Sleep(3 * time.Second)

	// Copy, with the expander killed once and a node killed meanwhile.
	copyStart := time.Now()
	if _, killed := expander(t, "copy:", 1500*time.Millisecond, append([]string{"--config", cfgA, "--page", "20"}, twinArgs...)...); killed {
		event("expander killed during the copy")
	}
	load.setDown(1, true)
	cl.kill9(1)
	event("node n2 killed")
	out, _ := expander(t, "", 0, append([]string{"--config", cfgA, "--page", "20"}, twinArgs...)...)
	if !strings.Contains(out, "next: stop every node") {
		t.Fatalf("copy: %s", out)
	}
	cl.restart(1)
	load.setDown(1, false)
	copyEnd := time.Now()
	event("copy done, n2 back")
	if v, err := c0.StoreStatus(ctx); err != nil || v.Databases != m || v.Expansion == nil || v.Expansion.Phase != "copy" ||
		v.Expansion.TablesCopied != v.Expansion.Tables || v.Expansion.RowsCopied == 0 {
		t.Fatalf("GET /v1/store during the copy: %+v %v", v, err)
	}
	time.Sleep(3 * time.Second)

	// Cutover with the nodes stopped; the expander killed in the cleanup.
	for i := range cl.procs {
		load.setDown(i, true)
		if err := cl.procs[i].signal(t, syscall.SIGTERM); err != nil {
			t.Logf("n%d: %v", i+1, err)
		}
	}
	event("nodes stopped")
	out, killed := expander(t, "cleanup:", time.Minute, append([]string{"--config", cfgA, "--page", "20", "--cutover"}, twinArgs...)...)
	if !strings.Contains(out, "cut over:") || !killed {
		t.Fatalf("cutover (killed in the cleanup: %v): %s", killed, out)
	}
	cleanupStart := time.Now()
	event("cut over")
	cl.cfg = cfgB
	for i := range cl.procs {
		cl.restart(i)
		load.setDown(i, false)
	}
	event("nodes started with the grown config")
	event("expander killed in the cleanup")
	if out, _ := expander(t, "", 0, "--config", cfgB, "--page", "20"); !strings.Contains(out, "cleaned up") {
		t.Fatalf("cleanup: %s", out)
	}
	event("cleaned up")
	cleanupEnd := time.Now()

	if v, err := c0.StoreStatus(ctx); err != nil || v.Databases != 2*m || v.Expansion != nil {
		t.Fatalf("GET /v1/store after the cleanup: %+v %v", v, err)
	}
	if n := counter(t, "http://"+cl.addrs[0], "ontime_store_databases"); n != float64(2*m) {
		t.Fatalf("ontime_store_databases %v", n)
	}
	wait()
	rcv.settle(load, 5*time.Minute, 5*time.Second)
	res := rcv.count(load)
	// Every task of before answers by ID and by key, pending, once.
	c := newAPIClient(t, "http://"+cl.addrs[2])
	for id, key := range before {
		tk := c.get(id)
		if tk == nil || tk.Status != "pending" || tk.Key != key {
			t.Fatalf("task %s after the expansion: %+v", id, tk)
		}
		if byKey, err := c.GetByKey(ctx, "expand.later", key); err != nil || byKey.ID != id {
			t.Fatalf("key %s after the expansion: %+v %v", key, byKey, err)
		}
	}
	topics, err := c.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tp := range topics {
		if tp.Topic != "expand.later" {
			continue
		}
		found = true
		for st, n := range tp.Counts {
			if (st == "pending" && n != int64(len(before))) || (st != "pending" && n != 0) {
				t.Fatalf("expand.later counts %v, want %d pending and nothing else", tp.Counts, len(before))
			}
		}
	}
	if !found {
		t.Fatal("expand.later is not in /v1/topics")
	}
	// Lateness of the tasks due before the copy began (the idle figure),
	// during the copy, and during the cleanup (nodes back on 2M databases).
	p99 := func(lo, hi time.Time) time.Duration {
		return rcv.countDue(load, func(due time.Time) bool { return !due.Before(lo) && due.Before(hi) }).P99
	}
	idle, during, cleaning := p99(start, copyStart), p99(copyStart, copyEnd), p99(cleanupStart, cleanupEnd.Add(time.Second))
	t.Logf("lateness p99: before %s, during the copy %s (%.1f×), during the cleanup %s", idle, during, float64(during)/float64(max(idle, time.Microsecond)), cleaning)
	chaosVerdict(t, "expand/"+engine, res, true,
		fmt.Sprintf("%d → %d databases, 3 nodes; %s; %d tasks/s due %s–%s ahead; %s; %s", m, 2*m, strings.Join(events, ", "), rate, lo, hi, leases, load.failures()))
}
