package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

func TestLiteClass(t *testing.T) {
	for n := 1; n <= liteMaxRows; n++ {
		c := liteClass(n)
		if c < n || c&(c-1) != 0 || (c > 1 && c/2 >= n) {
			t.Fatalf("class of %d rows is %d: want the next power of two", n, c)
		}
	}
}

// liteTwin is the same store twice: fast on SQLite's prepared Start and
// Finish, generic with them off (the statements every engine runs,
// RETURNING included). Both are given the same tasks and calls; their
// answers and rows must match but for the time of the writes.
type liteTwin struct{ fast, generic *Store }

func newLiteTwin(t *testing.T) liteTwin {
	fast := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 2), 4, 2)
	generic := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 2), 4, 2)
	generic.liteOps = nil
	return liteTwin{fast, generic}
}

// dump is every row of s by ID, its times of writes replaced by whether
// it was written within [from, to] (the Unix epoch) or before (zero).
func dump(t *testing.T, s *Store, from, to time.Time) map[string]task.Task {
	t.Helper()
	out := map[string]task.Task{}
	for db := range s.w {
		for _, tn := range s.names {
			ts, err := s.queryTasks(context.Background(), s.w[db], `SELECT `+cols+` FROM `+tn)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				if tk.UpdatedAt.After(to) {
					t.Fatalf("task %s updated at %v, after %v", tk.ID, tk.UpdatedAt, to)
				}
				written := !tk.UpdatedAt.Before(from.Truncate(time.Microsecond))
				tk.UpdatedAt, tk.CreatedAt = time.Time{}, time.Time{}
				if written {
					tk.UpdatedAt = time.Unix(0, 0)
				}
				out[tk.ID] = *tk
			}
		}
	}
	return out
}

func (tw liteTwin) insert(t *testing.T, tasks []store.NewTask) {
	t.Helper()
	for _, s := range []*Store{tw.fast, tw.generic} {
		if _, err := s.Insert(context.Background(), tasks); err != nil {
			t.Fatal(err)
		}
	}
}

// same checks both stores hold the same rows, written since from.
func (tw liteTwin) same(t *testing.T, from time.Time, what string) {
	t.Helper()
	to := time.Now()
	a, b := dump(t, tw.fast, from, to), dump(t, tw.generic, from, to)
	if len(a) != len(b) {
		t.Fatalf("%s: %d rows fast, %d generic", what, len(a), len(b))
	}
	for id, ra := range a {
		rb := b[id]
		if fmt.Sprint(ra) != fmt.Sprint(rb) {
			t.Fatalf("%s: task %s:\nfast    %+v\ngeneric %+v", what, id, ra, rb)
		}
	}
}

func startedIDs(ts []*task.Task) []string {
	var out []string
	for _, tk := range ts {
		out = append(out, tk.ID)
	}
	slices.Sort(out)
	return out
}

