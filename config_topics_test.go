package ontime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if c.topicTarget("orders.cancel") != "https://shop.example/hooks/cancel" || c.topicTarget("mail") != "mq://rabbit/ontime/mail" ||
		c.topicTarget("later") != "" || c.topicTarget("other") != "" {
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
}
