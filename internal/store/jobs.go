package store

import "time"

// The scan jobs' records (sqlstore's ontime_job_flags, ontime_job_items and
// ontime_job_runs, in the first database): what a job keeps across nodes.
// The job stage (internal/scanjob) runs the jobs; the store only keeps this.

// JobFlags are a job's cluster-wide switches.
type JobFlags struct {
	Paused     bool
	TriggerSeq int64
}

// JobItem is one item of a job as stored: who holds it and the run it
// would resume.
type JobItem struct {
	Job, Item string
	Owner     string // the node that last took it
	Token     int64
	RunID     string // the unfinished run, "" when none
	Cursor    string // its cursor (encoded key), "" from the start
	LastFire  time.Time
	// Created is when a node first took the item (its row was made): no
	// fire time before it is the item's, so a node taking an item that
	// never fired runs a fire time missed since then (misfire), and one
	// of a brand-new job none from before it existed. Rows from before
	// schema version 9 hold the time of that migration.
	Created time.Time
}

// JobRun is one run of one item.
type JobRun struct {
	ID        string
	Job       string
	Item      string
	Node      string
	Trigger   string // cron | manual | misfire | resume
	FireAt    time.Time
	StartedAt time.Time
	EndedAt   time.Time // zero while it runs
	Fetched   int64
	Processed int64
	Failed    int64
	Left      int64 // failed max_attempts times: no longer fetched
	Cursor    string
	Status    string // one of the Run* statuses
	Error     string
}

// Run statuses (JobRun.Status). The store writes RunLost itself when a
// node takes an item whose run another node left RunRunning.
const (
	RunRunning = "running"
	RunDone    = "done"
	RunFailed  = "failed"
	RunMoved   = "moved"  // the item went to another node; it resumes there
	RunPaused  = "paused" // the job was paused; it resumes on :resume's next trigger
	RunLost    = "lost"   // its node died; another node took the item
)
