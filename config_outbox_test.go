package ontime

import (
	"strings"
	"testing"
)

func TestOutboxConfigErrorsNameTheKey(t *testing.T) {
	ok := OutboxConfig{Name: "main", Driver: "mysql", Databases: []string{"root@tcp(127.0.0.1:3306)/app"}, Table: "outbox"}
	cases := []struct {
		want string
		edit func(o *OutboxConfig)
	}{
		{"outboxes[0].name", func(o *OutboxConfig) { o.Name = "a b" }},
		{"outboxes[0].driver", func(o *OutboxConfig) { o.Driver = "oracle" }},
		{"outboxes[0].databases", func(o *OutboxConfig) { o.Databases = nil }},
		{"outboxes[0].table", func(o *OutboxConfig) { o.Table = "out box" }},
		{"outboxes[0].table", func(o *OutboxConfig) { o.Tables = 4 }},
		{"outboxes[0].segments", func(o *OutboxConfig) { o.Segments = 65 }},
		{"outboxes[0].idle_poll", func(o *OutboxConfig) { o.IdlePoll = Duration(1) }},
		{"outboxes[0].on_relay", func(o *OutboxConfig) { o.OnRelay = "keep" }},
		{"outboxes[0].batch", func(o *OutboxConfig) { o.Batch = -1 }},
	}
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.fill()
	cfg.Outboxes = []OutboxConfig{ok}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		o := ok
		c.edit(&o)
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.fill()
		cfg.Outboxes = []OutboxConfig{o}
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.want, err)
		}
	}
	cfg = DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.fill()
	cfg.Outboxes = []OutboxConfig{ok, ok}
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "outboxes[1].name") {
		t.Errorf("a duplicate outbox: %v", err)
	}
	cfg = DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.fill()
	cfg.Outboxes = []OutboxConfig{ok}
	cfg.Jobs = []JobConfig{{Name: "outbox.main"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "outbox.main") {
		t.Errorf("a job named like the outbox's: %v", err)
	}
}
