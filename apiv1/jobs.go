package apiv1

import "time"

// JobView is a scan job: GET /v1/jobs lists them, GET /v1/jobs/{name}
// answers one with its items.
type JobView struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // sql | go
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone,omitempty"`
	Misfire  string `json:"misfire"`
	Overlap  string `json:"overlap"`
	Paused   bool   `json:"paused"`
	Items    int    `json:"items"`
	// NextFire is the job's next cron fire time.
	NextFire time.Time `json:"next_fire,omitzero"`
	// Target is a SQL job's process.target.
	Target string `json:"target,omitempty"`
	// Index is what the job found when it EXPLAINed its fetch (SQL jobs):
	// ok is false, with a warning, when no index serves where + key order.
	Index *JobIndexView `json:"index,omitempty"`
	// State is "ok"; "broken" when the database refuses a statement of
	// the SQL job (a table or column that does not exist, a typo in
	// on_success.set, a value a column refuses): it runs nothing until
	// the statement passes again, checked at a trigger at most every 10
	// s; or "unchecked" when its source did not answer when they were to
	// be checked (it runs nothing until a check passes). Go jobs are "ok".
	State string `json:"state"`
	// Error is a broken job's statement, table and the database's
	// message; an unchecked job's unreachable source.
	Error string `json:"error,omitempty"`
	// BrokenSince is when the job broke.
	BrokenSince time.Time `json:"broken_since,omitzero"`
	// ItemStates is each item with its owner and persisted state (GET /v1/jobs/{name}).
	ItemStates []JobItemView `json:"item_states,omitempty"`
}

// JobIndexView is the index check of a SQL job.
type JobIndexView struct {
	Table   string `json:"table"`
	OK      bool   `json:"ok"`
	Index   string `json:"index,omitempty"`
	Warning string `json:"warning,omitempty"`
	Plan    string `json:"plan,omitempty"`
	// DDL creates the index the fetch needs, on the job's engine (when ok is false).
	DDL string `json:"ddl,omitempty"`
}

// JobItemView is one item's persisted state.
type JobItemView struct {
	Item     string    `json:"item"`
	Holder   string    `json:"holder,omitempty"` // the node that last ran it
	Owner    string    `json:"owner,omitempty"`
	RunID    string    `json:"run_id,omitempty"` // an unfinished run, resumed from cursor
	Cursor   string    `json:"cursor,omitempty"`
	LastFire time.Time `json:"last_fire,omitzero"`
}

// JobList answers GET /v1/jobs.
type JobList struct {
	Jobs []JobView `json:"jobs"`
}

// JobRun is one run of one item of a job.
type JobRun struct {
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Item      string    `json:"item"`
	Node      string    `json:"node"`
	Trigger   string    `json:"trigger"` // cron | manual | misfire | resume
	FireAt    time.Time `json:"fire_at,omitzero"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Fetched   int64     `json:"rows_fetched"`
	Processed int64     `json:"rows_processed"`
	Failed    int64     `json:"rows_failed"`
	Left      int64     `json:"rows_left"`
	Cursor    string    `json:"cursor,omitempty"`
	Status    string    `json:"status"` // running | done | failed | moved | paused | lost
	Error     string    `json:"error,omitempty"`
}

// JobRunList answers GET /v1/jobs/{name}/runs, newest first.
type JobRunList struct {
	Runs []JobRun `json:"runs"`
}
