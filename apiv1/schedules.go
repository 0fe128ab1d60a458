package apiv1

import (
	"encoding/json"
	"time"
)

// ScheduleTask is the task each fire time of a schedule becomes.
type ScheduleTask struct {
	Topic       string          `json:"topic"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Target      string          `json:"target,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"` // 0: the node's default
}

// ScheduleRequest is the body of POST /v1/schedules and PUT
// /v1/schedules/{name} (where name may be left out).
type ScheduleRequest struct {
	Name     string       `json:"name,omitempty"`
	Cron     string       `json:"cron"`                // 5 fields, 6 with seconds first, @every 10s, @hourly …
	TimeZone string       `json:"time_zone,omitempty"` // IANA name; default UTC
	Task     ScheduleTask `json:"task"`
	Misfire  string       `json:"misfire,omitempty"` // skip (default) | fire_once
	Paused   bool         `json:"paused,omitempty"`
}

// Schedule is a schedule's view, the answer of the schedule routes.
type Schedule struct {
	Name     string       `json:"name"`
	Cron     string       `json:"cron"`
	TimeZone string       `json:"time_zone"`
	Task     ScheduleTask `json:"task"`
	Misfire  string       `json:"misfire"`
	Paused   bool         `json:"paused"`
	// NextFireAt is the first fire time after now; absent when paused or
	// when the expression never fires again.
	NextFireAt *time.Time `json:"next_fire_at,omitempty"`
	// ScheduledUntil: every fire time up to it has been made into a task
	// (key NAME@<fire time>) or passed over by the misfire policy.
	ScheduledUntil time.Time `json:"scheduled_until"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// ScheduleList answers GET /v1/schedules: every schedule, by name.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}
