package task

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func jit(v float64) *float64 { return &v }

// The arithmetic of each kind of policy: fixed, exponential (doubling up
// to max), an explicit schedule (the last entry repeated), and the jitter's
// bounds at the extremes of the random draw.
func TestRetryWait(t *testing.T) {
	node := Retry{Backoff: BackoffExponential, Initial: time.Second, Max: time.Hour, Jitter: DefaultJitter}
	low, high := func() float64 { return 0 }, func() float64 { return 0.999999999 }
	mid := func() float64 { return 0.5 }
	parse := func(s RetrySpec) Retry {
		t.Helper()
		r, err := ParseRetry("retry", s)
		if err != nil {
			t.Fatal(err)
		}
		return r.Fill(node)
	}

	fixed := parse(RetrySpec{Backoff: "fixed", Initial: "30s", Jitter: jit(0)})
	for n := 1; n <= 50; n++ {
		if got := fixed.Wait(n, nil); got != 30*time.Second {
			t.Fatalf("fixed, retry %d: %s", n, got)
		}
	}

	exp := parse(RetrySpec{Initial: "1s", Max: "1m", Jitter: jit(0)})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := exp.Wait(i+1, nil); got != w {
			t.Fatalf("exponential, retry %d: %s; want %s", i+1, got, w)
		}
	}
	if got := exp.Wait(1000, nil); got != time.Minute {
		t.Fatalf("exponential, retry 1000: %s; want the cap", got)
	}

	// Jitter 0.25: every wait within ±25 % of the unjittered one, the
	// extremes reached, the middle draw exact.
	jittered := parse(RetrySpec{Initial: "10s", Max: "1h", Jitter: jit(0.25)})
	for n := 1; n <= 12; n++ {
		w := exp.Wait(1, nil) * 10 * time.Duration(1<<(n-1))
		w = min(w, time.Hour)
		lo, hi := jittered.Wait(n, low), jittered.Wait(n, high)
		if lo != time.Duration(float64(w)*0.75) || hi < time.Duration(float64(w)*1.2499) || hi > time.Duration(float64(w)*1.25) || jittered.Wait(n, mid) != w {
			t.Fatalf("retry %d (unjittered %s): low %s, mid %s, high %s", n, w, lo, jittered.Wait(n, mid), hi)
		}
		for range 100 {
			if d := jittered.Wait(n, nil); d < lo || d > hi {
				t.Fatalf("retry %d: %s outside [%s, %s]", n, d, lo, hi)
			}
		}
	}

	sched := parse(RetrySpec{Schedule: []string{"10s", "1m", "10m", "1h"}, Jitter: jit(0)})
	for n, w := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, time.Hour, time.Hour} {
		if got := sched.Wait(n+1, nil); got != w {
			t.Fatalf("schedule, retry %d: %s; want %s", n+1, got, w)
		}
	}

	// What a policy leaves open is the node's: initial, max, jitter.
	open := parse(RetrySpec{})
	if open.Backoff != BackoffExponential || open.Initial != time.Second || open.Max != time.Hour || open.Jitter != DefaultJitter {
		t.Fatalf("filled: %+v", open)
	}
	if got := parse(RetrySpec{Schedule: []string{"5s"}}).Wait(3, high); got < 5999*time.Millisecond || got > 6*time.Second {
		t.Fatalf("a schedule takes the node's jitter: %s", got)
	}
}

