package task

import (
	"errors"
	"testing"
	"time"
)

// A task without a target takes its topic's default target; without one it
// needs a live handler (Handled), unless it waits for one (AwaitHandler);
// the refusal is ErrNoHandler and ErrInvalid on field "target", judged
// after every other field. A patch's due time is judged without it.
func TestUntargeted(t *testing.T) {
	now := time.Now()
	l := Limits{
		TopicTarget: func(topic string) string { return map[string]string{"dflt": "https://d.example/h"}[topic] },
		Handled:     func(topic string) bool { return topic == "handled" },
	}
	for _, tc := range []struct {
		spec       Spec
		wantTarget string
		wantErr    bool
	}{
		{Spec{Topic: "handled"}, "", false},
		{Spec{Topic: "dflt"}, "https://d.example/h", false},
		{Spec{Topic: "dflt", Target: "https://own.example/h"}, "https://own.example/h", false},
		{Spec{Topic: "nobody", Target: "https://own.example/h"}, "https://own.example/h", false},
		{Spec{Topic: "nobody", AwaitHandler: true}, "", false},
		{Spec{Topic: "nobody"}, "", true},
	} {
		v, err := Validate(tc.spec, l, now)
		if tc.wantErr {
			var fe *FieldError
			if !errors.Is(err, ErrNoHandler) || !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != "target" {
				t.Errorf("%+v: %v; want ErrNoHandler on target", tc.spec, err)
			}
			continue
		}
		if err != nil || v.Target != tc.wantTarget {
			t.Errorf("%+v: target %q, %v; want %q", tc.spec, v.Target, err, tc.wantTarget)
		}
	}
	if _, err := Validate(Spec{Topic: "nobody", MaxAttempts: -1}, l, now); err == nil || err.(*FieldError).Field != "max_attempts" {
		t.Errorf("another bad field first: %v", err)
	}
	d := time.Hour
	if _, err := ValidatePatch(PatchSpec{Delay: &d}, l, now); err != nil {
		t.Errorf("a patch of the due time: %v", err)
	}
}
