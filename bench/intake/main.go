// Command intake measures issue 24's intake workloads against `ontime
// serve` binaries in one run, alternating them round by round, beside the
// net/http floor measured by the same client:
//
//   - c16: 16 HTTP clients (-clients) each submitting single keyed tasks
//     (POST /v1/tasks, a business key on every task) due -due ahead, as
//     fast as they are answered, with webhook delivery to a receiver in
//     this process meanwhile: accepted/s, and the lateness of the
//     deliveries (p50, p99, max, early);
//   - seq: one client, single submits (keyed with -keyed);
//   - batch: one client, POST /v1/tasks:batch of -batch tasks.
//
// The floor is a net/http server in this process that decodes each
// submit's JSON and answers a canned task, storing and delivering nothing.
//
//	cd bench && go build -o /tmp/intake ./intake
//	/tmp/intake -bins old=/tmp/ontime-main,new=/tmp/ontime-new -driver sqlite -mode c16 -rounds 3
//
// -driver postgres and mysql create a fresh database per server start
// (on 127.0.0.1, the test servers) and drop it after.
package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "intake:", err)
		os.Exit(1)
	}
}

type opts struct {
	driver   string
	mode     string
	clients  int
	secs     float64
	due      time.Duration
	keyed    bool
	batch    int
	extraCfg string
}

var seq atomic.Int64

func run() error {
	var o opts
	bins := flag.String("bins", "", "comma-separated name=path of ontime binaries")
	rounds := flag.Int("rounds", 3, "rounds; each measures every binary and the floor once")
	floor := flag.Bool("floor", true, "measure the net/http floor too")
	flag.StringVar(&o.driver, "driver", "sqlite", "sqlite | postgres | mysql")
	flag.StringVar(&o.mode, "mode", "c16", "c16 | seq | batch")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients of c16")
	flag.Float64Var(&o.secs, "secs", 5, "seconds of submits per measurement")
	flag.DurationVar(&o.due, "due", 2*time.Second, "tasks due this far ahead (c16); seq and batch: 1h")
	flag.BoolVar(&o.keyed, "keyed", true, "a business key on every task")
	flag.IntVar(&o.batch, "batch", 1000, "tasks per batch call")
	flag.StringVar(&o.extraCfg, "cfg", "", "extra YAML appended to the node config")
	flag.Parse()
	if o.mode != "c16" {
		o.due = time.Hour
	}
	type bin struct{ name, path string }
	var bs []bin
	for _, b := range strings.Split(*bins, ",") {
		name, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-bins: %q is not name=path", b)
		}
		bs = append(bs, bin{name, path})
	}
	res := map[string][]result{}
	var order []string
	if *floor {
		order = append(order, "floor")
	}
	for _, b := range bs {
		order = append(order, b.name)
	}
	for r := 0; r < *rounds; r++ {
		for i := range order {
			name := order[(i+r)%len(order)]
			var x result
			var err error
			if name == "floor" {
				x, err = measureFloor(o)
			} else {
				path := ""
				for _, b := range bs {
					if b.name == name {
						path = b.path
					}
				}
				x, err = measureNode(path, o)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			fmt.Printf("round %d %-8s %s\n", r, name, x)
			res[name] = append(res[name], x)
		}
	}
	fl := 0.0
	if *floor {
		fl = median(res["floor"], func(x result) float64 { return x.rate })
	}
	fmt.Printf("\n%s %s clients=%d keyed=%v (medians of %d rounds)\n", o.driver, o.mode, o.clients, o.keyed, *rounds)
	for _, name := range order {
		rate := median(res[name], func(x result) float64 { return x.rate })
		line := fmt.Sprintf("%-8s %9.0f/s", name, rate)
		if fl > 0 {
			line += fmt.Sprintf("  %.3f× floor", rate/fl)
		}
		if name != "floor" && o.mode == "c16" {
			line += fmt.Sprintf("  p99 %.1f ms  early(max) %d  lost(max) %d",
				median(res[name], func(x result) float64 { return x.p99 }),
				int(slices.Max(mapf(res[name], func(x result) float64 { return float64(x.early) }))),
				int(slices.Max(mapf(res[name], func(x result) float64 { return float64(x.lost) }))))
		}
		fmt.Println(line)
	}
	return nil
}

