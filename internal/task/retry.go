package task

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Retry is a retry policy: how long a task waits after a failed attempt
// before the next one. A task may carry its own (stored with it), a topic
// may have one (topics.NAME.retry, PUT /v1/topics/{topic}); without
// either the node's applies (delivery.retry_base, delivery.retry_max,
// exponential with a jitter of 0.2).
//
// Either a backoff — Backoff "exponential" (Initial·2^(n−1), at most Max)
// or "fixed" (Initial every time) — or an explicit Schedule: the n-th
// retry waits Schedule[n−1], the last entry repeated once the list is
// used up (how xxl-job and RocketMQ users write their retries). Jitter
// spreads every wait by ±Jitter of itself, so tasks that failed together
// do not come back together.
//
// A zero Initial or Max, or a negative Jitter, is "not given": the node's
// value applies when the wait is computed (Fill), so a policy stored with a
// task follows a later change of the node's defaults in what it left open.
type Retry struct {
	Backoff  string          // BackoffExponential, BackoffFixed; "" with Schedule
	Initial  time.Duration   // 0: the node's delivery.retry_base
	Max      time.Duration   // exponential's cap; 0: the node's delivery.retry_max
	Jitter   float64         // 0..1; negative: not given (the node's, 0.2)
	Schedule []time.Duration // the waits in order; set only without Backoff
}

// The values of Retry.Backoff.
const (
	BackoffExponential = "exponential"
	BackoffFixed       = "fixed"
)

// Bounds of a retry policy, the config's for delivery.retry_base and
// delivery.retry_max.
const (
	MinRetryWait    = time.Millisecond
	MaxRetryInitial = 24 * time.Hour
	MaxRetryWait    = 30 * 24 * time.Hour
	// MaxRetrySchedule bounds a schedule's entries: 20 of the longest
	// wait ("720h0m0s") keep the stored form within the retry column's
	// VARCHAR(512).
	MaxRetrySchedule = 20
	DefaultJitter    = 0.2
)

// RetrySpec is a retry policy as users write it (JSON or YAML): durations
// as Go durations ("30s", "1h").
type RetrySpec struct {
	Backoff  string   `json:"backoff,omitempty" yaml:"backoff"`
	Initial  string   `json:"initial,omitempty" yaml:"initial"`
	Max      string   `json:"max,omitempty" yaml:"max"`
	Jitter   *float64 `json:"jitter,omitempty" yaml:"jitter"`
	Schedule []string `json:"schedule,omitempty" yaml:"schedule"`
}

// Empty reports whether s gives nothing: no policy of the task's own
// ("retry": {} removes one).
func (s RetrySpec) Empty() bool {
	return s.Backoff == "" && s.Initial == "" && s.Max == "" && s.Jitter == nil && s.Schedule == nil
}

// EncodeSpec validates s as ParseRetry does and returns its stored form:
// "" for an empty s.
func EncodeSpec(field string, s RetrySpec) (string, error) {
	if s.Empty() {
		return "", nil
	}
	r, err := ParseRetry(field, s)
	if err != nil {
		return "", err
	}
	return r.Encode(), nil
}

// ParseRetry validates s; errors are FieldErrors named field + ".backoff"
// and so on (field is "retry" for a task, "topics.NAME.retry" in the
// config).
func ParseRetry(field string, s RetrySpec) (Retry, error) {
	r := Retry{Backoff: s.Backoff, Jitter: -1}
	dur := func(name, v string, lo, hi time.Duration) (time.Duration, error) {
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fieldErr(field+"."+name, "%q is not a duration such as 30s or 1h", v)
		}
		if d < lo || d > hi {
			return 0, fieldErr(field+"."+name, "%s is out of range %s..%s", d, lo, hi)
		}
		return d, nil
	}
	var err error
	if len(s.Schedule) > 0 {
		if s.Backoff != "" || s.Initial != "" || s.Max != "" {
			return Retry{}, fieldErr(field+".schedule", "give a schedule or backoff/initial/max, not both")
		}
		if len(s.Schedule) > MaxRetrySchedule {
			return Retry{}, fieldErr(field+".schedule", "has %d entries; at most %d (the last one repeats)", len(s.Schedule), MaxRetrySchedule)
		}
		r.Schedule = make([]time.Duration, len(s.Schedule))
		for i, v := range s.Schedule {
			name := "schedule[" + strconv.Itoa(i) + "]"
			if v == "" {
				return Retry{}, fieldErr(field+"."+name, "is empty; want a duration such as 10s")
			}
			if r.Schedule[i], err = dur(name, v, MinRetryWait, MaxRetryWait); err != nil {
				return Retry{}, err
			}
		}
	} else if s.Schedule != nil {
		return Retry{}, fieldErr(field+".schedule", "is empty; give at least one wait, such as [10s, 1m]")
	} else {
		switch s.Backoff {
		case "":
			r.Backoff = BackoffExponential
		case BackoffExponential, BackoffFixed:
		default:
			return Retry{}, fieldErr(field+".backoff", "%q is not exponential or fixed", s.Backoff)
		}
		if r.Initial, err = dur("initial", s.Initial, MinRetryWait, MaxRetryInitial); err != nil {
			return Retry{}, err
		}
		if r.Max, err = dur("max", s.Max, MinRetryWait, MaxRetryWait); err != nil {
			return Retry{}, err
		}
		if r.Max > 0 && r.Initial > r.Max {
			return Retry{}, fieldErr(field+".max", "%s is below initial %s", r.Max, r.Initial)
		}
		if r.Backoff == BackoffFixed && r.Max > 0 {
			return Retry{}, fieldErr(field+".max", "applies to exponential backoff only; a fixed backoff waits initial every time")
		}
	}
	if s.Jitter != nil {
		j := *s.Jitter
		if math.IsNaN(j) || j < 0 || j > 1 {
			return Retry{}, fieldErr(field+".jitter", "%v is out of range 0..1 (a fraction of each wait)", j)
		}
		r.Jitter = j
	}
	return r, nil
}

