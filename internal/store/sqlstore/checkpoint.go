package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"strconv"
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
	// checkpointRestartBytes: a WAL this long gets a RESTART checkpoint,
	// so that the next commit writes the WAL from its start again. PASSIVE copies every frame into the database file but
	// cannot make the writer start over: that needs a moment when no
	// reader holds a snapshot with WAL frames, and under a steady load
	// there is none (a reader starts after each commit). So the WAL only
	// grew — 3.5 GB in 25 s of 16 keyed HTTP clients — and every commit
	// appended to it: the kernel zeroed each new page-cache page it wrote
	// (13 % of the node's CPU under perf), and each page read searched a
	// WAL index of a hash table per 4,096 frames. A RESTART holds the
	// writers back while it copies the frames PASSIVE has not and syncs
	// the database file (10–80 ms measured during a burst), so it is
	// kept rare: at 64 MiB (16,384 pages of 4 KiB) a burst of 50,000 ran
	// three of them and drained 1.1–1.4× slower; at this length a burst
	// of 50,000 runs none, and 16 clients' keyed submits one every 2 s or
	// so.
	checkpointRestartBytes = 256 << 20
	// checkpointRestartWait bounds how long a RESTART waits for readers
	// of older snapshots (SQLite's busy handler) while it holds the write
	// lock; one that gives up is tried again next pass.
	checkpointRestartWait = 20 * time.Millisecond
)

// checkpointer is a background service of the store: Open starts it and
// Close stops it (whoever builds a part stops it).
type checkpointer struct {
	startstop.Base
	db     *sql.DB // a connection of its own, for PASSIVE
	writer *sql.DB // the store's writer pool (one connection), for RESTART
	log    *slog.Logger
	// restartPages: checkpointRestartBytes in the database's pages, or a
	// test's.
	restartPages int
	// restarted: the WAL's length when the last RESTART finished; a WAL
	// still that long has not been written to since (the next commit
	// starts it over), and needs no other.
	restarted int
}

func startCheckpointer(ctx context.Context, db, writer *sql.DB, log *slog.Logger, restartPages int) *checkpointer {
	c := &checkpointer{db: db, writer: writer, log: log, restartPages: restartPages}
	_ = c.Start(ctx)
	return c
}

// Start runs the checkpoints until Stop.
func (c *checkpointer) Start(ctx context.Context) error {
	return c.Go(ctx, func(ctx context.Context) { startstop.Every(ctx, checkpointEvery, c.pass) })
}

// pass checkpoints the WAL, passively, and restarts it when it has grown.
// The RESTART runs on the writer's own connection, in the writers' queue:
// from a connection of its own it must catch the write lock free between
// two transactions by polling (SQLite's busy handler sleeps 1, 2, 5 …
// ms), which a writer that is never idle does not leave it (the WAL grew
// by 80 MB in 3 s of back-to-back batches with every RESTART busy). On the
// writer's connection it takes its turn like a write, and what is left to
// copy is what the last PASSIVE did not: little.
func (c *checkpointer) pass(ctx context.Context) {
	_, pages, _, err := c.checkpoint(ctx, "PASSIVE")
	if err == nil && pages >= c.restartPages && pages != c.restarted {
		err = c.restart(ctx)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("sqlite checkpoint failed; the writer's WAL grows until one succeeds", "err", err)
	}
}

// restart runs a RESTART checkpoint on the writer's connection that
// waits for readers at most checkpointRestartWait; one that could not
// finish in that time (busy) is not an error.
func (c *checkpointer) restart(ctx context.Context) error {
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	setWait := func(ctx context.Context, d time.Duration) error {
		_, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(d.Milliseconds(), 10))
		return err
	}
	if err := setWait(ctx, checkpointRestartWait); err != nil {
		return err
	}
	busy, pages, _, err := walCheckpoint(ctx, conn, "RESTART")
	if err == nil && busy == 0 {
		c.restarted = pages
	}
	if werr := setWait(context.WithoutCancel(ctx), liteBusyTimeout); werr != nil {
		// The connection keeps the short wait: drop it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// checkpoint runs one checkpoint of the given mode on the checkpointer's
// own connection.
func (c *checkpointer) checkpoint(ctx context.Context, mode string) (busy, pages, done int, err error) {
	return walCheckpoint(ctx, c.db, mode)
}

// walCheckpoint runs one checkpoint of the given mode (a constant, never
// user input) on q and returns SQLite's answer: whether it was blocked,
// the WAL's length in pages and how many of them are now in the database
// file.
func walCheckpoint(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, mode string) (busy, pages, done int, err error) {
	err = q.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &pages, &done)
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
