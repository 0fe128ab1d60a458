package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateAddsFirstDueAt: a database of schema version 2 (no
// first_due_at) gets the column, filled from due_at; the step runs again
// whole without failing, as after a cut-short run.
func TestMigrateAddsFirstDueAt(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 2, 1)
			due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
			nt := newTask(t, "k", due, 1)
			if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
				t.Fatal(err)
			}
			// Back to version 2: the column gone, the version recorded.
			backTo(t, s, "first_due_at", 2)
			s.Close()

			s = openT(t, engine, dsns, 2, 1)
			got, err := s.Get(ctx, nt.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.FirstDueAt.Equal(due) || !got.DueAt.Equal(due) {
				t.Fatalf("after migration: first due %s, due %s; want both %s", got.FirstDueAt, got.DueAt, due)
			}
			stepAgain(t, s, 0, 7)
		})
	}
}