// Start and Finish of every row class and the sizes between them, over
// two databases of 4 tables: refs under the token of their claim, under a
// token that no longer holds (claimed again since), of tasks pending or
// already running, repeated, of IDs that exist nowhere; then every kind
// of outcome, under tokens that hold and ones that do not. The prepared
// path answers and writes exactly what the generic statements do.
func TestLiteStartFinishLikeGeneric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tw := newLiteTwin(t)
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	lease := due.Add(time.Hour)
	longErr := strings.Repeat("é€x", 2000) // cut on a character boundary
	for _, n := range []int{1, 2, 3, 5, 8, 9, 16, 17, 31, 33, 64, 65, 100, 130, 300, 1200} {
		tokA, tokB, tokOld := int64(1000+n), int64(2000+n), int64(3000+n)
		var tasks []store.NewTask
		var refs []store.Ref
		for i := range n {
			nt := newTask(t, "", due, 2)
			ref := store.Ref{ID: nt.ID, Topic: nt.Topic, DueAt: due, Token: tokA}
			switch i % 7 {
			case 1, 4:
				ref.Token = tokB
			case 5:
				ref.Token = tokOld // the claim moved on: tokA holds
			}
			if i%11 != 10 { // the rest stay pending
				tok := ref.Token
				if tok == tokOld {
					tok = tokA
				}
				nt.Claim = &store.Lease{Owner: "n1", Until: lease, Token: tok}
			}
			tasks = append(tasks, nt)
			refs = append(refs, ref)
		}
		tw.insert(t, tasks)
		// A repeated ref and one of an ID no table holds.
		refs = append(refs, refs[0], store.Ref{ID: newTask(t, "", due, 2).ID, Token: tokA})
		from := time.Now()
		var started [2][]*task.Task
		for j, s := range []*Store{tw.fast, tw.generic} {
			ts, err := s.Start(ctx, refs, lease)
			if err != nil {
				t.Fatalf("n=%d: start: %v", n, err)
			}
			started[j] = ts
		}
		if a, b := startedIDs(started[0]), startedIDs(started[1]); !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("n=%d: started %v fast, %v generic", n, a, b)
		}
		for _, tk := range started[0] {
			if tk.Status != task.StatusRunning || tk.Attempts != 1 || !tk.LeaseUntil.Equal(lease) || tk.UpdatedAt.Before(from.Truncate(time.Microsecond)) {
				t.Fatalf("n=%d: started task %+v", n, tk)
			}
		}
		tw.same(t, from, fmt.Sprintf("n=%d start", n))
		// Started again: none are claimed any more.
		if ts, err := tw.fast.Start(ctx, refs, lease); err != nil || len(ts) != 0 {
			t.Fatalf("n=%d: second start: %d tasks, %v", n, len(ts), err)
		}

		var outs []store.Outcome
		for i, r := range refs {
			o := store.Outcome{Ref: r}
			switch i % 9 {
			case 0, 3:
				o.Done = true
			case 1:
				o.Dead, o.Error = true, longErr
			case 2:
				o.Cancelled, o.Error = true, "cancelled"
			case 4:
				o.RetryAt, o.Error = due.Add(time.Minute), longErr
			case 5:
				o.RetryAt, o.Error, o.NotAttempted = due.Add(time.Minute), "breaker open", true
			case 6:
				o.RetryAt, o.Error = due.Add(time.Second), "soon"
				o.Claim = &store.Lease{Owner: "n1", Until: lease.Add(time.Minute), Token: tokA + 7}
			case 7:
				o.Done = true
				o.Token = tokOld // no longer holds: nothing changes
			default:
				o.RetryAt, o.Error = due.Add(time.Minute), longErr
			}
			outs = append(outs, o)
		}
		from = time.Now()
		for _, s := range []*Store{tw.fast, tw.generic} {
			if err := s.Finish(ctx, outs); err != nil {
				t.Fatalf("n=%d: finish: %v", n, err)
			}
		}
		tw.same(t, from, fmt.Sprintf("n=%d finish", n))
	}
	// Every row of the last round ended in a state and error as asked.
	rows := dump(t, tw.fast, time.Time{}, time.Now())
	dead := 0
	for _, r := range rows {
		if !utf8.ValidString(r.LastError) || len(r.LastError) > len(longErr) {
			t.Fatalf("task %s: last error %q", r.ID, r.LastError)
		}
		if r.Status == task.StatusDead {
			dead++
			if r.LastError != store.ErrorText(longErr) || r.LastError == longErr {
				t.Fatalf("dead task %s: last error not cut to the limit: %d bytes", r.ID, len(r.LastError))
			}
		}
	}
	if dead == 0 {
		t.Fatal("no task died")
	}
	// Statements of every row class were prepared, and no others.
	classes := map[liteOp][]int{}
	tw.fast.liteOps.ops.mu.Lock()
	for k := range tw.fast.liteOps.ops.m {
		if !slices.Contains(classes[k.op], k.class) {
			classes[k.op] = append(classes[k.op], k.class)
		}
	}
	tw.fast.liteOps.ops.mu.Unlock()
	for op, want := range map[liteOp][]int{liteOpStart: {1, 2, 4, 8, 16, 32, 64}, liteOpDone: {1, 2, 4, 8, 16}, liteOpFail: {1}} {
		got := classes[op]
		slices.Sort(got)
		for _, c := range want {
			if !slices.Contains(got, c) {
				t.Fatalf("op %d: classes %v prepared, want %v among them", op, got, want)
			}
		}
		if op == liteOpFail && !slices.Equal(got, want) {
			t.Fatalf("dead and cancelled rows: classes %v, want one row each", got)
		}
	}
}

// Start and Finish of a closed store fail, and its statements are closed.
func TestLiteStartFinishClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), 2, 2)
	due := time.Now().Add(time.Hour)
	nt := newTask(t, "", due, 2)
	nt.Claim = &store.Lease{Owner: "n1", Until: due.Add(time.Hour), Token: 9}
	if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
		t.Fatal(err)
	}
	ref := store.Ref{ID: nt.ID, Token: 9}
	if ts, err := s.Start(ctx, []store.Ref{ref}, due.Add(time.Hour)); err != nil || len(ts) != 1 {
		t.Fatalf("start: %d tasks, %v", len(ts), err)
	}
	if s.liteOps.len() == 0 {
		t.Fatal("no statement held after a start")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.liteOps.len(); n != 0 {
		t.Fatalf("%d statements left after Close", n)
	}
	if _, err := s.Start(ctx, []store.Ref{ref}, due.Add(time.Hour)); err == nil {
		t.Fatal("start after Close answered no error")
	}
	if err := s.Finish(ctx, []store.Outcome{{Ref: ref, Done: true}}); err == nil {
		t.Fatal("finish after Close answered no error")
	}
	// Calls without a row to write need no statement: nothing to fail.
	if ts, err := s.Start(ctx, nil, due); err != nil || len(ts) != 0 {
		t.Fatalf("empty start after Close: %d tasks, %v", len(ts), err)
	}
}
