package logbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func TestZapIntoSlog(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	z := Zap(log).Named("etcd-client").With(zap.String("endpoint", "127.0.0.1:2379"))
	z.Debug("not shown")
	z.Info("lease keepalive", zap.Int64("lease", 7))
	z.Warn("retrying", zap.Duration("backoff", 250*time.Millisecond))
	z.Error("lost", zap.Error(errors.New("connection reset")))
	got := lines(t, &b)
	if len(got) != 3 {
		t.Fatalf("%d lines: %s", len(got), b.String())
	}
	for i, want := range []struct{ level, msg string }{{"INFO", "lease keepalive"}, {"WARN", "retrying"}, {"ERROR", "lost"}} {
		if got[i]["level"] != want.level || got[i]["msg"] != want.msg || got[i]["endpoint"] != "127.0.0.1:2379" || got[i]["logger"] != "etcd-client" {
			t.Errorf("line %d: %v; want %s %q", i, got[i], want.level, want.msg)
		}
	}
	if got[0]["lease"] != float64(7) || got[2]["error"] != "connection reset" {
		t.Errorf("fields: %v %v", got[0], got[2])
	}
}

func TestRedisIntoSlog(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	Redis{Log: log}.Printf(context.Background(), "redis: discarding bad PubSub connection: %s", "EOF")
	got := lines(t, &b)
	if len(got) != 1 || got[0]["level"] != "WARN" || got[0]["msg"] != "discarding bad PubSub connection: EOF" || got[0]["component"] != "go-redis" {
		t.Fatalf("%v", got)
	}
}
