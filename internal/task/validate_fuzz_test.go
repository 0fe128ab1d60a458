package task

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// validFields are the fields a FieldError of Validate may name.
var validFields = map[string]bool{"topic": true, "key": true, "due_at": true, "delay": true, "payload": true, "target": true, "max_attempts": true}

// FuzzValidate: whatever is submitted, Validate either refuses it with a
// FieldError naming one field, or accepts a task that obeys every rule, is
// never due before what was asked (not by a nanosecond), and validates
// again to itself.
func FuzzValidate(f *testing.F) {
	f.Add("orders.cancel", "order-42", true, int64(30*time.Second), false, int64(0), []byte(`{"order":42}`), "https://shop.example/hook", 3, 1000)
	f.Add("t", "", false, int64(0), true, int64(1500), []byte(nil), "", 0, 1000)
	f.Add("t", "k\x00", false, int64(0), false, int64(0), []byte(`[1,2`), "ftp://x", -1, 10)
	f.Add("a b", "\xff", true, int64(-1), true, int64(-5), []byte(`"x"`), "http://u:p@h/", 1001, 0)
	f.Add("t", strings.Repeat("k", 256), true, int64(1)<<62, false, int64(0), []byte(`null`), "http:///nohost", 25, 4)
	f.Fuzz(func(t *testing.T, topic, key string, hasDue bool, dueOffset int64, hasDelay bool, delay int64, payload []byte, target string, maxAttempts, maxPayload int) {
		now := time.Date(2026, 11, 23, 18, 0, 0, 123456789, time.UTC)
		s := Spec{Topic: topic, Key: key, Payload: payload, Target: target, MaxAttempts: maxAttempts}
		var want time.Time // what was asked for
		if hasDue {
			d := now.Add(time.Duration(dueOffset))
			s.DueAt, want = &d, d
		}
		if hasDelay {
			dl := time.Duration(delay)
			s.Delay, want = &dl, now.Add(dl)
		}
		l := Limits{MaxPayloadBytes: maxPayload % (2 << 20)}
		v, err := Validate(s, l, now)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || !validFields[fe.Field] || fe.Message == "" {
				t.Fatalf("Validate(%+v): %v; want a FieldError naming a field", s, err)
			}
			if !utf8.ValidString(fe.Message) {
				t.Fatalf("message %q is not UTF-8", fe.Message)
			}
			if fe.TooLarge != (fe.Field == "payload" && len(payload) > l.WithDefaults().MaxPayloadBytes) {
				t.Fatalf("TooLarge %v for %v (payload %d bytes)", fe.TooLarge, err, len(payload))
			}
			return
		}
		if hasDue && hasDelay {
			t.Fatal("accepted both due_at and delay")
		}
		if ValidateTopic(v.Topic) != nil || v.Topic != topic {
			t.Fatalf("accepted topic %q", topic)
		}
		if v.Key != key || len(key) > MaxKeyLen || !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("accepted key %q", key)
		}
		if v.DueAt.Nanosecond()%1000 != 0 {
			t.Fatalf("due_at %s keeps more than microseconds", v.DueAt)
		}
		if !want.IsZero() && v.DueAt.Before(want) {
			t.Fatalf("due %s: %s earlier than asked (%s)", v.DueAt, want.Sub(v.DueAt), want)
		}
		// Rounding up to the microsecond may carry a due time at the horizon
		// past it by less than one.
		if v.DueAt.Before(now) || v.DueAt.After(now.Add(MaxHorizon+time.Microsecond)) {
			t.Fatalf("due %s is outside now .. now + horizon", v.DueAt)
		}
		if !json.Valid(v.Payload) || len(v.Payload) > l.WithDefaults().MaxPayloadBytes {
			t.Fatalf("accepted payload %q", v.Payload)
		}
		if ValidateTarget(v.Target) != nil || v.MaxAttempts < 1 || v.MaxAttempts > MaxAttemptsLimit {
			t.Fatalf("accepted %+v", v)
		}
		// What was accepted is accepted again as it is.
		again, err := Validate(Spec{Topic: v.Topic, Key: v.Key, DueAt: &v.DueAt, Payload: v.Payload, Target: v.Target, MaxAttempts: v.MaxAttempts}, l, now)
		if err != nil || !again.DueAt.Equal(v.DueAt) || string(again.Payload) != string(v.Payload) || again.MaxAttempts != v.MaxAttempts {
			t.Fatalf("%+v validates again as %+v, %v", v, again, err)
		}
	})
}

// FuzzParseStatus: a name parses exactly when it is a status's own name.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"pending", "done", "Done", "", "status(9)", "cancelled "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		st, err := ParseStatus(name)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "status" {
				t.Fatalf("ParseStatus(%q): %v", name, err)
			}
			return
		}
		if st.String() != name {
			t.Fatalf("ParseStatus(%q) = %v", name, st)
		}
	})
}
