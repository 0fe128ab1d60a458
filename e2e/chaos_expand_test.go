package e2e

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestChaosExpand (issue 30): `ontime store expand` doubles the databases
// of a 3-node cluster (SQLite 1 → 2, MariaDB and PostgreSQL 2 → 4) while
// tasks due 0.4–2 s ahead stream in at 100/s and are delivered by webhook.
// The expander is killed with SIGKILL during the copy and during the
// cleanup and run again; a node is killed during the copy and another
// during the cleanup. The cutover is online: the three nodes keep serving
// (they pause for the switch, API calls wait at their gate) and reopen the
// store with the grown list themselves. 0 lost, 0 early; 5,000 tasks
// submitted before (due in an hour) all answer by ID and key afterwards,
// pending, and the topic counts are the same.
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
	r := expanderRun(t, killOn, killAfter, args...)
	return r.out, r.killed
}

// expandRun is what an `ontime store expand` printed, and when each line
// came.
type expandRun struct {
	out    string
	killed bool
	lines  []string
	at     []time.Time
}

// when is the time the first line containing sub was read (zero: none).
func (r expandRun) when(sub string) time.Time {
	for i, l := range r.lines {
		if strings.Contains(l, sub) {
			return r.at[i]
		}
	}
	return time.Time{}
}

// expanderRun is expander, with the time each line of its output came.
func expanderRun(t *testing.T, killOn string, killAfter time.Duration, args ...string) (r expandRun) {
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
		r.killed = true
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
			r.lines, r.at = append(r.lines, l), append(r.at, time.Now())
			if killOn != "" && !r.killed && strings.Contains(l, killOn) {
				kill()
			}
		case <-timer:
			kill()
		}
	}
	err = cmd.Wait()
	if err != nil && !r.killed {
		t.Fatalf("ontime store expand %v: %v\n%s%s", args, err, b.String(), errb.String())
	}
	r.out = b.String()
	return r
}

