package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ontimeBinary builds cmd/ontime once per test run, with -race when the
// tests run with it.
func ontimeBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ontime-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ontime")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../cmd/ontime")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveProc is one `ontime serve` process.
type serveProc struct {
	cmd  *exec.Cmd
	done chan error
	logs *strings.Builder
	mu   sync.Mutex
}

func startServe(t *testing.T, cfgPath, addr string, env ...string) *serveProc {
	t.Helper()
	p := spawnServe(t, cfgPath, addr, env...)
	c := newAPIClient(t, "http://"+addr)
	p.waitReady(t, func() bool { return c.Health(t.Context()) == nil })
	return p
}

// spawnServe starts `ontime serve` listening on addr, collecting its log,
// and kills it at the test's end if it still runs.
func spawnServe(t testing.TB, cfgPath, addr string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(ontimeBinary(t), "serve", "--config", cfgPath)
	return spawnCmd(t, cmd, append([]string{"ONTIME_LISTEN=" + addr}, env...)...)
}

// spawnCmd starts cmd with env added, collecting its log, and kills it at
// the test's end if it still runs: spawnServe's, or a command line of the
// caller's (the zone-loss test's is wrapped in ip netns exec).
func spawnCmd(t testing.TB, cmd *exec.Cmd, env ...string) *serveProc {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan error, 1), logs: &strings.Builder{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case err := <-p.done:
			p.done <- err // exited already
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			// What went wrong inside is in the process's warnings: CI's
			// output is all a failure there leaves.
			t.Logf("%s %s: its last warnings:\n%s", filepath.Base(cmd.Path), strings.Join(env, " "), lastWarnings(p.log(), 30))
		}
	})
	return p
}

// lastWarnings is the last n lines of a process's log at WARN or ERROR.
func lastWarnings(log string, n int) string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "")
}

// waitReady waits up to a minute for ready, failing the test if the
// process exits first.
func (p *serveProc) waitReady(t *testing.T, ready func() bool) {
	t.Helper()
	waitFor(t, 60*time.Second, "ontime serve ready", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("ontime serve exited: %v\n%s", err, p.log())
		default:
		}
		return ready()
	})
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *serveProc) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup, which must not wait for it again
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("ontime serve did not exit after %v\n%s", sig, p.log())
		return nil
	}
}

func writeConfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ontime.yaml")
	cfg := fmt.Sprintf(`data_dir: %s
log_level: debug
store:
  tables: 4
  segments: 2
hot:
  window: 1s
delivery:
  lease_ttl: 2s
  retry_base: 50ms
  retry_max: 200ms
  shutdown_grace: 20s
`, filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// restartScenario submits tasks due over a few seconds to a real `ontime
// serve`, stops the process with sig part-way through delivery, starts it
// again on the same data, and checks every task was delivered, none early.
// It returns how many tasks were delivered more than once.
func restartScenario(t *testing.T, sig syscall.Signal) (dups int) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir)
	addr := freeAddr(t)
	rcv := newReceiver(t)
	p := startServe(t, cfgPath, addr)
	c := newAPIClient(t, "http://"+addr)
	const n = 300
	due := map[string]time.Time{}
	for i := range n {
		delay := time.Duration(i%100) * 40 * time.Millisecond // 0 .. 4 s
		v := c.submit(apiv1.TaskRequest{Topic: "e2e.restart", Key: fmt.Sprint(i), Delay: delay.String(), Target: rcv.srv.URL})
		due[v.ID] = v.DueAt
	}
	waitFor(t, 30*time.Second, "some deliveries before the stop", func() bool { return len(rcv.delivered()) >= n/5 })
	err := p.signal(t, sig)
	before := len(rcv.delivered())
	t.Logf("%v: exit %v with %d/%d delivered", sig, err, before, n)
	if sig == syscall.SIGTERM && err != nil {
		t.Fatalf("graceful stop exited with %v\n%s", err, p.log())
	}
	startServe(t, cfgPath, addr)
	waitFor(t, 90*time.Second, "every task delivered after the restart", func() bool { return len(rcv.delivered()) == n })
	for _, cl := range rcv.allCalls() {
		d, ok := due[cl.ID]
		if !ok {
			t.Fatalf("unknown task %s delivered", cl.ID)
		}
		if cl.At.Before(d) {
			t.Errorf("task %s delivered %s early", cl.ID, d.Sub(cl.At))
		}
	}
	for _, cnt := range rcv.delivered() {
		if cnt > 1 {
			dups++
		}
	}
	return dups
}

func TestServeGracefulRestartLosesNothingDeliversNothingTwice(t *testing.T) {
	t.Parallel()
	if dups := restartScenario(t, syscall.SIGTERM); dups != 0 {
		t.Fatalf("%d tasks delivered twice across a graceful restart", dups)
	}
}

func TestServeKill9RestartLosesNothing(t *testing.T) {
	t.Parallel()
	dups := restartScenario(t, syscall.SIGKILL)
	// Duplicates are allowed only for deliveries in flight at the kill.
	t.Logf("kill -9: %d tasks delivered twice (in flight at the kill)", dups)
	if dups > 32 {
		t.Fatalf("%d duplicates: more than could have been in flight", dups)
	}
}

func TestServeBadConfigFailsWithOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":        {"store:\n  driverr: sqlite\n", "driverr"},
		"bad driver":         {"store:\n  driver: oracle\n", "store.driver"},
		"bad window":         {"hot:\n  window: 1h1x\n", "window"},
		"fire lead above 1m": {"hot:\n  max_fire_lead: 2m\n", "hot.max_fire_lead"},
		"negative fire lead": {"hot:\n  max_fire_lead: -1s\n", "hot.max_fire_lead"},
		"bad mysql dsn":      {"store:\n  driver: mysql\n  databases: [\"root@tcp(127.0.0.1:1)/nope\"]\n", "store.databases[0]"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		if err := os.WriteFile(path, []byte("data_dir: "+filepath.Join(dir, "d")+"\n"+tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, ontimeBinary(t), "serve", "--config", path).CombinedOutput()
		cancel()
		if err == nil {
			t.Fatalf("%s: serve started with a bad config", name)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%s: output %q, want one line naming %q", name, out, tc.want)
		}
	}
}
