package testdb

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The shared brokers of the machine, overridden by ONTIME_TEST_AMQP,
// ONTIME_TEST_NATS, ONTIME_TEST_REDIS_URL and ONTIME_TEST_MQTT.
func AMQPURL() string  { return env("ONTIME_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/") }
func NATSURL() string  { return env("ONTIME_TEST_NATS", "nats://127.0.0.1:4222") }
func RedisURL() string { return env("ONTIME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0") }
func MQTTURL() string  { return env("ONTIME_TEST_MQTT", "mqtt://127.0.0.1:1883") }

// Unique returns prefix followed by 12 random hex digits: a name (stream,
// subject, exchange, queue, topic) no other test uses.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ProxyURL starts a Proxy in front of the broker of raw (a broker URL with
// one host:port) and returns the URL that goes through it.
func ProxyURL(t testing.TB, raw string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("testdb: proxy: %q is not a URL with a host", raw)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// DeadURL is raw with its host:port swapped for a loopback port nothing
// listens on: a broker that is down.
func DeadURL(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("testdb: %q is not a URL with a host", raw)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(freePort(t))
	return u.String()
}

// Broker is a broker process of the test's own on a free loopback port,
// with its data in a directory of the test, so Kill and Start restart it
// with what it had written.
type Broker struct {
	t    testing.TB
	Port int
	Dir  string
	// stopSignal is how Kill stops it: SIGKILL, or SIGTERM for a broker
	// that keeps acknowledged messages only in memory until it shuts down.
	stopSignal syscall.Signal
	startWait  time.Duration
	argv       func() []string
	env        []string
	cmd        *exec.Cmd
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Addr is host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// Start (re)starts the process and waits until it accepts connections.
func (b *Broker) Start() {
	b.t.Helper()
	argv := b.argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), b.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Kill reaches its children (RabbitMQ's beam)
	log, err := os.OpenFile(filepath.Join(b.Dir, "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("testdb: %s is required: %v", argv[0], err)
	}
	b.cmd = cmd
	deadline := time.Now().Add(b.startWait)
	for {
		c, err := net.Dial("tcp", b.Addr())
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(b.Dir, "process.log"))
			b.t.Fatalf("testdb: %s does not listen on %s after %s:\n%s", argv[0], b.Addr(), b.startWait, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the process (and its children) and waits for it.
func (b *Broker) Kill() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, b.stopSignal)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	b.cmd = nil
}

func newBroker(t testing.TB, sig syscall.Signal, wait time.Duration) *Broker {
	b := &Broker{t: t, Port: freePort(t), Dir: t.TempDir(), stopSignal: sig, startWait: wait}
	t.Cleanup(func() {
		if b.cmd != nil && b.cmd.Process != nil {
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			_ = b.cmd.Wait()
		}
	})
	return b
}

// StartNATS starts a private nats-server with JetStream, its store in the
// test's directory (a SIGKILL loses nothing the server acknowledged: the
// store is written before the PubAck).
func StartNATS(t testing.TB) *Broker {
	t.Helper()
	b := newBroker(t, syscall.SIGKILL, 20*time.Second)
	b.argv = func() []string {
		return []string{"nats-server", "-a", "127.0.0.1", "-p", strconv.Itoa(b.Port), "-js", "-sd", b.Dir}
	}
	b.Start()
	return b
}

// NATSURL of a private server.
func (b *Broker) NATSURL() string { return "nats://" + b.Addr() }

// StartRedisAOF starts a private redis-server that fsyncs every write to
// its append-only file before replying, so a SIGKILL loses no entry it
// acknowledged.
func StartRedisAOF(t testing.TB) *Broker {
	t.Helper()
	b := newBroker(t, syscall.SIGKILL, 20*time.Second)
	b.argv = func() []string {
		return []string{"redis-server", "--port", strconv.Itoa(b.Port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--dir", b.Dir}
	}
	b.Start()
	return b
}

// RedisURL of a private server.
func (b *Broker) RedisURL() string { return "redis://" + b.Addr() + "/0" }

// StartMosquitto starts a private mosquitto. Mosquitto keeps queued
// messages in memory and saves them when it shuts down, so Kill stops it
// with SIGTERM: a broker restart, not a crash.
func StartMosquitto(t testing.TB) *Broker {
	t.Helper()
	b := newBroker(t, syscall.SIGTERM, 20*time.Second)
	conf := filepath.Join(b.Dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\nmax_queued_messages 0\n", b.Port, b.Dir)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	b.argv = func() []string { return []string{"mosquitto", "-c", conf} }
	b.Start()
	return b
}

// MQTTURL of a private server.
func (b *Broker) MQTTURL() string { return "mqtt://" + b.Addr() }

// StartRabbitMQ starts a private RabbitMQ node (its own node name, ports
// and database directory, no plugins). An Erlang node takes 20–40 s to
// boot on this machine.
func StartRabbitMQ(t testing.TB) *Broker {
	t.Helper()
	b := newBroker(t, syscall.SIGKILL, 120*time.Second)
	dist := freePort(t)
	node := Unique("ontime_t_") + "@localhost"
	b.env = []string{
		"RABBITMQ_NODENAME=" + node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(b.Port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(b.Dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(b.Dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(b.Dir, "enabled_plugins"),
		"RABBITMQ_ENABLED_PLUGINS=",
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(b.Dir, "none"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(b.Dir, "none-advanced.config"),
	}
	b.argv = func() []string { return []string{"/usr/lib/rabbitmq/bin/rabbitmq-server"} }
	b.Start()
	return b
}

// AMQPURL of a private server.
func (b *Broker) AMQPURL() string { return "amqp://guest:guest@" + b.Addr() + "/" }

// Pause freezes the process (SIGSTOP): it keeps its connections but
// answers nothing, like a broker stuck in a long pause.
func (b *Broker) Pause() { _ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume undoes Pause.
func (b *Broker) Resume() { _ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGCONT) }
