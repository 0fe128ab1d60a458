package scanjob

import (
	"context"
	"errors"
	"time"
)

// State is where jobs keep what must survive a node: per item the fence
// token of its current holder, the cursor of an unfinished run and the
// last fire time; per job the paused flag and the trigger requests; and
// the runs. *sqlstore.Store implements it in the task store's first
// database (schema version 6).
type State interface {
	// JobFlags reads every job's paused flag and trigger sequence.
	JobFlags(ctx context.Context) (map[string]Flags, error)
	// SetPaused pauses or resumes a job, cluster wide.
	SetPaused(ctx context.Context, job string, paused bool) error
	// RequestTrigger raises the job's trigger sequence: every node runs
	// the items it owns once.
	RequestTrigger(ctx context.Context, job string) error
	// TakeItem makes node the item's holder under token, whoever held it,
	// and returns the item's state as it was. A run of another node still
	// marked running is marked lost, ended at now.
	TakeItem(ctx context.Context, job, item, node string, token int64, now time.Time) (ItemState, error)
	// StartRun records r as the item's current run (cursor, last fire)
	// and inserts it, if token still holds the item.
	StartRun(ctx context.Context, r *Run, token int64) (held bool, err error)
	// SaveRun writes r's counts, cursor, status and end, and the item's
	// cursor, if token still holds the item. finished clears the item's
	// current run (nothing to resume); otherwise a later holder resumes
	// from the cursor.
	SaveRun(ctx context.Context, r *Run, token int64, finished bool) (held bool, err error)
	// JobItems lists the job's item states by item.
	JobItems(ctx context.Context, job string) ([]ItemState, error)
	// Runs lists the job's latest runs, newest first; item "" for all.
	Runs(ctx context.Context, job, item string, limit int) ([]Run, error)
	// DeleteRuns deletes runs that ended before cutoff.
	DeleteRuns(ctx context.Context, cutoff time.Time) (int64, error)
}

// Flags are a job's cluster-wide switches.
type Flags struct {
	Paused     bool
	TriggerSeq int64
}

// ItemState is an item's persisted state.
type ItemState struct {
	Job, Item string
	Owner     string // the node that last took it
	Token     int64
	RunID     string // the unfinished run, "" when none
	Cursor    string // its cursor (encoded key), "" from the start
	LastFire  time.Time
}

// Run is one run of one item.
type Run struct {
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Item      string    `json:"item"`
	Node      string    `json:"node"`
	Trigger   string    `json:"trigger"` // cron | manual | misfire | resume
	FireAt    time.Time `json:"fire_at"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Fetched   int64     `json:"rows_fetched"`
	Processed int64     `json:"rows_processed"`
	Failed    int64     `json:"rows_failed"`
	Left      int64     `json:"rows_left"` // failed max_attempts times: no longer fetched
	Cursor    string    `json:"cursor,omitempty"`
	Status    string    `json:"status"` // running | done | failed | moved | paused | lost
	Error     string    `json:"error,omitempty"`
}

// Run statuses.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusMoved   = "moved"  // the item went to another node; it resumes there
	StatusPaused  = "paused" // the job was paused; it resumes on :resume's next trigger
	StatusLost    = "lost"   // its node died; another node took the item
)

// ErrLost: another node took the item; the run stopped.
var ErrLost = errors.New("item taken by another node")

// ErrNotFound: no job has this name.
var ErrNotFound = errors.New("no such job")