func chaosExpand(t *testing.T, engine string) {
	m := 2
	if engine == "sqlite" {
		m = 1
	}
	rate := chaosSize(t, "EXPAND_RATE", 100, 500)
	// The live load runs for at least seconds and until the cleanup is
	// over. ONTIME_CHAOS_EXPAND_ROWS fills the store with that many more
	// tasks (due in a day) before the expansion: the benchmark of issue 30
	// (10,000,000 rows), with ONTIME_CHAOS_EXPAND_KILLS=0.
	const seconds = 40
	bulk := 0
	if v := os.Getenv("ONTIME_CHAOS_EXPAND_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("ONTIME_CHAOS_EXPAND_ROWS=%q: want a count of rows", v)
		}
		bulk = n
	}
	lo, hi := 400*time.Millisecond, 2*time.Second
	var old, twins []string
	if engine == "sqlite" {
		dir := t.TempDir()
		old, twins = []string{dir + "/a.db"}, []string{dir + "/b.db"}
	} else if engine == "postgres" {
		// A private server (max_connections 300): 3 nodes × 4 databases
		// of pools need more than the shared server leaves free.
		var settings []string
		if bulk > 0 {
			settings = []string{"fsync=on"} // a benchmark: commits wait for the disk
		}
		pg := testdb.StartPostgres(t, settings...)
		for range m {
			old, twins = append(old, pg.CreateDatabase()), append(twins, pg.CreateDatabase())
		}
	} else if bulk > 0 {
		// A private server sized for the benchmark's millions of rows, as
		// a production server is (the shared one's buffer pool is 128 MiB:
		// 10 M rows would measure its disk reads, not the expansion).
		my := testdb.StartMariaDB(t, "innodb_buffer_pool_size="+cmp.Or(os.Getenv("ONTIME_CHAOS_EXPAND_BUFFER_POOL"), "4G"))
		for range m {
			old, twins = append(old, my.CreateDatabase()), append(twins, my.CreateDatabase())
		}
	} else {
		old, twins = testdb.DSNs(t, engine, m), testdb.DSNs(t, engine, m)
	}
	yaml, leases := chaosYAML(engine, old, "")
	grownYAML, _ := chaosYAML(engine, append(append([]string{}, old...), twins...), "")
	if bulk > 0 {
		// The benchmark runs the default delivery lease, as users do. The
		// short one of the kill rounds (2 s) is shorter than the cutover
		// pause at millions of rows (seconds: outcome writes wait behind
		// the switch), so leases ran out during it and tasks already
		// delivered were claimed and delivered again (32 of 342,970 in the
		// 10 M PostgreSQL run).
		yaml = strings.Replace(yaml, "delivery:\n  lease_ttl: 2s", "delivery:\n  lease_ttl: 30s", 1)
		grownYAML = strings.Replace(grownYAML, "delivery:\n  lease_ttl: 2s", "delivery:\n  lease_ttl: 30s", 1)
		leases = strings.Replace(leases, "delivery.lease_ttl 2s", "delivery.lease_ttl 30s", 1)
	}
	cfgA := writeChaosConfig(t, t.TempDir(), yaml)
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

	if bulk > 0 {
		fillStore(t, cl.addrs, bulk, rcv.srv.URL)
		// The servers write out what the fill left (checkpoints, InnoDB's
		// flushing) before the idle figure is taken.
		time.Sleep(time.Minute)
	}

	cv, err := c0.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	itemsBefore := len(cv.Items)
	load := newChaosLoad(t, "expand-"+engine, rcv.srv.URL, cl.addrs...)
	const batch = 10
	// Sized for a day; halted after the cleanup (load.halt).
	wait := load.streamBackground(ctx, rate*86400, batch, time.Second*batch/time.Duration(rate), lo, hi)
	start := time.Now()
	var events []string
	event := func(e string) {
		events = append(events, fmt.Sprintf("%s at +%s", e, time.Since(start).Round(100*time.Millisecond)))
		t.Log(events[len(events)-1])
	}
	idleFor := 3 * time.Second
	if bulk > 0 {
		idleFor = 30 * time.Second // the idle figure the benchmark compares with
	}
	time.Sleep(idleFor)

	// ONTIME_CHAOS_EXPAND_KILLS=0 kills nothing, with the copy's default
	// pages: the lateness of an expansion without faults.
	kills, page := os.Getenv("ONTIME_CHAOS_EXPAND_KILLS") != "0", "20"
	if !kills {
		page = "0"
	}
	pageArgs := []string{"--page", page}
	// ONTIME_CHAOS_EXPAND_NICE paces the copy and the cleanup (--nice).
	if v := os.Getenv("ONTIME_CHAOS_EXPAND_NICE"); v != "" {
		pageArgs = append(pageArgs, "--nice", v)
	}
	// The benchmark's figures so far, as each phase ends: a run stopped
	// before the end still says what it measured. Tasks not delivered
	// yet are left out (counted as "not yet").
	soFar := func(phase string, lo, hi time.Time) {
		if bulk == 0 {
			return
		}
		r := rcv.countDue(load, func(due time.Time) bool { return !due.Before(lo) && due.Before(hi) })
		t.Logf("so far: lateness p99 %s %s (%s; %d delivered, %d not yet, %d duplicated)", phase, r.P99, hi.Sub(lo).Round(time.Second), r.Delivered, r.Lost, r.Duplicated)
	}
	// Copy, with the expander killed once and a node killed meanwhile.
	copyStart := time.Now()
	soFar("idle", start, copyStart.Add(-hi))
	if kills {
		if _, killed := expander(t, "copy:", 1500*time.Millisecond, append(append([]string{"--config", cfgA}, pageArgs...), twinArgs...)...); killed {
			event("expander killed during the copy")
		}
		load.setDown(1, true)
		cl.kill9(1)
		event("node n2 killed")
	}
	copyOut, _ := expander(t, "", 0, append(append([]string{"--config", cfgA}, pageArgs...), twinArgs...)...)
	out := copyOut
	if !strings.Contains(out, "next: run this command again with --cutover") {
		t.Fatalf("copy: %s", out)
	}
	if kills {
		cl.restart(1)
		load.setDown(1, false)
	}
	copyEnd := time.Now()
	event("copy done, n2 back")
	soFar("during the copy", copyStart, copyEnd.Add(-hi))
	if v, err := c0.StoreStatus(ctx); err != nil || v.Databases != m || v.Expansion == nil || v.Expansion.Phase != "copy" ||
		v.Expansion.TablesCopied != v.Expansion.Tables || v.Expansion.RowsCopied == 0 {
		t.Fatalf("GET /v1/store during the copy: %+v %v", v, err)
	}
	time.Sleep(3 * time.Second)

	// Cutover with the nodes running; the expander killed in the cleanup.
	cutStart := time.Now()
	killOn := "cleanup:"
	if !kills {
		killOn = ""
	}
	run := expanderRun(t, killOn, time.Minute, append(append([]string{"--config", cfgA, "--cutover"}, pageArgs...), twinArgs...)...)
	out = run.out
	killed := run.killed
	if !strings.Contains(out, "cut over:") || killed != kills {
		t.Fatalf("cutover (killed in the cleanup: %v): %s", killed, out)
	}
	// The cleanup begins when the expander says the nodes serve the 2M
	// databases; without a kill the same run goes on to clean up.
	cleanupStart := run.when("cut over:")
	event("cut over online (" + strings.TrimSpace(lineWith(out, "cutover took")) + ")")
	if kills {
		event("expander killed in the cleanup")
	}
	// Every node serves the grown store without a restart: its own
	// items are those of 2M databases.
	for i, addr := range cl.addrs {
		if v, err := newAPIClient(t, "http://"+addr).StoreStatus(ctx); err != nil || v.Databases != 2*m {
			t.Fatalf("n%d after the cutover: %+v %v", i+1, v, err)
		}
		if cv, err := newAPIClient(t, "http://"+addr).Cluster(ctx); err != nil || len(cv.Items) != 2*itemsBefore {
			t.Fatalf("n%d after the cutover serves %d items, want %d: %v", i+1, len(cv.Items), 2*itemsBefore, err)
		}
	}
	// A node killed during the cleanup comes back with the grown config.
	cl.cfg = cfgB
	if kills {
		load.setDown(2, true)
		cl.kill9(2)
		event("node n3 killed")
		if out, _ := expander(t, "", 0, append([]string{"--config", cfgB}, pageArgs...)...); !strings.Contains(out, "cleaned up") {
			t.Fatalf("cleanup: %s", out)
		}
		cl.restart(2)
		load.setDown(2, false)
		event("cleaned up, n3 back")
	} else if !strings.Contains(out, "cleaned up") {
		t.Fatalf("cleanup: %s", out)
	}
	cleanupEnd := time.Now()
	soFar("during the cleanup", cleanupStart, cleanupEnd.Add(-hi))
	time.Sleep(time.Until(start.Add(seconds * time.Second)))
	after := 3 * time.Second // lateness after the cleanup, then no more
	if bulk > 0 {
		after = 30 * time.Second // a second idle figure, after the expansion
	}
	time.Sleep(after)
	afterEnd := time.Now()
	load.halt.Store(true)

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
	idle, during, cut, cleaning, whole := p99(start, copyStart), p99(copyStart, copyEnd), p99(cutStart, cleanupStart), p99(cleanupStart, cleanupEnd.Add(time.Second)), p99(copyStart, cleanupEnd.Add(time.Second))
	x := func(d time.Duration) float64 { return float64(d) / float64(max(idle, time.Microsecond)) }
	t.Logf("lateness p99: before %s, during the copy (%s) %s (%.1f×), around the cutover %s, during the cleanup (%s) %s (%.1f×); the whole expansion %s (%.1f×); after it %s",
		idle, copyEnd.Sub(copyStart).Round(time.Millisecond), during, x(during), cut, cleanupEnd.Sub(cleanupStart).Round(time.Millisecond), cleaning, x(cleaning), whole, x(whole),
		p99(cleanupEnd.Add(time.Second), afterEnd.Add(-hi)))
	if !kills {
		t.Logf("expander: %s; %s", strings.TrimSpace(lineWith(copyOut, " rows to ")), strings.TrimSpace(lineWith(out, "cleaned up in")))
	}
	chaosVerdict(t, "expand/"+engine, res, true,
		fmt.Sprintf("%d → %d databases, 3 nodes; %s; %d tasks/s due %s–%s ahead; %s; %s", m, 2*m, strings.Join(events, ", "), rate, lo, hi, leases, load.failures()))
}

