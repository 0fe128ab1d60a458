package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// garbageModes are the ways the hostile receiver answers a task's first
// call; every later call is answered 200. The bool says whether the mode
// answers 2xx (a delivery).
var garbageModes = []struct {
	name  string
	reply func(w http.ResponseWriter, r *http.Request) bool
}{
	{"ok", func(w http.ResponseWriter, r *http.Request) bool { return true }},
	{"500 invalid UTF-8", func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		// Bytes that are no UTF-8, then a 2-byte character cut at byte 256.
		_, _ = w.Write([]byte("\xff\xfe\xc0\x80 " + strings.Repeat("x", 250) + "é\xc3"))
		return false
	}},
	{"hang", func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done() // past delivery.timeout: the node gives up
		return false
	}},
	{"200 huge body", func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusOK)
		writeJunk(w, 32<<20)
		return true
	}},
	{"503 huge invalid body", func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		writeJunk(w, 32<<20)
		return false
	}},
	{"not HTTP", func(w http.ResponseWriter, r *http.Request) bool {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return false
		}
		_, _ = buf.WriteString("\xff\xfeHTTP/9.9 ??? \x00\x01\r\n\r\n\xff")
		_ = buf.Flush()
		conn.Close()
		return false
	}},
	{"200 then hang", func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{"))
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return true // the status said delivered
	}},
}

