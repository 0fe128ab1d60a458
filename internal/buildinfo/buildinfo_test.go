package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestRead(t *testing.T) {
	toolchain := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-26T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true
	}
	for _, c := range []struct {
		name                 string
		stampV, stampC, date string
		bi                   func() (*debug.BuildInfo, bool)
		want                 Info
		line, ua             string
	}{
		{"toolchain only", "", "", "", toolchain,
			Info{Version: "(devel)", Commit: "0123456789abcdef0123", Time: "2026-11-26T10:00:00Z", Modified: true, Go: "go1.26.8"},
			"ontime (devel) (0123456789ab, modified, 2026-11-26T10:00:00Z) go1.26.8", "ontime/devel"},
		{"stamp wins (-buildvcs=false)", "v0.9.0-3-gabcdef1", "abcdef1234567890", "", none,
			Info{Version: "v0.9.0-3-gabcdef1", Commit: "abcdef1234567890", Go: "go1.26.8"},
			"ontime v0.9.0-3-gabcdef1 (abcdef123456) go1.26.8", "ontime/v0.9.0-3-gabcdef1"},
		{"dirty stamp", "v0.9.0-dirty", "abcdef", "2026-11-26T10:00:00Z", toolchain,
			Info{Version: "v0.9.0-dirty", Commit: "abcdef", Time: "2026-11-26T10:00:00Z", Modified: true, Go: "go1.26.8"},
			"ontime v0.9.0-dirty (abcdef, modified, 2026-11-26T10:00:00Z) go1.26.8", "ontime/v0.9.0-dirty"},
		{"go install @v1.2.0", "", "", "", func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true
		}, Info{Version: "v1.2.0", Go: "go1.26.8"}, "ontime v1.2.0 go1.26.8", "ontime/v1.2.0"},
	} {
		got := read(c.stampV, c.stampC, c.date, c.bi)
		if got != c.want {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
		if got.String() != c.line || got.UserAgent() != c.ua {
			t.Errorf("%s: %q %q; want %q %q", c.name, got.String(), got.UserAgent(), c.line, c.ua)
		}
	}
}
