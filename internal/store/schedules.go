package store

import (
	"bytes"
	"errors"
	"time"
)

// The schedules' records: one row per schedule in the first database
// (sqlstore's ontime_schedules). The schedule stage (internal/schedule)
// judges definitions and turns them into tasks; the store only keeps them.

var (
	// ErrScheduleNotFound: no schedule has this name.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrScheduleExists: a schedule with this name exists (create only).
	ErrScheduleExists = errors.New("schedule exists")
)

// Misfire is what happens to missed fire times: older than the misfire
// threshold with their tasks not made yet (every node down), or made ahead
// and not started yet (every node down after, or delivery that far
// behind).
type Misfire string

const (
	// MisfireSkip delivers none of the missed fire times: the schedule goes
	// on with the next future one.
	MisfireSkip Misfire = "skip"
	// MisfireFireOnce delivers one task for all the missed fire times
	// together (the last one's, made ahead or made due at once), then goes
	// on.
	MisfireFireOnce Misfire = "fire_once"
)

// ScheduleDef is a schedule as users write it (API body, config entry);
// schedule.Validate judges it.
type ScheduleDef struct {
	Name     string
	Cron     string // 5 fields, 6 with seconds first, @every D, @hourly …
	TimeZone string // IANA name; "" means UTC (Validate writes "UTC")
	Task     ScheduleTask
	Misfire  Misfire // "" means skip (Validate writes it)
	Paused   bool
}

// ScheduleTask is the task each fire time becomes.
type ScheduleTask struct {
	Topic       string
	Payload     []byte // a JSON value; empty means null (Validate writes it)
	Target      string // webhook URL, or "" for the topic's Go handler
	MaxAttempts int    // 0: the configured default when the task is made
}

// Equal reports whether d and o define the same schedule.
func (d ScheduleDef) Equal(o ScheduleDef) bool {
	return d.Name == o.Name && d.Cron == o.Cron && d.TimeZone == o.TimeZone && d.Misfire == o.Misfire && d.Paused == o.Paused &&
		d.Task.Topic == o.Task.Topic && bytes.Equal(d.Task.Payload, o.Task.Payload) && d.Task.Target == o.Task.Target &&
		d.Task.MaxAttempts == o.Task.MaxAttempts
}

// ScheduleProgress is how far a schedule's fire times have been turned
// into tasks.
type ScheduleProgress struct {
	// Cursor: every fire time up to this instant has been made into a
	// task or passed over by the misfire policy; the next round starts
	// strictly after it. Only a compare-and-set moves it, so two nodes
	// never both make the same fire times.
	Cursor time.Time
	// Applied is the Version the tasks after the cursor's start were made
	// under. When it differs from the record's Version, the definition
	// changed (or was paused) since: the owner withdraws the tasks not yet
	// due before it makes more.
	Applied int64
	// MadeTopic is the topic those tasks carry, so they can be found after
	// the definition's topic changed.
	MadeTopic string
}

// Schedule is a stored schedule.
type Schedule struct {
	ScheduleDef
	// Version changes (a fresh random token, never reused) on every change
	// of the definition or of its paused state.
	Version int64
	ScheduleProgress
	CreatedAt time.Time
	UpdatedAt time.Time
}