// Spec is r as users write it (the view's form; ParseRetry reads it back).
func (r Retry) Spec() RetrySpec {
	s := RetrySpec{Backoff: r.Backoff}
	if r.Initial > 0 {
		s.Initial = r.Initial.String()
	}
	if r.Max > 0 {
		s.Max = r.Max.String()
	}
	if r.Jitter >= 0 {
		j := r.Jitter
		s.Jitter = &j
	}
	for _, d := range r.Schedule {
		s.Schedule = append(s.Schedule, d.String())
	}
	return s
}

// Encode is r's stored form: the JSON of Spec ("" for the zero Retry, a
// task without a policy of its own).
func (r Retry) Encode() string {
	if r.Backoff == "" && len(r.Schedule) == 0 {
		return ""
	}
	b, _ := json.Marshal(r.Spec()) // strings, a float and a list: cannot fail
	return string(b)
}

// DecodeRetry reads what Encode wrote; "" is no policy (ok false).
func DecodeRetry(s string) (r Retry, ok bool, err error) {
	if s == "" {
		return Retry{}, false, nil
	}
	var spec RetrySpec
	if err := json.Unmarshal([]byte(s), &spec); err != nil {
		return Retry{}, false, fmt.Errorf("stored retry policy %q: %w", s, err)
	}
	r, err = ParseRetry("retry", spec)
	if err != nil {
		return Retry{}, false, fmt.Errorf("stored retry policy %q: %w", s, err)
	}
	return r, true, nil
}

// Fill returns r with what it left open taken from def (the node's
// policy): Initial, Max and Jitter.
func (r Retry) Fill(def Retry) Retry {
	if r.Backoff == "" && len(r.Schedule) == 0 {
		r.Backoff = BackoffExponential
	}
	if r.Initial <= 0 {
		r.Initial = def.Initial
	}
	if r.Max <= 0 {
		r.Max = def.Max
	}
	if r.Jitter < 0 {
		r.Jitter = def.Jitter
	}
	return r
}

// Wait is the wait before the retry that follows attempt (≥ 1: the wait
// after the first attempt failed is Wait(1)), of a filled policy (Fill).
// rnd returns a value in [0, 1); nil uses math/rand/v2. The jittered wait
// lies in [w·(1−Jitter), w·(1+Jitter)] of the unjittered w.
func (r Retry) Wait(attempt int, rnd func() float64) time.Duration {
	attempt = max(attempt, 1)
	var d float64
	switch {
	case len(r.Schedule) > 0:
		d = float64(r.Schedule[min(attempt, len(r.Schedule))-1])
	case r.Backoff == BackoffFixed:
		d = float64(r.Initial)
	default:
		base, maxd := float64(max(r.Initial, MinRetryWait)), float64(max(r.Max, r.Initial, MinRetryWait))
		d = maxd
		if attempt-1 < 62 {
			d = math.Min(base*math.Pow(2, float64(attempt-1)), maxd)
		}
	}
	if j := r.Jitter; j > 0 && j <= 1 {
		if rnd == nil {
			rnd = rand.Float64
		}
		d *= 1 + j*(2*rnd()-1)
	}
	return time.Duration(math.Max(d, 0))
}

// String describes r for people ("exponential 1s..1h ±20%",
// "schedule 10s, 1m, 10m").
func (r Retry) String() string {
	var b strings.Builder
	switch {
	case len(r.Schedule) > 0:
		b.WriteString("schedule ")
		for i, d := range r.Schedule {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.String())
		}
	case r.Backoff == BackoffFixed:
		fmt.Fprintf(&b, "fixed %s", r.Initial)
	default:
		fmt.Fprintf(&b, "exponential %s..%s", r.Initial, r.Max)
	}
	if r.Jitter > 0 {
		fmt.Fprintf(&b, " ±%g%%", math.Round(r.Jitter*1000)/10)
	}
	return b.String()
}
