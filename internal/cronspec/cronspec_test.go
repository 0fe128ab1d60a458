package cronspec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, tz string) Spec {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestForms(t *testing.T) {
	from := utc("2026-01-01T10:00:00Z")
	for _, c := range []struct {
		expr, tz string
		want     []string
	}{
		{"*/15 * * * *", "", []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z"}},
		{"*/20 * * * * *", "", []string{"2026-01-01T10:00:20Z", "2026-01-01T10:00:40Z"}},
		{"@hourly", "", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"@daily", "Europe/Berlin", []string{"2026-01-01T23:00:00Z", "2026-01-02T23:00:00Z"}},
		{"@every 90s", "", []string{"2026-01-01T10:01:30Z", "2026-01-01T10:03:00Z"}},
		{"0 9 * * MON-FRI", "Asia/Tokyo", []string{"2026-01-02T00:00:00Z", "2026-01-05T00:00:00Z"}},
	} {
		s := mustParse(t, c.expr, c.tz)
		got := s.Between(from, from.Add(10*24*time.Hour), len(c.want))
		if len(got) != len(c.want) {
			t.Fatalf("%s: got %v", c.expr, got)
		}
		for i, w := range c.want {
			if !got[i].Equal(utc(w)) || got[i].Location() != time.UTC {
				t.Errorf("%s [%s]: fire %d = %s, want %s", c.expr, c.tz, i, got[i], w)
			}
		}
	}
}

// TestEveryIsAnchored: @every fire times do not depend on when Next is
// asked, so every node computes the same ones.
func TestEveryIsAnchored(t *testing.T) {
	s := mustParse(t, "@every 10s", "")
	a := s.Next(utc("2026-01-01T10:00:03Z"))
	b := s.Next(utc("2026-01-01T10:00:07Z"))
	if !a.Equal(b) || !a.Equal(utc("2026-01-01T10:00:10Z")) {
		t.Fatalf("Next = %s and %s, want both 10:00:10", a, b)
	}
	if n := s.Next(a); !n.Equal(utc("2026-01-01T10:00:20Z")) {
		t.Fatalf("Next after a fire time = %s", n)
	}
}

// TestDSTSkippedHour: 02:30 does not exist in New York on 2026-03-08; the
// daily 02:30 fire is skipped that day, not moved to 03:30.
func TestDSTSkippedHour(t *testing.T) {
	s := mustParse(t, "30 2 * * *", "America/New_York")
	got := s.Between(utc("2026-03-07T00:00:00Z"), utc("2026-03-10T00:00:00Z"), 10)
	want := []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"} // EST then EDT
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(utc(want[i])) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestDSTRepeatedHour: 01:30 happens twice in New York on 2026-11-01; it
// fires once, at the first (EDT) occurrence. Hourly and per-minute
// schedules fire once per wall-clock time too.
func TestDSTRepeatedHour(t *testing.T) {
	s := mustParse(t, "30 1 * * *", "America/New_York")
	got := s.Between(utc("2026-10-31T12:00:00Z"), utc("2026-11-02T12:00:00Z"), 10)
	want := []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}
	if len(got) != len(want) || !got[0].Equal(utc(want[0])) || !got[1].Equal(utc(want[1])) {
		t.Fatalf("got %v, want %v", got, want)
	}
	h := mustParse(t, "0 * * * *", "America/New_York")
	fires := h.Between(utc("2026-11-01T03:30:00Z"), utc("2026-11-01T08:30:00Z"), 10)
	// Wall clock 00:00 EDT, 01:00 EDT, (01:00 EST skipped), 02:00 EST, 03:00 EST.
	want = []string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}
	if len(fires) != len(want) {
		t.Fatalf("hourly across fall-back: got %v, want %v", fires, want)
	}
	for i := range want {
		if !fires[i].Equal(utc(want[i])) {
			t.Fatalf("hourly across fall-back: got %v, want %v", fires, want)
		}
	}
}

func TestNoFireTime(t *testing.T) {
	s := mustParse(t, "0 0 30 2 *", "")
	if n := s.Next(utc("2026-01-01T00:00:00Z")); !n.IsZero() {
		t.Fatalf("Feb 30 fires at %s", n)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ expr, tz, want string }{
		{"", "", "empty"},
		{"* * *", "", "invalid cron"},
		{"61 * * * *", "", "invalid cron"},
		{"@every", "", "invalid cron"},
		{"@every 0.5s", "", "shorter"},
		{"@every 1500ms", "", "whole number"},
		{"@every soon", "", "duration"},
		{"CRON_TZ=UTC * * * * *", "", "time_zone"},
		{"* * * * *", "Mars/Olympus", "unknown time zone"},
		{"* * * * *", "Local", "differs between nodes"},
	} {
		_, err := Parse(c.expr, c.tz)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want an error containing %q", c.expr, c.tz, err, c.want)
		}
		if c.tz == "" && !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v does not wrap ErrSyntax", c.expr, err)
		}
	}
}
