package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MariaDBServer is a MariaDB server of the test's own (mariadb-install-db +
// mariadbd) on a free loopback port with its own data directory, for a test
// or benchmark that needs server settings the shared server does not have
// (a benchmark over millions of rows wants a buffer pool that holds them,
// as a production server is sized) without changing the shared one.
type MariaDBServer struct {
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
	done chan error
}

// StartMariaDB initialises and starts a private MariaDB (root without a
// password, durable commits as the shared server's, max_connections 1000;
// settings, "name=value" as mariadbd's --name=value, add to or override
// them: "innodb_buffer_pool_size=4G") and stops it when the test ends.
// Missing binaries fail the test.
func StartMariaDB(t testing.TB, settings ...string) *MariaDBServer {
	t.Helper()
	server, err := exec.LookPath("mariadbd")
	if err != nil {
		t.Fatal("testdb: a private MariaDB needs mariadbd and mariadb-install-db (Debian's mariadb-server)")
	}
	root, err := os.MkdirTemp("", "ontime-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	m := &MariaDBServer{t: t, dir: root, done: make(chan error, 1)}
	data := filepath.Join(root, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("testdb: mariadb-install-db: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"--no-defaults", "--datadir=" + data, "--user=" + currentUser(),
		"--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(root, "sock"), "--pid-file=" + filepath.Join(root, "pid"),
		"--log-error=" + filepath.Join(root, "log"), "--skip-name-resolve",
		"--max-connections=1000", "--innodb-flush-log-at-trx-commit=1"}
	for _, kv := range settings {
		args = append(args, "--"+kv)
	}
	m.cmd = exec.Command(server, args...)
	// Its own process group: a test killed by its timeout does not leave
	// the server behind the group's signal.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("testdb: mariadbd: %v", err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(m.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		db, _ := sql.Open("mysql", m.DSN(""))
		err := db.PingContext(ctx)
		db.Close()
		if err == nil {
			return m
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(filepath.Join(root, "log"))
			t.Fatalf("testdb: private MariaDB did not accept connections within 60s: %v\n%s", err, log)
		case err := <-m.done:
			log, _ := os.ReadFile(filepath.Join(root, "log"))
			t.Fatalf("testdb: private MariaDB exited: %v\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return strings.TrimSpace(os.Getenv("USER"))
}

// DSN is the go-sql-driver DSN of database db on this server.
func (m *MariaDBServer) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", m.port, db)
}

// CreateDatabase creates a fresh database and returns its DSN.
func (m *MariaDBServer) CreateDatabase() string {
	m.t.Helper()
	return m.DSN(createDB(m.t, "mysql", m.DSN(""), "private MariaDB", ""))
}

// stop shuts the server down (SIGTERM: a clean shutdown) and waits for it.
func (m *MariaDBServer) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
}
