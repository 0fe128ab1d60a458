package ontime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tracing: and audit: sections and http.slow_request: read from the
// file and the environment, defaults, and errors naming the key.
func TestObserveConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ontime.yaml")
	yaml := "data_dir: " + dir + `
tracing: {enabled: true, endpoint: "http://collector:4318", sample_ratio: 0.25, service_name: billing-ontime}
audit: {file: ` + filepath.Join(dir, "audit.jsonl") + `, submits: true}
http: {slow_request: 250ms}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, []string{"ONTIME_TRACING_INSECURE=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tracing.Enabled || c.Tracing.SampleRatio != 0.25 || c.Tracing.ServiceName != "billing-ontime" || !c.Tracing.Insecure ||
		!c.Audit.Submits || c.Audit.File == "" || time.Duration(c.HTTP.SlowRequest) != 250*time.Millisecond {
		t.Fatalf("config %+v %+v %v", c.Tracing, c.Audit, c.HTTP.SlowRequest)
	}
	if proto, hp, err := c.Tracing.endpoint(); err != nil || proto != "http/protobuf" || hp != "collector:4318" {
		t.Fatalf("endpoint: %q %q %v", proto, hp, err)
	}
	d := DefaultConfig()
	if d.Tracing.Enabled || d.Tracing.SampleRatio != 1 || d.Audit.File != "" || time.Duration(d.HTTP.SlowRequest) != time.Second {
		t.Fatalf("defaults: %+v %+v %v", d.Tracing, d.Audit, d.HTTP.SlowRequest)
	}

	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Tracing.SampleRatio = 1.5 }, "tracing.sample_ratio: 1.5 is out of range 0..1"},
		{func(c *Config) { c.Tracing.SampleRatio = -0.1 }, "tracing.sample_ratio: -0.1 is out of range 0..1"},
		{func(c *Config) { c.Tracing.Protocol = "thrift" }, `tracing.protocol: "thrift" is not one of grpc, http/protobuf`},
		{func(c *Config) { c.Tracing.Endpoint = "collector" }, `tracing.endpoint: "collector" is not host:port or a URL`},
		{func(c *Config) { c.Tracing.Endpoint = "ftp://collector:21" }, `tracing.endpoint: "ftp://collector:21": scheme "ftp" is not http, https or grpc`},
		{func(c *Config) { c.Tracing.Endpoint = "http://c:4318/v1/traces" }, "tracing.endpoint: \"http://c:4318/v1/traces\": give the collector's base URL"},
		{func(c *Config) { c.Tracing.ServiceName = strings.Repeat("s", 256) }, "tracing.service_name: 256 bytes; at most 255"},
		{func(c *Config) { c.Audit.File = dir + "/" }, "audit.file: "},
		{func(c *Config) { c.HTTP.SlowRequest = 0 }, "http.slow_request: 0s is out of range 1ms..1h"},
		{func(c *Config) { c.HTTP.SlowRequest = Duration(2 * time.Hour) }, "http.slow_request: 2h0m0s is out of range 1ms..1h"},
	} {
		c := DefaultConfig()
		c.DataDir = dir
		tc.change(&c)
		c.fill()
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
