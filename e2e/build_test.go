package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMakeBuildStampsVersion: `make build` under GOFLAGS=-buildvcs=false
// (as many CI systems build, where the toolchain records no commit) still
// makes a binary that says its version and commit, and `ontime version
// --json` and ontime_build_info agree.
func TestMakeBuildStampsVersion(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	commit := strings.TrimSpace(string(head))
	bin := filepath.Join(t.TempDir(), "ontime")
	mk := exec.Command("make", "-s", "-C", "..", "build", "BIN="+bin)
	mk.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var v struct {
		Version, Commit, Revision, Go string
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v: %s", err, out)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(v.Version) || v.Commit != commit || v.Revision != commit {
		t.Fatalf("version --json = %s; want a vX.Y.Z version and commit %s", out, commit)
	}
	line, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(line), v.Version) || !strings.Contains(string(line), commit[:12]) {
		t.Fatalf("version = %q (%v)", line, err)
	}

	// The metric says the same.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ontime.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\ndata_dir: "+filepath.Join(dir, "data")+"\nlog_level: error\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rd := bufio.NewReader(stdout)
	first, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	addr := strings.TrimSpace(strings.TrimPrefix(first, "ontime listening on "))
	want := `ontime_build_info{go="` + v.Go + `",revision="` + commit + `",version="` + v.Version + `"} 1`
	var metrics string
	waitFor(t, 30*time.Second, "ontime_build_info", func() bool {
		resp, err := http.Get(addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, "ontime_build_info{")
	})
	if !strings.Contains(metrics, want) {
		i := strings.Index(metrics, "ontime_build_info{")
		t.Fatalf("metrics have %q; want %s", metrics[i:i+strings.IndexByte(metrics[i:], '\n')], want)
	}
}
