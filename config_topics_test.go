package ontime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// The topics section: each topic's default target, read from the file and
// judged as a task's target is, errors naming topics.NAME.target.
func TestTopicsConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ontime.yaml")
	yaml := "data_dir: " + dir + `
brokers: {rabbit: "amqp://guest:guest@127.0.0.1:5672/"}
topics:
  orders.cancel: {target: "https://shop.example/hooks/cancel"}
  mail:
    target: mq://rabbit/ontime/mail
  later: {}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := func(topic string) string { return c.Topics[topic].Target }
	if target("orders.cancel") != "https://shop.example/hooks/cancel" || target("mail") != "mq://rabbit/ontime/mail" ||
		target("later") != "" || target("other") != "" {
		t.Fatalf("topics: %+v", c.Topics)
	}

	for _, tc := range []struct {
		topics map[string]TopicConfig
		want   string
	}{
		{map[string]TopicConfig{"bad name": {}}, `topics."bad name": the name has ' ' at position 3`},
		{map[string]TopicConfig{"t": {Target: "ftp://x/y"}}, `topics.t.target: scheme "ftp" is not supported`},
		{map[string]TopicConfig{"t": {Target: "https://user:pw@x/y"}}, "topics.t.target: must not carry credentials"},
		{map[string]TopicConfig{"t": {Target: "mq://nobroker/q"}}, `topics.t.target: names broker "nobroker", which brokers does not configure`},
		{map[string]TopicConfig{"t": {Target: "http://169.254.169.254/latest"}}, "topics.t.target: 169.254.169.254:80 is denied by the delivery policy"},
		{map[string]TopicConfig{"t": {MaxAttempts: 1001}}, "topics.t.max_attempts: is 1001; want 1 to 1000"},
		{map[string]TopicConfig{"t": {Priority: ptr(10)}}, "topics.t.priority: is 10; want 0 to 9"},
		{map[string]TopicConfig{"t": {Rate: -1}}, "topics.t.rate: is -1"},
		{map[string]TopicConfig{"t": {Concurrency: -2}}, "topics.t.concurrency: is -2"},
		{map[string]TopicConfig{"t": {Timeout: Duration(2 * time.Hour)}}, "topics.t.timeout: 2h0m0s is out of range 10ms..1h0m0s"},
		{map[string]TopicConfig{"t": {Retry: &Retry{Backoff: "linear"}}}, `topics.t.retry.backoff: "linear" is not exponential or fixed`},
		{map[string]TopicConfig{"t": {Retry: &Retry{Initial: "1m", Max: "10s"}}}, "topics.t.retry.max: 10s is below initial 1m0s"},
		{map[string]TopicConfig{"t": {Retry: &Retry{Schedule: []string{"10s", "soon"}}}}, `topics.t.retry.schedule[1]: "soon" is not a duration`},
		{map[string]TopicConfig{"t": {Retry: &Retry{Jitter: ptr(1.5)}}}, "topics.t.retry.jitter: 1.5 is out of range 0..1"},
	} {
		c := DefaultConfig()
		c.Topics = tc.topics
		c.fill()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.topics, err, tc.want)
		}
	}
	if err := ParseConfig([]byte("topics: {t: {targte: x}}"), new(Config)); err == nil || !strings.Contains(err.Error(), "topics.t.targte") {
		t.Errorf("unknown key of a topic: %v", err)
	}

	// Every setting, read from YAML and resolved as the config's layer.
	var full Config
	if err := ParseConfig([]byte(`topics:
  billing:
    target: https://billing.example/hook
    max_attempts: 7
    retry: {schedule: [10s, 1m, 10m, 1h], jitter: 0}
    priority: 5
    rate: 50.5
    concurrency: 4
    timeout: 3s
  mail: {retry: {backoff: fixed, initial: 30s}}
`), &full); err != nil {
		t.Fatal(err)
	}
	layers, err := full.topicLayers()
	if err != nil {
		t.Fatal(err)
	}
	b := layers["billing"]
	if b.Target != "https://billing.example/hook" || b.MaxAttempts != 7 || *b.Priority != 5 || b.Rate != 50.5 || b.Concurrency != 4 ||
		b.Timeout != 3*time.Second || b.Retry.String() != "schedule 10s, 1m0s, 10m0s, 1h0m0s" {
		t.Errorf("billing: %+v (retry %s)", b, b.Retry)
	}
	if m := layers["mail"]; m.Retry.Backoff != task.BackoffFixed || m.Retry.Initial != 30*time.Second || m.Retry.Jitter >= 0 {
		t.Errorf("mail: %+v", m.Retry)
	}
}

func ptr[T any](v T) *T { return &v }
