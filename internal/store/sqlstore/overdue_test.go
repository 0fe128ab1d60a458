package sqlstore

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Each topic's oldest pending due, behind a burst of another topic that
// fills every segment's first overdueWalk rows at one instant: a topic
// with a few overdue tasks after it (read through its own rows), one with
// many rows but one overdue task (read through the range), one due later
// this hour and one due hours ahead (neither overdue: the look-ahead's),
// and the burst's own.
func TestOldestOverdueBehindABurst(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 2, 2)
			now := time.Now()
			insert := func(topic string, n int, due time.Time) []store.NewTask {
				t.Helper()
				var ts []store.NewTask
				for range n {
					nt := newTask(t, "", due, 2)
					nt.Topic = topic
					ts = append(ts, nt)
				}
				if _, err := s.Insert(ctx, ts); err != nil {
					t.Fatal(err)
				}
				return ts
			}
			// "many": 1,000 delivered tasks, then one overdue.
			insert("many", 1000, now.Add(-2*time.Hour))
			lease := store.Lease{Owner: "n1", Until: now.Add(time.Hour), Token: 9}
			var outs []store.Outcome
			for table := range 2 {
				for seg := range 2 {
					got, err := s.ClaimRunning(ctx, store.Item{Table: table, Segment: seg}, now, lease, 1000)
					if err != nil {
						t.Fatal(err)
					}
					for _, tk := range got {
						outs = append(outs, store.Outcome{Ref: store.Ref{ID: tk.ID, Token: tk.Token, DueAt: tk.DueAt, Topic: tk.Topic}, Done: true})
					}
				}
			}
			if len(outs) != 1000 {
				t.Fatalf("claimed %d of 1000", len(outs))
			}
			if err := s.Finish(ctx, outs); err != nil {
				t.Fatal(err)
			}
			burst := now.Add(-40 * time.Minute)
			insert("burst", 800, burst) // ~200 per table segment: every walk is cut at burst
			insert("few", 1, now.Add(-10*time.Minute))
			insert("few", 2, now.Add(-20*time.Minute))
			insert("many", 1, now.Add(-5*time.Minute))
			insert("soon", 2, now.Add(2*time.Minute))
			insert("later", 1, now.Add(3*time.Hour))

			counts, err := s.CountTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]time.Time{
				"burst": burst, "few": now.Add(-20 * time.Minute), "many": now.Add(-5 * time.Minute),
				"soon": now.Add(2 * time.Minute), "later": now.Add(3 * time.Hour),
			}
			got := map[string]time.Time{}
			for _, c := range counts {
				if c.Status == task.StatusPending {
					got[c.Topic] = c.MinDue
				}
			}
			for topic, due := range want {
				if g, ok := got[topic]; !ok || !g.Equal(task.CeilMicro(due)) { // dues are kept to the µs, never earlier
					t.Errorf("%s: oldest pending due %v (%v), want %v", topic, g, ok, due)
				}
			}
			if len(got) != len(want) {
				t.Errorf("topics with pending tasks: %v, want %d", got, len(want))
			}
			// Each way of asking alone: "many" through the range, "few"
			// through its own rows.
			for topic, rows := range map[string]int64{"many": 1001, "few": 3} {
				od, err := s.oldestOverdue(ctx, map[string]bool{topic: true}, map[string]int64{topic: rows}, micros(now))
				if err != nil {
					t.Fatal(err)
				}
				if due := od[topic]; due != micros(task.CeilMicro(want[topic])) {
					t.Errorf("%s alone: oldest overdue %v, want %v", topic, fromMicros(due), want[topic])
				}
			}
		})
	}
}

// BenchmarkCountTopicsOverdue: CountTopics on SQLite with n tasks of one
// topic overdue at one instant (ONTIME_BENCH_ROWS, default 200,000; 1 KB
// payloads), a rare topic overdue after them and one due this hour: what
// a scrape or GET /v1/topics pays through a big burst's drain.
//
//	go test ./internal/store/sqlstore -run '^$' -bench CountTopicsOverdue -benchtime 20x
func BenchmarkCountTopicsOverdue(b *testing.B) {
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{Driver: "sqlite", DSNs: []string{testdb.SQLite(b)}, Tables: 1, Segments: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	insertBurst(b, s, n, now.Add(-10*time.Minute), []byte(`{"pad":"`+strings.Repeat("x", 1000)+`"}`))
	for topic, due := range map[string]time.Time{"rare": now.Add(-time.Minute), "soon": now.Add(time.Minute)} {
		nt := newTask(b, "", due, 8)
		nt.Topic = topic
		if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := s.CountTopics(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
