package ontime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const jobYAML = `jobs:
  - name: bill-settle
    cron: "*/10 * * * * *"
    source:
      driver: sqlite
      databases: [%DB%]
      table: "bill_{table}"
      tables: 2
      key: id
      columns: [id, x]
      where: {status: 1}
    process:
      target: http://127.0.0.1:1/hook
    on_success:
      set: {status: 2}
`

func TestJobConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	for want, yaml := range map[string]string{
		"jobs[0].source.bogus: unknown key": strings.Replace(jobYAML, "      key: id\n", "      key: id\n      bogus: 1\n", 1),
		"jobs[0]: source.key":               strings.Replace(jobYAML, "key: id", "key: \"id; --\"", 1),
		"jobs[0]: cron":                     strings.Replace(jobYAML, `"*/10 * * * * *"`, `"often"`, 1),
		"jobs[1].name":                      jobYAML + strings.TrimPrefix(jobYAML, "jobs:\n"),
		"jobs[0]: on_success.set":           strings.Replace(jobYAML, "      set: {status: 2}\n", "", 1),
		"jobs[0].source.zones: ":            strings.Replace(jobYAML, "      tables: 2\n", "      tables: 2\n      zones: [a, b]\n", 1),
		"jobs[0].source.zones[0]: ":         strings.Replace(jobYAML, "      tables: 2\n", "      tables: 2\n      zones: [A]\n", 1),
	} {
		path := filepath.Join(dir, "c.yaml")
		y := "data_dir: " + dir + "\n" + strings.ReplaceAll(yaml, "%DB%", filepath.Join(dir, "app.db"))
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error naming %q, got %v", want, err)
		}
	}
}

// An mq:// target needs a broker sender: refused at NewNode, naming the job.
func TestJobMQTargetWithoutBrokers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	y := "data_dir: " + dir + "\n" + strings.ReplaceAll(strings.Replace(jobYAML, "http://127.0.0.1:1/hook", "mq://rabbit/bills", 1), "%DB%", filepath.Join(dir, "app.db"))
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNode(context.Background(), cfg)
	if err == nil {
		_ = n.Stop(context.Background())
		t.Fatal("a job with an mq:// target started without brokers")
	}
	if !strings.Contains(err.Error(), "jobs[0]: process.target") {
		t.Fatalf("error %v does not name jobs[0]: process.target", err)
	}
}
