package sqlstore

import (
	"context"
	"os"
	"path/filepath"
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
