package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Bounds of a definition's fields.
const (
	MaxNameLen     = 64
	MaxCronLen     = 255
	MaxTimeZoneLen = 64
)

// Key is the task key of the fire time at: NAME@<RFC 3339 fire time in
// UTC>. '@' is not allowed in names, so one schedule's keys never begin
// with another's prefix.
func Key(name string, at time.Time) string {
	return name + "@" + at.UTC().Format(time.RFC3339Nano)
}

// KeyRange bounds, as [lo, hi), the keys of every fire time of name: they
// all begin with "NAME@", and 'A' follows '@' in byte order.
func KeyRange(name string) (lo, hi string) { return name + "@", name + "A" }

// TriggerKey is the task key of a trigger at: NAME+trigger@<RFC 3339 time
// in UTC>. '+' sorts before '@' and is not allowed in names, so no
// schedule's KeyRange holds it: a change or delete of the schedule never
// withdraws what a user triggered, nor does the misfire policy judge it.
func TriggerKey(name string, at time.Time) string {
	return name + "+trigger@" + at.UTC().Format(time.RFC3339Nano)
}

// ParseKey is Key's inverse: the schedule name and fire time of a fire
// time's key; false for any other key (a trigger's, a user's).
func ParseKey(key string) (name string, at time.Time, ok bool) {
	name, ts, found := strings.Cut(key, "@")
	if !found || ValidateName(name) != nil {
		return "", time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || Key(name, at) != key {
		return "", time.Time{}, false
	}
	return name, at, true
}

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
func Validate(d *store.ScheduleDef, l task.Limits, now time.Time) (cronspec.Spec, error) {
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
		d.Misfire = store.MisfireSkip
	case store.MisfireSkip, store.MisfireFireOnce:
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
