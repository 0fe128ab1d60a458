package ontime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrokersConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ontime.yaml")
	yaml := "data_dir: " + dir + "\nbrokers:\n  rabbit: amqp://guest:guest@127.0.0.1:5672/\n  js: nats://127.0.0.1:4222\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, []string{"ONTIME_BROKERS_rs=redis://127.0.0.1:6379/0?maxlen=1000", "ONTIME_BROKERS_js=nats://10.0.0.1:4222"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rabbit": "amqp://guest:guest@127.0.0.1:5672/", "js": "nats://10.0.0.1:4222", "rs": "redis://127.0.0.1:6379/0?maxlen=1000"}
	if len(c.Brokers) != len(want) {
		t.Fatalf("brokers %v", c.Brokers)
	}
	for k, v := range want {
		if c.Brokers[k] != v {
			t.Errorf("brokers.%s = %q, want %q", k, c.Brokers[k], v)
		}
	}
	if c.Delivery.BrokerConcurrency != DefaultBrokerConcurrency {
		t.Errorf("delivery.broker_concurrency %d", c.Delivery.BrokerConcurrency)
	}

	for _, tc := range []struct{ url, want string }{
		{"kafka://h:9092", `brokers.b: scheme "kafka" is not one of`},
		{"amqp://u:s3cr3t@h:port/", "brokers.b: "},
		{"rediss://u:s3cr3t@h/0?maxlen=0", "brokers.b: maxlen="},
		{"mqtt://", "brokers.b: no host"},
		{"h:1883", "brokers.b: not a URL"},
	} {
		c := DefaultConfig()
		c.Brokers = map[string]string{"b": tc.url}
		c.fill()
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want one line starting %q without the password", tc.url, err, tc.want)
		}
	}
	c = DefaultConfig()
	c.Brokers = map[string]string{"bad name": "nats://h:4222"}
	c.fill()
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "brokers.bad name: the name") {
		t.Errorf("bad name: %v", err)
	}
	c = DefaultConfig()
	c.Delivery.BrokerConcurrency = 0
	c.fill()
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "delivery.broker_concurrency: 0") {
		t.Errorf("broker_concurrency 0: %v", err)
	}
}