func mapf(xs []result, f func(result) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func median(xs []result, f func(result) float64) float64 {
	v := mapf(xs, f)
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

type result struct {
	rate             float64
	accepted         int
	delivered, early int
	lost             int
	p50, p99, max    float64 // ms
	errs             int
	firstErr         string
}

func (r result) String() string {
	s := fmt.Sprintf("%8.0f/s accepted %d", r.rate, r.accepted)
	if r.delivered > 0 || r.lost > 0 {
		s += fmt.Sprintf(" delivered %d lost %d early %d late p50 %.1f p99 %.1f max %.1f ms", r.delivered, r.lost, r.early, r.p50, r.p99, r.max)
	}
	if r.errs > 0 {
		s += fmt.Sprintf(" errors %d (%s)", r.errs, r.firstErr)
	}
	return s
}

// ---- receiver ----

type receiver struct {
	mu   sync.Mutex
	late map[string]time.Duration // id -> lateness
	ln   net.Listener
	srv  *http.Server
}

var payloadOpen = []byte(`"payload":{"id":"`)

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{late: map[string]time.Duration{}, ln: ln}
	r.srv = &http.Server{Handler: r}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// ServeHTTP records each payload {"id":"…","due":<unix ns>} of a body.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	for {
		i := bytes.Index(body, payloadOpen)
		if i < 0 {
			break
		}
		body = body[i+len(payloadOpen):]
		j := bytes.IndexByte(body, '"')
		id := string(body[:j])
		body = body[j:]
		k := bytes.Index(body, []byte(`"due":`))
		body = body[k+6:]
		e := bytes.IndexByte(body, '}')
		ns, _ := strconv.ParseInt(string(body[:e]), 10, 64)
		if _, dup := r.late[id]; !dup {
			r.late[id] = now.Sub(time.Unix(0, ns))
		}
	}
	r.mu.Unlock()
	if bytes.Contains([]byte(req.Header.Get("Content-Type")), []byte("batch")) {
		_, _ = w.Write([]byte(`{"failed":[]}`))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() + "/hook" }

// ---- load ----

func httpClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tr.MaxIdleConns = 1024
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func taskJSON(target string, keyed bool, due time.Time) ([]byte, string) {
	n := seq.Add(1)
	id := "j" + strconv.FormatInt(n, 10)
	var b []byte
	b = append(b, `{"topic":"bench"`...)
	if keyed {
		b = append(b, `,"key":"order-`...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, time.Now().UnixNano(), 36)
		b = append(b, '"')
	}
	b = append(b, `,"due_at":"`...)
	b = due.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","target":"`...)
	b = append(b, target...)
	b = append(b, `","payload":{"id":"`...)
	b = append(b, id...)
	b = append(b, `","due":`...)
	b = strconv.AppendInt(b, due.UnixNano(), 10)
	b = append(b, `}}`...)
	return b, id
}

// load runs o's workload against base and answers the accepted tasks.
func load(base, target string, o opts) (result, map[string]bool, error) {
	hc := httpClient()
	defer hc.CloseIdleConnections()
	workers, per := o.clients, 1
	if o.mode != "c16" {
		workers = 1
	}
	if o.mode == "batch" {
		per = o.batch
	}
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		res      result
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(time.Duration(o.secs * float64(time.Second)))
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			var errs int
			var first string
			for time.Now().Before(stop) {
				due := time.Now().Add(o.due)
				var body []byte
				url := base + "/v1/tasks"
				var ids []string
				if per == 1 {
					var id string
					body, id = taskJSON(target, o.keyed, due)
					ids = append(ids, id)
				} else {
					url += ":batch"
					body = append(body, `{"tasks":[`...)
					for i := range per {
						if i > 0 {
							body = append(body, ',')
						}
						t, _ := taskJSON(target, o.keyed, due)
						body = append(body, t...)
					}
					body = append(body, "]}"...)
				}
				resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				rb, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errs++
					if first == "" {
						first = fmt.Sprintf("%d %s", resp.StatusCode, rb)
					}
					continue
				}
				if per == 1 {
					mine = append(mine, ids...)
				} else {
					mine = append(mine, make([]string, per)...)
				}
			}
			mu.Lock()
			for _, id := range mine {
				accepted[id] = true
			}
			res.accepted += len(mine)
			res.errs += errs
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.rate = float64(res.accepted) / time.Since(start).Seconds()
	return res, accepted, nil
}

