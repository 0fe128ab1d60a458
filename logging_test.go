package ontime_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// TestLoggerFormats: log_format json or text, durations written as the
// config takes them ("30s"), never as nanoseconds.
func TestLoggerFormats(t *testing.T) {
	t.Parallel()
	c := ontime.DefaultConfig()
	var b bytes.Buffer
	c.Logger(&b).Info("node started", "window", 30*time.Second, "lease", c.Cluster.LeaseTTL, "hot", c.Hot)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("json: %v %q", err, b.String())
	}
	if m["window"] != "30s" || m["lease"] != "10s" {
		t.Fatalf("durations: %s", b.String())
	}
	b.Reset()
	c.LogFormat = "text"
	c.LogLevel = "warn"
	l := c.Logger(&b)
	l.Info("hidden")
	l.Warn("slow", "took", 1500*time.Millisecond)
	if got := strings.TrimSpace(b.String()); !strings.Contains(got, "level=WARN msg=slow took=1.5s") || strings.Contains(got, "hidden") {
		t.Fatalf("text: %q", got)
	}
	c.LogFormat = "xml"
	c.Store.Databases = []string{"x.db"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `log_format: "xml" is not one of json, text`) {
		t.Fatalf("log_format xml: %v", err)
	}
}
