package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Markers of the fenced blocks the docs promise will run, as the info
// string after the opening fence:
//
//	```sh run      bash -euo pipefail, against a live node: `ontime` on PATH,
//	               $ONTIME_SERVER its address, $S its base URL
//	```yaml check  written to a file and validated with
//	               `ontime serve --config FILE --check` (store, hot tier and
//	               coordinator reached)
//
// A plain ```sh or ```yaml block is an illustration (hosts that do not
// exist here, a command that runs for ever) and is not run.
const (
	markShell = "sh run"
	markYAML  = "yaml check"
)

// docBlock is one runnable block of a page.
type docBlock struct {
	line int // of the opening fence
	kind string
	body string
}

// docBlocks reads the runnable blocks of one Markdown file, in order.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	var body strings.Builder
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "```") {
			if cur != nil {
				body.WriteString(line + "\n")
			}
			continue
		}
		if inFence {
			if cur != nil {
				cur.body = body.String()
				out = append(out, *cur)
				cur = nil
				body.Reset()
			}
			inFence = false
			continue
		}
		inFence = true
		switch info := strings.Join(strings.Fields(strings.TrimPrefix(trimmed, "```")), " "); info {
		case markShell, markYAML:
			cur = &docBlock{line: n, kind: info}
		}
	}
	if inFence {
		t.Fatalf("%s: a fenced block is not closed", path)
	}
	return out
}

// TestDocsRun runs every block of README.md and docs/*.md marked runnable,
// so a page whose commands or config no longer work fails here. Each page
// has a node of its own (SQLite in a temporary directory); the blocks run in
// that directory, in page order, each a failure of its own. Blocks that
// need MariaDB, PostgreSQL or Redis use the local servers, with databases
// and users of their own that a later block of the page drops.
func TestDocsRun(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"../README.md"}, pages...)
	// What an earlier run cut short may have left: the pages create these
	// names and would fail on finding them.
	dropDocsDatabases(t)
	t.Cleanup(func() { dropDocsRedisKeys(t); dropDocsDatabases(t) })
	total := 0
	for _, page := range pages {
		blocks := docBlocks(t, page)
		total += len(blocks)
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(page), func(t *testing.T) { runPage(t, page, blocks) })
	}
	if total < 5 {
		t.Fatalf("only %d runnable blocks in the docs: the markers %q/%q were lost?", total, markShell, markYAML)
	}
}

func runPage(t *testing.T, page string, blocks []docBlock) {
	bin := ontimeBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, b := range blocks {
		if b.kind == markShell {
			// One node per page, started only when the page has commands.
			addr := freeAddr(t)
			cfg := filepath.Join(dir, "node.yaml")
			if err := os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "node-data")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			startServe(t, cfg, addr)
			env = append(env, "ONTIME_SERVER="+addr, "S=http://"+addr)
			break
		}
	}
	for _, b := range blocks {
		where := page + ":" + strconv.Itoa(b.line)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		var cmd *exec.Cmd
		switch b.kind {
		case markShell:
			cmd = exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.body)
		case markYAML:
			f := filepath.Join(dir, "check-"+strconv.Itoa(b.line)+".yaml")
			if err := os.WriteFile(f, []byte(b.body), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd = exec.CommandContext(ctx, bin, "serve", "--config", f, "--check")
		}
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s (%s block) failed: %v\n--- block:\n%s--- output:\n%s", where, b.kind, err, b.body, out)
		}
	}
}

// docsRedisPrefix is what every Redis key prefix in a runnable block starts
// with, so the keys the blocks leave on the shared Redis can be found.
const docsRedisPrefix = "ontime-docs"

// dropDocsRedisKeys deletes the keys the pages' Redis blocks made (the hot
// tier's and the coordinator's, whose names may start with a hash tag).
func dropDocsRedisKeys(t *testing.T) {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	ctx := context.Background()
	for _, pattern := range []string{docsRedisPrefix + "*", "{" + docsRedisPrefix + "*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("dropping the docs' Redis keys: %v", err)
		}
	}
}

var (
	mdLink    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile("(?m)^#{1,6} +(.+)$")
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	return strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
}

// anchors lists the headings' anchors of a Markdown file, fenced blocks
// left out (a shell comment is not a heading).
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if !fence {
			text.WriteString(line + "\n")
		}
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text.String(), -1) {
		out[slug(m[1])] = true
	}
	return out
}

// TestDocsLinks: every relative link of README.md, docs/*.md and the
// results pages (BENCHMARKS.md, RELIABILITY.md, their plots included)
// names a file of the repository, and a #section one of its headings, so
// moving a page or renaming a section cannot leave a dead link behind.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md", "../BENCHMARKS.md", "../RELIABILITY.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			url := m[1]
			if strings.Contains(url, "://") || strings.HasPrefix(url, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(url, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", page, url, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchors(t, target)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", page, url, target, anchor)
			}
		}
	}
}

// TestArchitectureMap: the map in docs/architecture.md names every package
// under internal/, so a new one cannot be left off it.
func TestArchitectureMap(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir("../internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !bytes.Contains(b, []byte("`internal/"+d.Name())) {
			t.Errorf("docs/architecture.md does not name internal/%s", d.Name())
		}
	}
}

// dropDocsDatabases drops the MariaDB and PostgreSQL databases and users
// the pages' blocks create (docs/cluster.md): ontime_docs*.
func dropDocsDatabases(t *testing.T) {
	const script = `
mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS ontime_docs0; DROP USER IF EXISTS 'ontime_docs'@'%';"
psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1 -c 'DROP DATABASE IF EXISTS ontime_docs0 WITH (FORCE)' -c 'DROP ROLE IF EXISTS ontime_docs'
`
	if out, err := exec.Command("bash", "-euo", "pipefail", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("dropping the docs' databases: %v\n%s", err, out)
	}
}
