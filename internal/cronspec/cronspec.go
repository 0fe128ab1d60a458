// Package cronspec turns a cron expression and a time zone into the fire
// times of a schedule. Parsing is robfig/cron/v3's; this package adds the
// rules ontime promises on top of it:
//
//   - 5 fields (minute first) or 6 (seconds first), descriptors (@hourly,
//     @daily, …) and @every DURATION;
//   - a time zone per schedule (IANA name; empty means UTC, never the
//     machine's local zone, so a schedule means the same on every node);
//   - daylight saving time: a wall-clock fire time that does not exist (the
//     hour skipped in spring) is skipped, and one that exists twice (the hour
//     repeated in autumn) fires once, at its first occurrence.
//
// @every is a fixed interval in absolute time; time zones and DST do not
// apply to it.
package cronspec

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts 5 or 6 fields and descriptors. Timezone prefixes
// (CRON_TZ=) inside the expression are refused: the zone is its own field.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// MinEvery is the shortest @every interval accepted.
const MinEvery = time.Second

// Spec is a parsed schedule. The zero Spec is not valid; use Parse.
type Spec struct {
	expr  string
	loc   *time.Location
	spec  *cron.SpecSchedule // nil for @every
	every time.Duration
}

// ErrSyntax wraps every parse failure, so callers can tell a bad expression
// from other errors.
var ErrSyntax = errors.New("invalid cron expression")

// Parse reads expr in the IANA time zone tz ("" means UTC).
func Parse(expr, tz string) (Spec, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return Spec{}, fmt.Errorf("%w: empty", ErrSyntax)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Spec{}, fmt.Errorf("%w: put the time zone in time_zone, not in the expression", ErrSyntax)
	}
	loc, err := LoadZone(tz)
	if err != nil {
		return Spec{}, err
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Spec{}, fmt.Errorf("%w: @every wants a duration such as 10s: %q", ErrSyntax, rest)
		}
		if d < MinEvery {
			return Spec{}, fmt.Errorf("%w: @every %s is shorter than %s", ErrSyntax, d, MinEvery)
		}
		if d%time.Second != 0 {
			return Spec{}, fmt.Errorf("%w: @every %s is not a whole number of seconds", ErrSyntax, d)
		}
		return Spec{expr: expr, loc: loc, every: d}, nil
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %s", ErrSyntax, strings.TrimPrefix(err.Error(), "failed to parse "))
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q", ErrSyntax, expr)
	}
	ss.Location = loc
	return Spec{expr: expr, loc: loc, spec: ss}, nil
}

// LoadZone resolves an IANA zone name; "" and "UTC" are UTC. "Local" is
// refused: it would mean a different zone on each node.
func LoadZone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`time zone "Local" differs between nodes: name a zone such as Europe/Berlin`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as Europe/Berlin", tz)
	}
	return loc, nil
}

// String is the expression as given.
func (s Spec) String() string { return s.expr }

// Location is the schedule's time zone.
func (s Spec) Location() *time.Location { return s.loc }

// Every is the interval of an @every schedule, 0 for the others.
func (s Spec) Every() time.Duration { return s.every }

// Next is the first fire time strictly after t, in UTC, or the zero time if
// there is none within five years (an expression such as Feb 30).
func (s Spec) Next(t time.Time) time.Time {
	if s.spec == nil && s.every == 0 {
		return time.Time{}
	}
	if s.every > 0 {
		// Fire times are multiples of the interval since the Unix epoch, so
		// every node and every restart computes the same ones.
		n := t.UTC().Truncate(s.every).Add(s.every)
		return n
	}
	for range 10_000 { // a repeated hour costs a few steps; bound the loop anyway
		n := s.spec.Next(t)
		if n.IsZero() {
			return n
		}
		if !s.repeated(n) {
			return n.UTC()
		}
		t = n
	}
	return time.Time{}
}

// repeated reports whether n's wall-clock time in the schedule's zone
// already occurred at an earlier instant (the second pass through an hour
// that DST repeats). Offsets change by at most a few hours.
func (s Spec) repeated(n time.Time) bool {
	w := n.In(s.loc)
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := n.Add(-back).In(s.loc)
		if e.Hour() == w.Hour() && e.Minute() == w.Minute() && e.Second() == w.Second() && e.Day() == w.Day() {
			return true
		}
	}
	return false
}

// Between returns the fire times in (after, until], at most limit of them.
func (s Spec) Between(after, until time.Time, limit int) []time.Time {
	var out []time.Time
	for t := s.Next(after); !t.IsZero() && !t.After(until) && len(out) < limit; t = s.Next(t) {
		out = append(out, t)
	}
	return out
}