// writeJunk writes n bytes that are not UTF-8, until the reader hangs up.
func writeJunk(w io.Writer, n int) {
	chunk := []byte(strings.Repeat("\xff\xc3", 16<<10))
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// TestChaosGarbageReceiver: a node on PostgreSQL delivers to a receiver
// that answers each task's first call with garbage (see garbageModes):
// errors with bodies that are not UTF-8, hangs, huge bodies, bytes that are
// not HTTP. Every task is delivered, on its retry, exactly once.
func TestChaosGarbageReceiver(t *testing.T) {
	chaosParallel(t)
	n := chaosSize(t, "GARBAGE_TASKS", 700, 14000)
	var perMode [8]atomic.Int64
	rcv := newChaosReceiver(t, func(w http.ResponseWriter, r *http.Request, id string, attempt int) bool {
		_, _ = io.Copy(io.Discard, r.Body)
		if attempt > 1 {
			return true
		}
		m := int(crc32.ChecksumIEEE([]byte(id)) % uint32(len(garbageModes)))
		perMode[m].Add(1)
		return garbageModes[m].reply(w, r)
	})
	cfg := writeChaosConfig(t, t.TempDir(), fmt.Sprintf(`log_level: warn
store:
  driver: postgres
  databases: [%q]
  tables: 4
  segments: 2
hot:
  window: 2s
delivery:
  timeout: 1s
  concurrency: 64
  retry_base: 50ms
  retry_max: 500ms
  breaker_failures: 1000000
`, testdb.Postgres(t)))
	cl := startChaosCluster(t, cfg, 1)
	load := newChaosLoad(t, "garbage", rcv.srv.URL, cl.addrs...)
	load.stream(t.Context(), n, 100, 100*time.Millisecond, 200*time.Millisecond, 3*time.Second)
	rcv.settle(load, 5*time.Minute, 3*time.Second)
	var modes []string
	for i, m := range garbageModes {
		modes = append(modes, fmt.Sprintf("%s %d", m.name, perMode[i].Load()))
	}
	chaosVerdict(t, "garbage-receiver", rcv.count(load), false, "first calls: "+strings.Join(modes, ", "))
}

// TestChaosBurst: a large burst, 1 KB payloads, all due at one instant, in
// one `ontime serve`: every task delivered once (no kill: no duplicate),
// none early; the node's peak RSS is printed. The full run puts 2,000,000
// tasks (ONTIME_CHAOS_BURST_TASKS) on the embedded default, SQLite; the
// short one 20,000 on PostgreSQL, because SQLite (modernc, Go translated
// from C) runs about 100 times slower under the race detector.
// ONTIME_CHAOS_BURST_ENGINE chooses; ONTIME_CHAOS_BURST_BUFFER_POOL ("4G")
// runs MariaDB or PostgreSQL as a private server with that buffer pool.
func TestChaosBurst(t *testing.T) {
	chaosParallel(t)
	n := chaosSize(t, "BURST_TASKS", 20000, 2000000)
	// Time to submit them all before the instant: ~5,000/s measured here.
	lead := time.Duration(chaosSize(t, "BURST_LEAD_SECONDS", 20, n/4000+30)) * time.Second
	engine := os.Getenv("ONTIME_CHAOS_BURST_ENGINE")
	if engine == "" {
		engine = "postgres"
		if chaosFull() {
			engine = "sqlite"
		}
	}
	store := ""
	if engine != "sqlite" {
		dsn := testdb.DSNs(t, engine, 1)[0]
		if pool := os.Getenv("ONTIME_CHAOS_BURST_BUFFER_POOL"); pool != "" {
			// A private server whose buffer pool is sized as a production
			// server's (the shared one has 128 MiB, and InnoDB reads its
			// pages with O_DIRECT: no page cache behind it), and
			// PostgreSQL's shared_buffers.
			switch engine {
			case "mysql":
				dsn = testdb.StartMariaDB(t, "innodb_buffer_pool_size="+pool).CreateDatabase()
			case "postgres":
				// MariaDB's size ("4G") in PostgreSQL's units ("4GB").
				if u, ok := map[byte]string{'K': "kB", 'M': "MB", 'G': "GB", 'T': "TB"}[pool[len(pool)-1]]; ok {
					pool = pool[:len(pool)-1] + u
				}
				dsn = testdb.StartPostgres(t, "shared_buffers="+pool, "max_wal_size=8GB", "fsync=on").CreateDatabase()
			}
		}
		store = fmt.Sprintf("store:\n  driver: %s\n  databases: [%q]\n", engine, dsn)
	}
	rcv := newChaosReceiver(t, nil)
	// ONTIME_CHAOS_BURST_CONFIG: more of the node's config (YAML), to
	// measure a setting against the default.
	cfg := writeChaosConfig(t, t.TempDir(), "log_level: warn\n"+store+os.Getenv("ONTIME_CHAOS_BURST_CONFIG"))
	cl := startChaosCluster(t, cfg, 1)
	load := newChaosLoad(t, "burst", rcv.srv.URL, cl.addrs...)
	load.payload = []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	floorRate := 0.0
	if chaosFull() {
		// The floor of the drain in the same run, measured while the
		// machine is quiet (after the burst the database server may still
		// be busy with its own cleanup): net/http alone sending the same
		// calls to a receiver doing nothing.
		floorRate = webhookFloor(t, min(n, 50000), load.payload)
	}
	start := time.Now()
	due := start.Add(lead).Round(0) // wall clock: see chaosReceiver.serve
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(1000)) - 1000
				if from >= n || t.Context().Err() != nil || load.gaveUp.Load() {
					return
				}
				if step := max(n/10/1000, 1) * 1000; from > 0 && from%step == 0 {
					t.Logf("burst: %d of %d submitted after %s", from, n, time.Since(start).Round(time.Second))
				}
				dues := make([]time.Time, min(1000, n-from))
				for i := range dues {
					dues[i] = due.Add(time.Duration(i % 1000)) // sub-microsecond parts
				}
				load.submit(t.Context(), dues)
			}
		}()
	}
	wg.Wait()
	load.finished.Store(true)
	submitted := time.Since(start)
	if time.Now().After(due) {
		t.Logf("submitting %d tasks took %s, past the due instant (lead %s): set ONTIME_CHAOS_BURST_LEAD_SECONDS", n, submitted.Round(time.Second), lead)
	}
	timeout := 5*time.Minute + time.Duration(n/2000)*time.Second
	rcv.settle(load, max(time.Until(due), 0)+timeout, 5*time.Second)
	res := rcv.count(load)
	// Scanner claims per task (goal: at most 1.01; tasks due within the
	// hot window when submitted are claimed by the submit, not counted):
	// a task claimed more than once was claimed again after its lease ran
	// out or was handed back.
	claims := counter(t, "http://"+cl.addrs[0], "ontime_tasks_claimed_total") / float64(n)
	floor := ""
	if floorRate > 0 {
		floor = fmt.Sprintf("; net/http floor %.0f calls/s (the drain %.2f× it; %d calls at the floor take %s)",
			floorRate, float64(n)/res.Max.Seconds()/floorRate, n, time.Duration(float64(n)/floorRate*float64(time.Second)).Round(time.Second))
	}
	chaosVerdict(t, "burst", res, false, fmt.Sprintf("%d tasks with 1 KB payloads due at one instant, %s, one node; submitted in %s; last delivery %s after the instant; peak RSS of ontime serve %d MB; %.3f scanner claims per task%s",
		n, engine, submitted.Round(time.Second), res.Max.Round(time.Millisecond), peakRSS(cl.procs[0].cmd.Process.Pid)>>20, claims, floor))
}

