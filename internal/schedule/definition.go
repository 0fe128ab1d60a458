package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/task"
)

var (
	// ErrNotFound: no schedule has this name.
	ErrNotFound = errors.New("schedule not found")
	// ErrExists: a schedule with this name exists (create only).
	ErrExists = errors.New("schedule exists")
)

// Misfire is what happens to fire times that passed while no node made
// their tasks (every node down for longer than the misfire threshold).
type Misfire string

const (
	// MisfireSkip drops the missed fire times: the schedule goes on with the
	// next future one.
	MisfireSkip Misfire = "skip"
	// MisfireFireOnce makes one task, due at once, for all the missed fire
	// times together (keyed by the last of them), then goes on.
	MisfireFireOnce Misfire = "fire_once"
)

// Bounds of a definition's fields.
const (
	MaxNameLen     = 64
	MaxCronLen     = 255
	MaxTimeZoneLen = 64
)

// Definition is a schedule as users write it (API body, config entry).
type Definition struct {
	Name     string
	Cron     string // 5 fields, 6 with seconds first, @every D, @hourly …
	TimeZone string // IANA name; "" means UTC (Validate writes "UTC")
	Task     Template
	Misfire  Misfire // "" means skip (Validate writes it)
	Paused   bool
}

// Template is the task each fire time becomes.
type Template struct {
	Topic       string
	Payload     []byte // a JSON value; empty means null (Validate writes it)
	Target      string // webhook URL, or "" for the topic's Go handler
	MaxAttempts int    // 0: the configured default when the task is made
}

// Equal reports whether d and o define the same schedule.
func (d Definition) Equal(o Definition) bool {
	return d.Name == o.Name && d.Cron == o.Cron && d.TimeZone == o.TimeZone && d.Misfire == o.Misfire && d.Paused == o.Paused &&
		d.Task.Topic == o.Task.Topic && bytes.Equal(d.Task.Payload, o.Task.Payload) && d.Task.Target == o.Task.Target &&
		d.Task.MaxAttempts == o.Task.MaxAttempts
}

// Key is the task key of the fire time at: NAME@<RFC 3339 fire time in
// UTC>. '@' is not allowed in names, so one schedule's keys never begin
// with another's prefix.
func Key(name string, at time.Time) string {
	return name + "@" + at.UTC().Format(time.RFC3339Nano)
}

// KeyRange bounds, as [lo, hi), the keys of every fire time of name: they
// all begin with "NAME@", and 'A' follows '@' in byte order.
func KeyRange(name string) (lo, hi string) { return name + "@", name + "A" }

func fieldErr(field, format string, args ...any) error {
	return &task.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ValidateName checks a schedule name: 1–64 of A-Z a-z 0-9 _ . - (like a
// topic: it goes into task keys and URL paths, where ':' starts a verb).
func ValidateName(name string) error {
	if name == "" {
		return fieldErr("name", "is required")
	}
	if len(name) > MaxNameLen {
		return fieldErr("name", "is %d characters; at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fieldErr("name", "has %q at position %d; allowed are A-Z a-z 0-9 _ . -", c, i)
		}
	}
	return nil
}

// Validate checks every field of d against the task limits l, fills the
// defaults (time zone UTC, misfire skip, payload null) and returns the
// parsed cron expression. Errors are *task.FieldError naming the field as
// the API spells it ("task.topic").
func Validate(d *Definition, l task.Limits, now time.Time) (cronspec.Spec, error) {
	if err := ValidateName(d.Name); err != nil {
		return cronspec.Spec{}, err
	}
	if d.TimeZone == "" {
		d.TimeZone = "UTC"
	}
	if len(d.TimeZone) > MaxTimeZoneLen {
		return cronspec.Spec{}, fieldErr("time_zone", "is %d characters; at most %d", len(d.TimeZone), MaxTimeZoneLen)
	}
	if _, err := cronspec.LoadZone(d.TimeZone); err != nil {
		return cronspec.Spec{}, fieldErr("time_zone", "%v", err)
	}
	if d.Cron == "" {
		return cronspec.Spec{}, fieldErr("cron", "is required")
	}
	if len(d.Cron) > MaxCronLen {
		return cronspec.Spec{}, fieldErr("cron", "is %d characters; at most %d", len(d.Cron), MaxCronLen)
	}
	spec, err := cronspec.Parse(d.Cron, d.TimeZone)
	if err != nil {
		return cronspec.Spec{}, fieldErr("cron", "%v", err)
	}
	if spec.Next(now).IsZero() {
		return cronspec.Spec{}, fieldErr("cron", "%q never fires", d.Cron)
	}
	switch d.Misfire {
	case "":
		d.Misfire = MisfireSkip
	case MisfireSkip, MisfireFireOnce:
	default:
		return cronspec.Spec{}, fieldErr("misfire", "%q is not one of skip, fire_once", d.Misfire)
	}
	// The task's fields are judged where every task's are, with the
	// longest key a fire time can have.
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	v, err := task.Validate(task.Spec{Topic: d.Task.Topic, Key: Key(d.Name, far), Payload: d.Task.Payload,
		Target: d.Task.Target, MaxAttempts: d.Task.MaxAttempts}, l, now)
	if err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			return cronspec.Spec{}, &task.FieldError{Field: "task." + fe.Field, Message: fe.Message, TooLarge: fe.TooLarge}
		}
		return cronspec.Spec{}, err
	}
	d.Task.Payload = v.Payload
	return spec, nil
}

// Progress is how far a schedule's fire times have been turned into tasks.
type Progress struct {
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

// Record is a stored schedule.
type Record struct {
	Definition
	// Version changes (a fresh random token, never reused) on every change
	// of the definition or of its paused state.
	Version int64
	Progress
	CreatedAt time.Time
	UpdatedAt time.Time
}
