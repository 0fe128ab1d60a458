package task

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// PatchSpec is a change to a task as a user asks for it (PATCH, or a
// submit with if_exists: replace). Nil fields stay as they are.
type PatchSpec struct {
	DueAt       *time.Time
	Delay       *time.Duration
	Payload     []byte // raw JSON; nil: unchanged
	Target      *string
	MaxAttempts *int
	Retry       *RetrySpec // {}: remove the task's own policy
}

// ValidPatch is a PatchSpec that passed validation, its due time resolved.
type ValidPatch struct {
	DueAt       *time.Time
	Payload     []byte
	Target      *string
	MaxAttempts *int
	Retry       *string // the stored form of the new own policy; "": none
}

// Empty reports whether p changes nothing.
func (p ValidPatch) Empty() bool {
	return p.DueAt == nil && p.Payload == nil && p.Target == nil && p.MaxAttempts == nil && p.Retry == nil
}

// ValidatePatch checks p as Validate checks a submit, field by field, and
// resolves the due time against now. A patch that changes nothing is an
// error: it is almost surely a client that lost its fields.
func ValidatePatch(p PatchSpec, l Limits, now time.Time) (ValidPatch, error) {
	l = l.WithDefaults()
	var v ValidPatch
	switch {
	case p.DueAt != nil && p.Delay != nil:
		return v, fieldErr("due_at", "give due_at or delay, not both")
	case p.DueAt != nil, p.Delay != nil:
		// The same rules as a submit's (the due time's only: the target
		// is the patch's own question, Limits.Untargeted the caller's).
		s := Spec{Topic: "x", DueAt: p.DueAt, Delay: p.Delay, AwaitHandler: true}
		sv, err := Validate(s, Limits{MaxPayloadBytes: l.MaxPayloadBytes, DefaultMaxAttempts: l.DefaultMaxAttempts}, now)
		if err != nil {
			return v, err
		}
		v.DueAt = &sv.DueAt
	}
	if p.Payload != nil {
		switch {
		case len(p.Payload) > l.MaxPayloadBytes:
			return v, &FieldError{Field: "payload", TooLarge: true,
				Message: fmt.Sprintf("is %d bytes; at most %d", len(p.Payload), l.MaxPayloadBytes)}
		case !utf8.Valid(p.Payload):
			return v, fieldErr("payload", "is not valid UTF-8")
		case !json.Valid(p.Payload):
			return v, fieldErr("payload", "is not valid JSON")
		}
		v.Payload = p.Payload
	}
	if p.Target != nil {
		if err := ValidateTarget(*p.Target); err != nil {
			return v, err
		}
		v.Target = p.Target
	}
	if p.MaxAttempts != nil {
		if n := *p.MaxAttempts; n < 1 || n > MaxAttemptsLimit {
			return v, fieldErr("max_attempts", "is %d; want 1 to %d", n, MaxAttemptsLimit)
		}
		v.MaxAttempts = p.MaxAttempts
	}
	if p.Retry != nil {
		r, err := EncodeSpec("retry", *p.Retry)
		if err != nil {
			return v, err
		}
		v.Retry = &r
	}
	if v.Empty() {
		return v, fieldErr("", "nothing to change: give any of due_at, delay, payload, target, max_attempts, retry")
	}
	return v, nil
}

// ValidateKey checks a key given to address a task (by-key routes): the
// rules of a submitted key, and not empty.
func ValidateKey(key string) error {
	if key == "" {
		return fieldErr("key", "is required")
	}
	_, err := Validate(Spec{Topic: "x", Key: key}, Limits{}, time.Now())
	return err
}

// AsPatch is the change a submit with if_exists: replace makes to the live
// task of its key: every field of the submit, as validated (its due time,
// payload, target, max_attempts and retry policy replace the task's).
func (v Validated) AsPatch() ValidPatch {
	due, target, maxA, retry := v.DueAt, v.Target, v.MaxAttempts, v.Retry
	return ValidPatch{DueAt: &due, Payload: v.Payload, Target: &target, MaxAttempts: &maxA, Retry: &retry}
}
