package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestJobToBroker: the bill job's batches go to a Redis stream through an
// mq:// target: every row arrives in some batch, each message carries the
// job's headers, and every row reaches status 2. A job naming a broker
// that is not configured stops the start with a line naming
// process.target.
func TestJobToBroker(t *testing.T) {
	t.Parallel()
	const tables, rows = 2, 300
	db := newBillDB(t, "sqlite", tables, rows)
	stream := fmt.Sprintf("ontime-test-jobs-%d", time.Now().UnixNano())
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { rdb.Del(context.Background(), stream); rdb.Close() })
	base, _ := startJobNode(t, func(cfg *ontime.Config) {
		cfg.Brokers = map[string]string{"rs": testdb.RedisURL()}
		cfg.Jobs = []ontime.JobConfig{billJob("bill-mq", "sqlite", []string{db.dsn}, tables, "mq://rs/"+stream)}
	})
	total := tables * rows
	seen := map[string]int{} // item/id: ids repeat across tables
	waitFor(t, 60*time.Second, "every row in the stream", func() bool {
		msgs, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		clear(seen)
		for _, m := range msgs {
			if m.Values["ontime-topic"] != "job:bill-mq" || !strings.HasPrefix(fmt.Sprint(m.Values["ontime-task-id"]), "job-") {
				t.Fatalf("message headers: %v", m.Values)
			}
			var b struct {
				Job  string           `json:"job"`
				Item string           `json:"item"`
				Rows []map[string]any `json:"rows"`
			}
			if err := json.Unmarshal([]byte(fmt.Sprint(m.Values["payload"])), &b); err != nil || b.Job != "bill-mq" || b.Item == "" {
				t.Fatalf("message body: %v %+v", err, m.Values)
			}
			for _, r := range b.Rows {
				seen[fmt.Sprint(b.Item, "/", r["id"])]++
			}
		}
		if len(seen) != total {
			var runs apiv1.JobRunList
			getJSON(t, base+"/v1/jobs/bill-mq/runs?limit=5", &runs)
			t.Logf("%d messages, %d rows; runs %+v", len(msgs), len(seen), runs.Runs)
		}
		return len(seen) == total
	})
	waitFor(t, 30*time.Second, "every row set to status 2", func() bool { return db.count(t, tables, 2) == total })

	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Brokers = map[string]string{"rs": testdb.RedisURL()}
	cfg.Jobs = []ontime.JobConfig{billJob("bill-nobroker", "sqlite", []string{db.dsn}, tables, "mq://nope/x")}
	n, err := ontime.NewNode(context.Background(), cfg)
	if err == nil {
		n.Stop(context.Background())
		t.Fatal("a job naming an unconfigured broker was accepted")
	}
	if !strings.Contains(err.Error(), "process.target") || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error %q does not name process.target and the broker", err)
	}
}