// webhookFloor is the rate at which net/http alone, over loopback, makes
// n webhook-sized calls (payload in a webhook's body) from 32 goroutines
// (a lane's default concurrency) to a receiver that only reads them: what
// no store or scheduler behind the calls can beat on this machine.
func webhookFloor(t *testing.T, n int, payload []byte) float64 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := []byte(`{"id":"01JD0000000000000000000000","topic":"chaos.burst","key":"","payload":` + string(payload) + `,"due_at":"2026-12-06T00:00:00Z","attempt":1}`)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := hc.Post(srv.URL+"/hook", "application/json", bytes.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("webhook floor: %d of %d calls failed", f, n)
	}
	return float64(n) / time.Since(start).Seconds()
}

// TestChaosSlowClients: while tasks stream in through one node, hundreds of
// connections sit idle (before a request, and between requests on a
// keep-alive connection) and others trickle a task body a byte a second,
// more in all than http.max_connections. The node must drop every one of
// them on its timeouts, write nothing of the trickled tasks, and keep
// serving the real clients: every task delivered once.
func TestChaosSlowClients(t *testing.T) {
	chaosParallel(t)
	idle := chaosSize(t, "SLOW_IDLE", 200, 2000)
	keepAlive := chaosSize(t, "SLOW_KEEPALIVE", 50, 500)
	tricklers := chaosSize(t, "SLOW_TRICKLERS", 50, 500)
	n := chaosSize(t, "SLOW_TASKS", 2000, 30000)
	rcv := newChaosReceiver(t, nil)
	cfg := writeChaosConfig(t, t.TempDir(), `log_level: warn
http:
  read_header_timeout: 2s
  read_timeout: 3s
  idle_timeout: 2s
  max_connections: 128
`)
	cl := startChaosCluster(t, cfg, 1)
	addr := cl.addrs[0]
	load := newChaosLoad(t, "slow", rcv.srv.URL, addr)
	wait := load.streamBackground(t.Context(), n, 50, 100*time.Millisecond, 200*time.Millisecond, 3*time.Second)

	type slowConn struct {
		kind   string
		opened time.Time
		closed chan time.Duration // how long the server kept it
	}
	var conns []*slowConn
	open := func(kind string, prologue func(c net.Conn, r *bufio.Reader) error, trickle string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("%s connection: %v", kind, err)
		}
		t.Cleanup(func() { c.Close() })
		sc := &slowConn{kind: kind, opened: time.Now(), closed: make(chan time.Duration, 1)}
		conns = append(conns, sc)
		go func() {
			r := bufio.NewReader(c)
			if prologue != nil {
				if err := prologue(c, r); err != nil {
					sc.closed <- time.Since(sc.opened)
					return
				}
			}
			stop := make(chan struct{})
			if trickle != "" {
				go func() {
					for i := 0; i < len(trickle); i++ {
						select {
						case <-stop:
							return
						case <-time.After(time.Second):
						}
						if _, err := c.Write([]byte{trickle[i]}); err != nil {
							return
						}
					}
				}()
			}
			// The server answers (408, 413…) or hangs up: either frees it.
			_, _ = io.Copy(io.Discard, r)
			close(stop)
			sc.closed <- time.Since(sc.opened)
		}()
	}
	body := `{"topic":"chaos.trickle","key":"k","target":"` + rcv.srv.URL + `"}`
	for i := range tricklers {
		b := strings.Replace(body, `"k"`, fmt.Sprintf(`"k%d"`, i), 1)
		open("trickle", func(c net.Conn, _ *bufio.Reader) error {
			_, err := fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b))
			return err
		}, b)
	}
	for range idle {
		open("idle", nil, "")
	}
	for range keepAlive {
		open("keep-alive", func(c net.Conn, r *bufio.Reader) error {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}, "")
	}
	kept := map[string]time.Duration{}
	for _, sc := range conns {
		select {
		case d := <-sc.closed:
			kept[sc.kind] = max(kept[sc.kind], d)
		case <-time.After(2 * time.Minute):
			t.Fatalf("a %s connection is still open after 2 minutes", sc.kind)
		}
	}
	wait()
	rcv.settle(load, 3*time.Minute, 3*time.Second)
	page, err := newAPIClient(t, "http://"+addr).List(context.Background(), client.ListOptions{Topic: "chaos.trickle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != 0 {
		t.Errorf("%d trickled tasks were written though their bodies never arrived", len(page.Tasks))
	}
	chaosVerdict(t, "slow-clients", rcv.count(load), false,
		fmt.Sprintf("%d idle, %d idle keep-alive and %d trickling connections (max_connections 128): all dropped, longest kept: idle %s, keep-alive %s, trickle %s",
			idle, keepAlive, tricklers, kept["idle"].Round(time.Millisecond), kept["keep-alive"].Round(time.Millisecond), kept["trickle"].Round(time.Millisecond)))
}
