package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestFinishResult: an outcome done with a result keeps it on the task
// (Get, and every read of the row); done without one, and a retry in the
// same batch, keep none; an outcome whose token lost its claim writes
// nothing.
func TestFinishResult(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1)
			past := time.Now().Add(-time.Minute)
			with, without, retried, stale := newTask(t, "", past, 1), newTask(t, "", past, 1), newTask(t, "", past, 1), newTask(t, "", past, 1)
			if _, err := s.Insert(ctx, []store.NewTask{with, without, retried, stale}); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			refs, err := s.Claim(ctx, store.Item{}, now, now, store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: 7}, 10)
			if err != nil || len(refs) != 4 {
				t.Fatalf("claim: %v %d refs", err, len(refs))
			}
			started, err := s.Start(ctx, refs, now.Add(time.Minute))
			if err != nil || len(started) != 4 || started[0].Result != nil {
				t.Fatalf("start: %v %d, result %q", err, len(started), started[0].Result)
			}
			var outs []store.Outcome
			for _, r := range refs {
				o := store.Outcome{Ref: r, Done: true}
				switch r.ID {
				case with.ID:
					o.Result = []byte(`{"ok":true}`)
				case retried.ID:
					o.Done, o.RetryAt, o.Error, o.Result = false, now.Add(time.Hour), "boom", []byte(`"no"`)
				case stale.ID:
					o.Token, o.Result = 8, []byte(`"stale"`)
				}
				outs = append(outs, o)
			}
			if err := s.Finish(ctx, outs); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]string{with.ID: `{"ok":true}`, without.ID: ``, retried.ID: ``, stale.ID: ``} {
				got, err := s.Get(ctx, id)
				if err != nil || string(got.Result) != want {
					t.Fatalf("%s: %v result %q, want %q", id, err, got.Result, want)
				}
			}
			if got, _ := s.Get(ctx, with.ID); got.Status.String() != "done" {
				t.Fatalf("with a result: %s", got.Status)
			}
		})
	}
}
