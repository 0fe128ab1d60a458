package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestTraceparent: the submit's trace context is kept with the task by
// every insert path (one row, a batch of keyless rows — PostgreSQL's COPY,
// MariaDB's multi-statement —, keyed rows, claimed rows) and read back by
// Get and by Start, which hands it to delivery; an untraced task has ”.
func TestTraceparent(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1) // one table: one item claims all
			past := time.Now().Add(-time.Minute)
			tp := func(i int) string {
				return fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
			}
			var batch []store.NewTask
			for i := range 40 {
				nt := newTask(t, "", past, 1)
				if i%3 != 2 {
					nt.Traceparent = tp(i)
				}
				batch = append(batch, nt)
			}
			keyed := newTask(t, "k1", past, 1)
			keyed.Traceparent = tp(100)
			claimed := newTask(t, "", past, 1)
			claimed.Traceparent = tp(101)
			claimed.Claim = &store.Lease{Owner: "n", Until: time.Now().Add(time.Minute), Token: 9}
			for _, group := range [][]store.NewTask{batch[:1], batch[1:], {keyed}, {claimed}} {
				if _, err := s.Insert(ctx, group); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{keyed.ID: keyed.Traceparent, claimed.ID: claimed.Traceparent}
			for _, nt := range batch {
				want[nt.ID] = nt.Traceparent
			}
			for id, tpv := range want {
				got, err := s.Get(ctx, id)
				if err != nil || got.Traceparent != tpv {
					t.Fatalf("get %s: %v traceparent %q, want %q", id, err, got.Traceparent, tpv)
				}
			}
			now := time.Now()
			refs, err := s.Claim(ctx, store.Item{}, now, now, store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: 7}, 100)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, store.Ref{ID: claimed.ID, Token: 9, DueAt: claimed.DueAt, Topic: claimed.Topic})
			started, err := s.Start(ctx, refs, now.Add(time.Minute))
			if err != nil || len(started) != len(want) {
				t.Fatalf("start: %v, %d tasks, want %d", err, len(started), len(want))
			}
			for _, st := range started {
				if st.Traceparent != want[st.ID] {
					t.Fatalf("started %s: traceparent %q, want %q", st.ID, st.Traceparent, want[st.ID])
				}
			}
		})
	}
}

// TestMigrateAddsTraceparent: a database of schema version 11 gets the
// traceparent column, its rows ” (not traced); the step runs again whole.
func TestMigrateAddsTraceparent(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 2, 1)
			nt := newTask(t, "k", time.Now().Add(time.Hour), 1)
			if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
				t.Fatal(err)
			}
			backTo(t, s, "traceparent", 12)
			s.Close()

			s = openT(t, engine, dsns, 2, 1)
			if got, err := s.Get(ctx, nt.ID); err != nil || got.Traceparent != "" {
				t.Fatalf("after migration: %v %+v", err, got)
			}
			stepAgain(t, s, 0, 13)
		})
	}
}

// TestTraceparentKeyedAcrossTables: a keyed batch over several tables
// (PostgreSQL's one-statement path, insert_keyed.go; the others' per-table
// statements) keeps each task's trace context.
func TestTraceparentKeyedAcrossTables(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 8, 1)
			due := time.Now().Add(time.Hour)
			var batch []store.NewTask
			for i := range 24 {
				nt := newTask(t, fmt.Sprintf("key-%d", i), due, 1)
				nt.Traceparent = fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
				batch = append(batch, nt)
			}
			if _, err := s.Insert(ctx, batch); err != nil {
				t.Fatal(err)
			}
			for _, nt := range batch {
				got, err := s.Get(ctx, nt.ID)
				if err != nil || got.Traceparent != nt.Traceparent {
					t.Fatalf("get %s: %v traceparent %v, want %q", nt.ID, err, got, nt.Traceparent)
				}
			}
		})
	}
}
