package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// SQLite in WAL mode appends commits to the WAL file; a checkpoint copies
// them into the database file. By default the commit that takes the WAL
// past 1,000 pages runs the checkpoint itself, so every few batches a
// submit or a Start pays for copying thousands of pages while holding the
// only write lock. The checkpointer instead checkpoints from a connection
// of its own, on another core, without blocking the writer (PASSIVE): on
// the store benchmark batch inserts went from 32,000 to 45,000 tasks/s.
const (
	checkpointEvery = 100 * time.Millisecond
	// A WAL this long (pages; 4 KiB each) that PASSIVE cannot finish —
	// readers keep old snapshots open — gets a RESTART checkpoint, which
	// waits for them and briefly holds writers back, so the WAL file
	// cannot grow without bound.
	checkpointForcePages = 25000
)

// checkpointer is a background service of the store: Open starts it and
// Close stops it (whoever builds a part stops it).
type checkpointer struct {
	startstop.Base
	db  *sql.DB
	log *slog.Logger
}

func startCheckpointer(ctx context.Context, db *sql.DB, log *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, log: log}
	_ = c.Start(ctx)
	return c
}

// Start runs the checkpoints until Stop.
func (c *checkpointer) Start(ctx context.Context) error {
	return c.Go(ctx, func(ctx context.Context) { startstop.Every(ctx, checkpointEvery, c.pass) })
}

// pass checkpoints the WAL, passively, and restarts it when it has grown.
func (c *checkpointer) pass(ctx context.Context) {
	busy, pages, done, err := c.checkpoint(ctx, "PASSIVE")
	if err == nil && busy == 0 && pages-done >= checkpointForcePages {
		_, _, _, err = c.checkpoint(ctx, "RESTART")
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("sqlite checkpoint failed; the writer's WAL grows until one succeeds", "err", err)
	}
}

// checkpoint runs one checkpoint of the given mode (a constant, never user
// input) and returns SQLite's answer: whether it was blocked, the WAL's
// length in pages and how many of them are now in the database file.
func (c *checkpointer) checkpoint(ctx context.Context, mode string) (busy, pages, done int, err error) {
	err = c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &pages, &done)
	return busy, pages, done, err
}

// close stops the checkpointer, runs a last checkpoint so the WAL is
// folded in on a clean shutdown, and closes its connection.
func (c *checkpointer) close() error {
	c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _, _ = c.checkpoint(ctx, "PASSIVE")
	return c.db.Close()
}
