package testdb

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// zkClasspath is where Debian's zookeeper package puts the server
// (scripts/services.sh installs it).
const zkClasspath = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"

// StartZooKeeper starts a private standalone ZooKeeper server (Debian's
// zookeeper package, java) on a free loopback port with its data in a temp
// dir, and stops it when the test ends; it returns host:port once the
// server answers. Sessions may last 200ms..60s (tickTime 100ms), so tests
// can use short lease TTLs. A missing java or zookeeper.jar fails the test.
func StartZooKeeper(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Fatalf("testdb: ZooKeeper is required (apt-get install zookeeper; scripts/services.sh does): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "zoo.cfg")
	body := fmt.Sprintf("tickTime=100\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nminSessionTimeout=200\nmaxSessionTimeout=60000\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=srvr,mntr,ruok\nmaxClientCnxns=0\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx256m", "-cp", zkClasspath, "-Dzookeeper.log.dir="+dir, "org.apache.zookeeper.server.ZooKeeperServerMain", conf)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("testdb: java is required for ZooKeeper: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, err := ZooKeeperCommand(addr, "ruok"); err == nil && out == "imok" {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: ZooKeeper on %s did not answer within 60s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ZooKeeperCommand sends a four-letter word (srvr, mntr, ruok) to the
// server at addr and returns its answer.
func ZooKeeperCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return string(out), nil
}
