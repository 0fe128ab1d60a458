package testdb

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// PGServer is a PostgreSQL server of the test's own (initdb + pg_ctl from
// /usr/lib/postgresql/*/bin) on a free loopback port with its own data
// directory, so a test can stop and restart it without touching the shared
// server. Its data survives Stop/Start, as a real server's does.
type PGServer struct {
	t        testing.TB
	settings []string // -c name=value after the defaults
	bin      string
	dir      string // data directory
	port     int
	cred     *syscall.Credential // set when running as root: postgres refuses root
}

// StartPostgres initialises and starts a private PostgreSQL (trust auth,
// user postgres, fsync off, max_connections 300; settings, "name=value",
// override them: "fsync=on" for a server whose commits wait for the disk,
// as a benchmark's must) and stops it when the test ends. Missing binaries
// fail the test.
func StartPostgres(t testing.TB, settings ...string) *PGServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("testdb: a private PostgreSQL needs pg_ctl under /usr/lib/postgresql/*/bin")
	}
	sort.Strings(bins)
	p := &PGServer{t: t, bin: filepath.Dir(bins[len(bins)-1]), settings: settings}
	// Not t.TempDir: its parents are 0700 and owned by the test's user,
	// which the postgres user cannot enter.
	root, err := os.MkdirTemp("", "ontime-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testdb: running as root, a private PostgreSQL needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	p.dir = filepath.Join(root, "data")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.run("initdb", "-D", p.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	p.Start()
	t.Cleanup(func() { p.stop("fast") })
	return p
}

// URL is the pgx URL of database db on this server.
func (p *PGServer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// Addr is host:port.
func (p *PGServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// CreateDatabase creates a fresh database and returns its URL.
func (p *PGServer) CreateDatabase() string {
	p.t.Helper()
	return p.URL(createDB(p.t, "pgx", p.URL("postgres"), "private PostgreSQL", " WITH (FORCE)"))
}

// Start starts the server and waits until it accepts connections.
func (p *PGServer) Start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c max_connections=300", p.port, filepath.Dir(p.dir))
	for _, kv := range p.settings {
		opts += " -c " + kv
	}
	p.run("pg_ctl", "-D", p.dir, "-l", filepath.Join(filepath.Dir(p.dir), "log"), "-o", opts, "-w", "-t", "60", "start")
	waitPort(p.t, p.Addr())
}

// Crash stops the server as a crash would (pg_ctl stop -m immediate: no
// checkpoint, clients cut off); Start recovers it from its WAL.
func (p *PGServer) Crash() {
	p.t.Helper()
	if err := p.stop("immediate"); err != nil {
		p.t.Fatalf("testdb: pg_ctl stop: %v", err)
	}
}

func (p *PGServer) stop(mode string) error {
	cmd := p.command("pg_ctl", "-D", p.dir, "-m", mode, "-w", "stop")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func (p *PGServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = filepath.Dir(p.dir)
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd
}

func (p *PGServer) run(name string, args ...string) {
	p.t.Helper()
	if out, err := p.command(name, args...).CombinedOutput(); err != nil {
		p.t.Fatalf("testdb: %s: %v\n%s", name, err, out)
	}
}
