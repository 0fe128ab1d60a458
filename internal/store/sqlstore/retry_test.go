package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateAddsRetry: a database of schema version 13 gets the retry
// column (its rows without a policy of their own) and the topic settings
// table; the step runs again whole without failing; a task's policy is
// then stored and read back, and a topic's settings document too.
func TestMigrateAddsRetry(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 2, 1)
			old := newTask(t, "k", time.Now().Add(time.Hour), 1)
			if _, err := s.Insert(ctx, []store.NewTask{old}); err != nil {
				t.Fatal(err)
			}
			backTo(t, s, "retry", 13)
			s.Close()

			s = openT(t, engine, dsns, 2, 1)
			if got, err := s.Get(ctx, old.ID); err != nil || got.Retry != "" {
				t.Fatalf("after migration: %v %+v", err, got)
			}
			stepAgain(t, s, 0, 14)
			nt := newTask(t, "", time.Now().Add(time.Hour), 1)
			nt.Retry = `{"schedule":["10s","1m0s"]}`
			ins, err := s.Insert(ctx, []store.NewTask{nt})
			if err != nil || ins[0].Task.Retry != nt.Retry {
				t.Fatalf("insert: %v %+v", err, ins)
			}
			if got, err := s.Get(ctx, nt.ID); err != nil || got.Retry != nt.Retry {
				t.Fatalf("read back: %v %+v", err, got)
			}
			if err := s.SetTopicSettings(ctx, "t", []byte(`{"max_attempts":3}`)); err != nil {
				t.Fatal(err)
			}
			if all, err := s.AllTopicSettings(ctx); err != nil || string(all["t"]) != `{"max_attempts":3}` {
				t.Fatalf("topic settings: %v %q", err, all)
			}
			if err := s.SetTopicSettings(ctx, "t", nil); err != nil {
				t.Fatal(err)
			}
			if all, err := s.AllTopicSettings(ctx); err != nil || len(all) != 0 {
				t.Fatalf("topic settings removed: %v %q", err, all)
			}
		})
	}
}