// lineWith is the first line of out that contains sub.
func lineWith(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// fillStore submits rows keyless tasks due in a day through the nodes'
// batch route (1,000 a call, 4 submitters round the nodes): a store that
// grew before its expansion.
func fillStore(t *testing.T, addrs []string, rows int, target string) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	var next atomic.Int64
	calls := (rows + 999) / 1000
	g, gctx := errgroup.WithContext(ctx)
	for w := range 4 {
		c := newAPIClient(t, "http://"+addrs[w%len(addrs)])
		g.Go(func() error {
			for {
				b := int(next.Add(1)) - 1
				if b >= calls {
					return nil
				}
				reqs := make([]apiv1.TaskRequest, min(1000, rows-b*1000))
				for i := range reqs {
					reqs[i] = apiv1.TaskRequest{Topic: "expand.bulk", Delay: "24h", Target: target, Payload: json.RawMessage(`{"order":12345,"user":"u-6789"}`)}
				}
				items, err := c.SubmitBatch(gctx, reqs)
				if err != nil {
					return fmt.Errorf("fill, call %d: %w", b, err)
				}
				for _, it := range items {
					if it.Error != nil {
						return fmt.Errorf("fill, call %d: %+v", b, *it.Error)
					}
				}
				if b%1000 == 999 {
					t.Logf("filled %d rows in %s", (b+1)*1000, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("filled %d rows in %s (%.0f/s)", rows, time.Since(start).Round(time.Millisecond), float64(rows)/time.Since(start).Seconds())
}