// ---- floor ----

func measureFloor(o opts) (result, error) {
	canned := []byte(`{"id":"01JC0000000000000000000000","topic":"bench","key":"order-1","due_at":"2026-01-01T00:00:02Z","first_due_at":"2026-01-01T00:00:02Z","payload":{"id":"j1","due":1},"target":"http://127.0.0.1:40000/hook","max_attempts":25,"attempts":0,"status":"pending","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}` + "\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, r *http.Request) {
		var v any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(canned)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(canned)
	}
	mux.HandleFunc("POST /v1/tasks", h)
	mux.HandleFunc("POST /v1/tasks:batch", h)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	res, _, err := load("http://"+ln.Addr().String(), "http://127.0.0.1:1/hook", o)
	return res, err
}

// ---- node ----

func freshDB(driver string) (string, func(), error) {
	name := fmt.Sprintf("intake24_%d_%d", os.Getpid(), seq.Add(1))
	var admin, dsn string
	switch driver {
	case "postgres":
		admin, dsn = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/"+name+"?sslmode=disable"
	case "mysql":
		admin, dsn = "root@tcp(127.0.0.1:3306)/", "root@tcp(127.0.0.1:3306)/"+name
	}
	drv := map[string]string{"postgres": "pgx", "mysql": "mysql"}[driver]
	db, err := sql.Open(drv, admin)
	if err != nil {
		return "", nil, err
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		return "", nil, err
	}
	drop := func() {
		q := "DROP DATABASE IF EXISTS " + name
		if driver == "postgres" {
			q += " WITH (FORCE)"
		}
		_, _ = db.Exec(q)
		db.Close()
	}
	return dsn, drop, nil
}

func measureNode(bin string, o opts) (result, error) {
	dir, err := os.MkdirTemp("", "intake24-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	rec, err := startReceiver()
	if err != nil {
		return result{}, err
	}
	defer rec.srv.Close()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "listen: 127.0.0.1:0\ndata_dir: %q\nlog_level: warn\n", filepath.Join(dir, "data"))
	if o.driver != "sqlite" {
		dsn, drop, err := freshDB(o.driver)
		if err != nil {
			return result{}, err
		}
		defer drop()
		fmt.Fprintf(&cfg, "store:\n  driver: %s\n  databases: [%q]\n", o.driver, dsn)
	}
	cfg.WriteString(o.extraCfg)
	cfgPath := filepath.Join(dir, "ontime.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return result{}, err
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return result{}, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--json", "serve", "--config", cfgPath)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	line := make([]byte, 0, 256)
	one := make([]byte, 1)
	for {
		if _, err := out.Read(one); err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			return result{}, fmt.Errorf("no listening line: %v: %s", err, b)
		}
		if one[0] == '\n' {
			break
		}
		line = append(line, one[0])
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	var m map[string]string
	if err := json.Unmarshal(line, &m); err != nil || m["listening"] == "" {
		return result{}, fmt.Errorf("first line %q", line)
	}
	base := m["listening"]
	if !strings.HasPrefix(base, "http") {
		base = "http://" + base
	}
	res, accepted, err := load(base, rec.url(), o)
	if err != nil {
		return res, err
	}
	if o.mode != "c16" {
		return res, nil
	}
	// Wait for deliveries: until every accepted task arrived or nothing
	// arrived for 10 s after the last due time.
	deadline := time.Now().Add(o.due + 10*time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		n := 0
		for id := range accepted {
			if _, ok := rec.late[id]; ok {
				n++
			}
		}
		rec.mu.Unlock()
		if n == len(accepted) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var lat []float64
	for id := range accepted {
		l, ok := rec.late[id]
		if !ok {
			res.lost++
			continue
		}
		res.delivered++
		if l < 0 {
			res.early++
		}
		lat = append(lat, float64(l)/float64(time.Millisecond))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.p50 = lat[len(lat)/2]
		res.p99 = lat[len(lat)*99/100]
		res.max = lat[len(lat)-1]
	}
	return res, nil
}
