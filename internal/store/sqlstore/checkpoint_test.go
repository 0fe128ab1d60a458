package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// The writer never checkpoints (wal_autocheckpoint 0), so without the
// checkpointer the WAL would only grow: after a burst of inserts it must be
// folded into the database file in the background, and the writer must
// not have done it, nor truncate the WAL file.
func TestCheckpointerFoldsWALIn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ontime.db")
	s, err := Open(context.Background(), Config{Driver: "sqlite", DSNs: []string{path}, Tables: 4, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	for range 20 {
		if _, err := s.Insert(ctx, batchOf(t, 500, due)); err != nil {
			t.Fatal(err)
		}
	}
	var auto int
	if err := s.w[0].QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("writer wal_autocheckpoint %d, want 0: commits would checkpoint themselves", auto)
	}
	var limit int64
	if err := s.w[0].QueryRowContext(ctx, "PRAGMA journal_size_limit").Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != -1 {
		t.Fatalf("writer journal_size_limit %d, want -1: the commit that restarts the WAL would truncate its file, holding the write lock", limit)
	}
	// Only a checkpoint moves rows from the WAL into the database file;
	// this test runs none itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= 100*4096 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes: the WAL was not checkpointed", fi.Size())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func batchOf(t *testing.T, n int, due time.Time) []store.NewTask {
	out := make([]store.NewTask, n)
	for i := range out {
		out[i] = newTask(t, "", due, 2)
	}
	return out
}

// Under a steady load there is no moment without a reader holding a
// snapshot with WAL frames, so PASSIVE checkpoints copy every frame and
// still the writer can never start the WAL over: without the RESTART the
// file grew by every commit (3.8 GB in 25 s of keyed HTTP submits). With
// writes and reads running together, the WAL file must stay near the
// restart length. Under the race detector the readers are slow enough to
// leave the writer moments to start the WAL over by itself, so the test
// holds there either way; without it, it fails with no RESTART (78 MB).
func TestCheckpointerRestartsAWALThatKeepsGrowing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ontime.db")
	const restartPages = 256 // 1 MiB
	s, err := Open(context.Background(), Config{Driver: "sqlite", DSNs: []string{path}, Tables: 1, Segments: 2, walRestartPages: restartPages})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Readers that never pause: each read takes a snapshot of the WAL as
	// the last commit left it.
	var wg sync.WaitGroup
	for range 4 { // the reader pool's connections
		wg.Go(func() {
			for ctx.Err() == nil {
				var n int
				if err := s.r[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM ontime_counts`).Scan(&n); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	due := time.Now().Add(time.Hour)
	var largest int64
	start := time.Now()
	for written := 0; time.Since(start) < 2*time.Second || written < 20_000; written += 200 {
		if _, err := s.Insert(ctx, batchOf(t, 200, due)); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, fi.Size())
	}
	// What one checkpoint pass (100 ms) of writes adds beyond the
	// restart length, with a margin: the writes here fill the restart
	// length several times over.
	if limit := int64(restartPages * 4096 * 16); largest > limit {
		t.Fatalf("the WAL file reached %d bytes (restart at %d pages, %d bytes): it was not started over", largest, restartPages, restartPages*4096)
	}
	t.Logf("largest WAL file %d bytes", largest)
}