// Bad policies are refused with the field named, every bound checked.
func TestParseRetryErrors(t *testing.T) {
	for _, tc := range []struct {
		in          RetrySpec
		field, want string
	}{
		{RetrySpec{Backoff: "linear"}, "retry.backoff", `"linear" is not exponential or fixed`},
		{RetrySpec{Initial: "soon"}, "retry.initial", `"soon" is not a duration`},
		{RetrySpec{Initial: "0s"}, "retry.initial", "out of range 1ms..24h0m0s"},
		{RetrySpec{Initial: "25h"}, "retry.initial", "out of range"},
		{RetrySpec{Max: "721h"}, "retry.max", "out of range 1ms..720h0m0s"},
		{RetrySpec{Initial: "1m", Max: "10s"}, "retry.max", "is below initial 1m0s"},
		{RetrySpec{Backoff: "fixed", Initial: "1s", Max: "1m"}, "retry.max", "applies to exponential backoff only"},
		{RetrySpec{Jitter: jit(-0.1)}, "retry.jitter", "out of range 0..1"},
		{RetrySpec{Jitter: jit(1.01)}, "retry.jitter", "out of range 0..1"},
		{RetrySpec{Schedule: []string{}}, "retry.schedule", "is empty"},
		{RetrySpec{Schedule: []string{"10s"}, Backoff: "fixed"}, "retry.schedule", "not both"},
		{RetrySpec{Schedule: []string{"10s", ""}}, "retry.schedule[1]", "is empty"},
		{RetrySpec{Schedule: []string{"10s", "-1s"}}, "retry.schedule[1]", "out of range"},
		{RetrySpec{Schedule: strings.Split(strings.Repeat("1s,", 21)[:3*21-1], ",")}, "retry.schedule", "has 21 entries; at most 20"},
	} {
		_, err := ParseRetry("retry", tc.in)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Message, tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v; want %s: …%s…", tc.in, err, tc.field, tc.want)
		}
	}
}

// The stored form reads back as the same policy; "" is none.
func TestRetryEncodeDecode(t *testing.T) {
	for _, s := range []RetrySpec{
		{Backoff: "fixed", Initial: "30s", Jitter: jit(0)},
		{Initial: "1s", Max: "1h"},
		{Schedule: []string{"10s", "1m", "10m", "1h"}, Jitter: jit(0.1)},
		{Schedule: strings.Split(strings.Repeat("720h0m0s,", 20)[:9*20-1], ",")},
	} {
		r, err := ParseRetry("retry", s)
		if err != nil {
			t.Fatal(err)
		}
		enc := r.Encode()
		if len(enc) > 512 {
			t.Fatalf("%+v: stored form is %d bytes; the column holds 512", s, len(enc))
		}
		back, ok, err := DecodeRetry(enc)
		if err != nil || !ok || back.String() != r.String() || back.Jitter != r.Jitter {
			t.Fatalf("%q: %v %v %+v; want %+v", enc, err, ok, back, r)
		}
	}
	if r, ok, err := DecodeRetry(""); ok || err != nil || r.Encode() != "" {
		t.Fatalf("no policy: %+v %v %v", r, ok, err)
	}
	if _, _, err := DecodeRetry(`{"backoff":"zigzag"}`); err == nil {
		t.Fatal("a bad stored policy read back")
	}
}

// A submit's retry is validated with the task and kept in its stored form;
// its errors name the field.
func TestValidateTaskRetry(t *testing.T) {
	v, err := Validate(Spec{Topic: "t", Retry: &RetrySpec{Schedule: []string{"10s", "1m"}}}, Limits{}, time.Now())
	if err != nil || v.Retry != `{"schedule":["10s","1m0s"]}` {
		t.Fatalf("%v %q", err, v.Retry)
	}
	_, err = Validate(Spec{Topic: "t", Retry: &RetrySpec{Max: "1y"}}, Limits{}, time.Now())
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "retry.max" {
		t.Fatalf("%v", err)
	}
	v, err = Validate(Spec{Topic: "t"}, Limits{TopicMaxAttempts: func(string) int { return 7 }}, time.Now())
	if err != nil || v.MaxAttempts != 7 || v.Retry != "" {
		t.Fatalf("the topic's max_attempts: %v %+v", err, v)
	}
	v, _ = Validate(Spec{Topic: "t", MaxAttempts: 3}, Limits{TopicMaxAttempts: func(string) int { return 7 }}, time.Now())
	if v.MaxAttempts != 3 {
		t.Fatalf("the task's own max_attempts: %d", v.MaxAttempts)
	}
}

// BenchmarkValidateMaxAttempts is a submit's validation with the node's
// default max_attempts (before) and with a topic's looked up, as the node
// does (topics.Settings.MaxAttempts: an atomic load and a map read).
func BenchmarkValidateMaxAttempts(b *testing.B) {
	topicMax := map[string]int{"other": 7}
	lookup := func(topic string) int { return topicMax[topic] }
	now := time.Now()
	d := time.Hour
	for _, bc := range []struct {
		name string
		l    Limits
	}{{"node", Limits{}}, {"topic", Limits{TopicMaxAttempts: lookup}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(Spec{Topic: "bench.submit", Delay: &d, Payload: []byte(`{"order":12345}`)}, bc.l, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
