package apiv1

import "time"

// OutboxList answers GET /v1/outboxes: every outbox of the node's config
// (`outboxes:`), by name.
type OutboxList struct {
	Outboxes []Outbox `json:"outboxes"`
}

// Outbox is one outbox: each of its tables as its database shows it now,
// and what this node relayed of it.
type Outbox struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Tables has one entry per (database, table), in database then table
	// order.
	Tables []OutboxTable `json:"tables"`
}

// OutboxTable is one outbox table. The row counts and held keys are read
// from the table (the same on every node); Relayed, RelayedPerSecond and
// Failures count what this node's relay did with the table's items since
// it started (the cluster's figures are their sum over nodes, as the
// ontime_outbox_messages_total metric is).
type OutboxTable struct {
	// Database is the index of the DSN in the outbox's databases.
	Database int    `json:"database"`
	Table    string `json:"table"`
	// Waiting rows: not relayed yet (or waiting to be tried again).
	Waiting int64 `json:"waiting"`
	// InFlight rows: relayed into a task that has not ended; later
	// messages of their key wait for it.
	InFlight int64 `json:"in_flight"`
	// SetAside rows: malformed, never to become a task (last_error says
	// why); they hold back nothing. Sample lists a few.
	SetAside int64 `json:"set_aside"`
	// OldestAgeSeconds is the age of the oldest waiting or in-flight row;
	// 0 when none.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	// HeldKeys counts keys whose first unfinished message is failing (its
	// task has failed an attempt and waits to retry, or the relay could
	// not make it a task yet): it holds back that key's later messages,
	// and only those. HeldSample lists a few.
	HeldKeys   int64            `json:"held_keys"`
	HeldSample []OutboxRowError `json:"held_sample"`
	// SetAsideSample lists a few set-aside rows, oldest first.
	SetAsideSample []OutboxRowError `json:"set_aside_sample"`
	// Relayed: messages this node made tasks of; RelayedPerSecond: the
	// same over the last minute; Failures: messages it set aside or
	// could not relay yet.
	Relayed          int64   `json:"relayed"`
	RelayedPerSecond float64 `json:"relayed_per_second"`
	Failures         int64   `json:"failures"`
	// Error is set when the table could not be read (the counts are then
	// zero); the other tables are still shown.
	Error string `json:"error,omitempty"`
}

// OutboxRowError is one row of an outbox table that failed: set aside, or
// holding back its key.
type OutboxRowError struct {
	ID        int64     `json:"id"`
	Topic     string    `json:"topic"`
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
	Retries   int64     `json:"retries"`
	Error     string    `json:"error"`
	// TaskID: the task of an in-flight message (its task failed an
	// attempt); absent when the message is not a task yet.
	TaskID string `json:"task_id,omitempty"`
}
