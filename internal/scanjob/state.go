package scanjob

import (
	"context"
	"errors"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// State is where jobs keep what must survive a node: per item the fence
// token of its current holder, the cursor of an unfinished run and the
// last fire time; per job the paused flag and the trigger requests; and
// the runs (the store's JobFlags, JobItem and JobRun records).
// *sqlstore.Store implements it in the task store's first database (schema
// versions 6 and 9).
type State interface {
	// JobFlags reads every job's paused flag and trigger sequence.
	JobFlags(ctx context.Context) (map[string]store.JobFlags, error)
	// SetPaused pauses or resumes a job, cluster wide.
	SetPaused(ctx context.Context, job string, paused bool) error
	// RequestTrigger raises the job's trigger sequence: every node runs
	// the items it owns once.
	RequestTrigger(ctx context.Context, job string) error
	// TakeItem makes node the item's holder under token, whoever held it,
	// and returns the item's state as it was. A run of another node still
	// marked running is marked lost, ended at now.
	TakeItem(ctx context.Context, job, item, node string, token int64, now time.Time) (store.JobItem, error)
	// StartRun records r as the item's current run (cursor, last fire)
	// and inserts it, if token still holds the item.
	StartRun(ctx context.Context, r *store.JobRun, token int64) (held bool, err error)
	// SaveRun writes r's counts, cursor, status and end, and the item's
	// cursor, if token still holds the item. finished clears the item's
	// current run (nothing to resume); otherwise a later holder resumes
	// from the cursor.
	SaveRun(ctx context.Context, r *store.JobRun, token int64, finished bool) (held bool, err error)
	// JobItems lists the job's item states by item.
	JobItems(ctx context.Context, job string) ([]store.JobItem, error)
	// Runs lists the job's latest runs, newest first; item "" for all.
	Runs(ctx context.Context, job, item string, limit int) ([]store.JobRun, error)
	// DeleteRuns deletes runs that ended before cutoff.
	DeleteRuns(ctx context.Context, cutoff time.Time) (int64, error)
}

// ErrLost: another node took the item; the run stopped.
var ErrLost = errors.New("item taken by another node")

// ErrNotFound: no job has this name.
var ErrNotFound = errors.New("no such job")
