// Package buildinfo says what a binary is: its version and the commit it
// was built from. Release builds stamp both at link time (make build,
// make release, the Dockerfile):
//
//	go build -ldflags "-X github.com/ontimehq/ontime/internal/buildinfo.version=v1.2.0
//	                   -X github.com/ontimehq/ontime/internal/buildinfo.commit=0123abcd…"
//
// A build without them (go install …@v1.2.0, go build in a checkout) falls
// back to what the Go toolchain records (runtime/debug.ReadBuildInfo): the
// module version and, unless -buildvcs=false, the VCS revision. The stamp
// wins because many CI systems build with -buildvcs=false (or from a tree
// without .git, as a container build does), where the toolchain records
// neither.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-ldflags -X); empty in a plain go build. They are
// package variables only because -X can set nothing else; nothing writes
// them at run time.
var (
	version string
	commit  string
	date    string // commit time, RFC 3339 (optional)
)

// Info is what the binary knows of its own build.
type Info struct {
	// Version is the release (v1.2.0, or git describe's v1.2.0-3-gabcdef1
	// between releases); "(devel)" for an unstamped build from a checkout.
	Version string `json:"version"`
	// Commit is the full VCS revision; empty when unknown.
	Commit string `json:"commit,omitempty"`
	// Time is the commit's time; empty when unknown.
	Time string `json:"time,omitempty"`
	// Modified: built from a tree with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the toolchain's version.
	Go string `json:"go"`
}

// Read returns this binary's Info: the link-time stamp where set, the
// toolchain's build info for the rest.
func Read() Info {
	return read(version, commit, date, debug.ReadBuildInfo)
}

func read(stampVersion, stampCommit, stampDate string, bi func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: "(unknown)", Go: runtime.Version()}
	if b, ok := bi(); ok {
		if b.Main.Version != "" {
			in.Version = b.Main.Version
		}
		if b.GoVersion != "" {
			in.Go = b.GoVersion
		}
		for _, s := range b.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if stampVersion != "" {
		in.Version = stampVersion
		// git describe --dirty marks a modified tree.
		in.Modified = strings.HasSuffix(stampVersion, "-dirty")
	}
	if stampCommit != "" {
		in.Commit = stampCommit
	}
	if stampDate != "" {
		in.Time = stampDate
	}
	return in
}

// ShortCommit is the commit's first 12 characters.
func (in Info) ShortCommit() string { return in.Commit[:min(12, len(in.Commit))] }

// String is one line: "ontime v1.2.0 (0123456789ab, modified, TIME) go1.26".
func (in Info) String() string {
	s := "ontime " + in.Version
	if in.Commit != "" {
		s += " (" + in.ShortCommit()
		if in.Modified {
			s += ", modified"
		}
		if in.Time != "" {
			s += ", " + in.Time
		}
		s += ")"
	}
	return s + " " + in.Go
}

// UserAgent is the User-Agent of the calls ontime makes (webhooks, scan
// job batches): "ontime/VERSION", the version without spaces or
// parentheses, as RFC 9110's product token wants.
func (in Info) UserAgent() string {
	v := strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, r) {
			return -1
		}
		return r
	}, in.Version)
	if v == "" {
		return "ontime"
	}
	return "ontime/" + v
}
