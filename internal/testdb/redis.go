package testdb

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis is a redis-server of the test's own on a free loopback port, with
// no persistence: restarting it loses everything, as a crash would.
type Redis struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartRedis starts a private redis-server and stops it when the test ends.
// A missing redis-server binary fails the test.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &Redis{t: t, port: port, dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Addr is host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Start (re)starts the server, empty.
func (r *Redis) Start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("testdb: redis-server is required: %v", err)
	}
	waitPort(r.t, r.Addr())
}

// Stop kills the server (SIGKILL: nothing is saved).
func (r *Redis) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// StartRedisCluster starts a 3-master Redis Cluster on free loopback ports
// (redis-server --cluster-enabled, joined by redis-cli --cluster create)
// and returns the addresses once cluster_state is ok.
func StartRedisCluster(t testing.TB) []string {
	t.Helper()
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		dir := t.TempDir()
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--cluster-node-timeout", "2000")
		if err := cmd.Start(); err != nil {
			t.Fatalf("testdb: redis-server is required: %v", err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := "127.0.0.1:" + strconv.Itoa(port)
		waitPort(t, addr)
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("testdb: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if containsLine(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("testdb: redis cluster not ok: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return addrs
}

func waitPort(t testing.TB, addr string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: nothing listens on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// StartRedisSentinel starts a private redis-server master, replicas
// replicas of it, and a Sentinel (redis-server --sentinel) watching it
// under the name "ontime-test" (down after 1 s), all on free loopback
// ports until the test ends; it returns the Sentinel's address, the
// master's name and the master, once the Sentinel knows the master (and
// its replicas).
func StartRedisSentinel(t testing.TB, replicas int) (sentinel, master string, m *Redis) {
	t.Helper()
	m = StartRedis(t)
	mhost, mport, _ := net.SplitHostPort(m.Addr())
	for range replicas {
		port := freePort(t)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--replicaof", mhost, mport)
		if err := cmd.Start(); err != nil {
			t.Fatalf("testdb: redis-server is required: %v", err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitPort(t, "127.0.0.1:"+strconv.Itoa(port))
	}
	port := freePort(t)
	dir := t.TempDir()
	conf := dir + "/sentinel.conf"
	body := "port " + strconv.Itoa(port) + "\nbind 127.0.0.1\ndir " + dir + "\n" +
		"sentinel monitor ontime-test " + mhost + " " + mport + " 1\n" +
		"sentinel down-after-milliseconds ontime-test 1000\n" +
		"sentinel failover-timeout ontime-test 5000\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatalf("testdb: redis-server --sentinel is required: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitPort(t, addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("redis-cli", "-p", strconv.Itoa(port), "sentinel", "master", "ontime-test").Output()
		if strings.Contains(string(out), mport) && numSlaves(string(out)) >= replicas {
			return addr, "ontime-test", m
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: sentinel does not know its master and %d replicas: %s", replicas, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// numSlaves reads num-slaves from SENTINEL MASTER's field/value lines.
func numSlaves(out string) int {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "num-slaves" && i+1 < len(lines) {
			n, _ := strconv.Atoi(strings.TrimSpace(lines[i+1]))
			return n
		}
	}
	return 0
}
