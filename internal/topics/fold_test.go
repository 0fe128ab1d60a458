package topics_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/topics"
)

// foldWatch records what the folds moved.
type foldWatch struct {
	topics.FoldStore
	folded, calls atomic.Int64
}

func (f *foldWatch) FoldCounts(ctx context.Context) (int64, error) {
	n, err := f.FoldStore.FoldCounts(ctx)
	f.folded.Add(n)
	f.calls.Add(1)
	return n, err
}

// The folder moves PostgreSQL's count deltas into the totals while it
// runs, and the counts read the same before and after.
func TestFolderFoldsDeltas(t *testing.T) {
	t.Parallel()
	st := openEngine(t, "postgres", []string{testdb.Postgres(t)})
	ctx := context.Background()
	stagetest.Insert(t, st,
		stagetest.NewTask(t, "f.one", "k1", time.Now().Add(time.Hour)),
		stagetest.NewTask(t, "f.one", "k2", time.Now().Add(time.Hour)),
		stagetest.NewTask(t, "f.two", "k3", time.Now().Add(time.Hour)))
	before, err := st.TopicStats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	w := &foldWatch{FoldStore: st}
	f, err := topics.NewFolder(topics.FolderConfig{Store: w, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); w.folded.Load() == 0 || w.calls.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing folded in a minute (%d folds)", w.calls.Load())
		}
	}
	f.Stop()
	after, err := st.TopicStats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || len(before) != 2 || after[0].Counts[task.StatusPending] != 2 || after[1].Counts[task.StatusPending] != 1 ||
		before[0].Counts[task.StatusPending] != 2 || before[1].Counts[task.StatusPending] != 1 {
		t.Fatalf("before the folds %+v, after %+v", before, after)
	}
	if _, err := topics.NewFolder(topics.FolderConfig{}); err == nil {
		t.Fatal("a Folder without a store")
	}
}
