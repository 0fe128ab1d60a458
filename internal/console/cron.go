package console

import (
	"fmt"
	"strings"
)

// describeCron says a valid cron expression in words, field by field
// ("at minute 0, at hour 9, on Monday–Friday"). It is an aid beside the
// next fire times the form lists, which are the truth (cronspec computes
// them); an expression it cannot put in words is shown as it is.
func describeCron(expr string) string {
	switch expr {
	case "@yearly", "@annually":
		return "once a year, at midnight of January 1"
	case "@monthly":
		return "once a month, at midnight of the first day"
	case "@weekly":
		return "once a week, at midnight between Saturday and Sunday"
	case "@daily", "@midnight":
		return "once a day, at midnight"
	case "@hourly":
		return "once an hour, at minute 0"
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		return "every " + strings.TrimSpace(d)
	}
	f := strings.Fields(expr)
	names := []string{"minute", "hour", "day of the month", "month", "day of the week"}
	if len(f) == 6 {
		names = append([]string{"second"}, names...)
	}
	if len(f) != len(names) {
		return expr
	}
	var parts []string
	// Plain numbers for the time of day read as a clock: "at 09:00".
	clock := f[:len(f)-3]
	if allNumbers(clock) {
		hms := make([]any, len(clock))
		for i := range clock {
			hms[len(clock)-1-i] = atoi(clock[i])
		}
		format := "at %02d:%02d"
		if len(clock) == 3 {
			format = "at %02d:%02d:%02d"
		}
		parts = append(parts, fmt.Sprintf(format, hms...))
		f, names = f[len(clock):], names[len(clock):]
		if f[0] == "*" && f[1] == "*" && f[2] == "*" {
			parts = append(parts, "every day")
		}
	}
	for i, v := range f {
		if p := describeField(v, names[i]); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		if len(f) == 6 {
			return "every second"
		}
		return "every minute"
	}
	return strings.Join(parts, ", ")
}

var (
	monthNames = []string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	dayNames   = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
)

// describeField says one field; "" for a field that does not restrict.
func describeField(v, name string) string {
	if v == "*" || v == "?" {
		return ""
	}
	if step, ok := strings.CutPrefix(v, "*/"); ok {
		return fmt.Sprintf("every %s %ss", step, name)
	}
	var items []string
	for _, part := range strings.Split(v, ",") {
		items = append(items, nameValue(part, name))
	}
	prep := "at"
	switch name {
	case "day of the month", "day of the week":
		prep = "on"
	case "month":
		prep = "in"
	}
	if name == "day of the week" {
		return prep + " " + strings.Join(items, ", ")
	}
	if name == "month" {
		return prep + " " + strings.Join(items, ", ")
	}
	return prep + " " + name + " " + strings.Join(items, ", ")
}

// nameValue turns a field's value, range or step into words, naming
// months and week days.
func nameValue(part, name string) string {
	rng, step, hasStep := strings.Cut(part, "/")
	lo, hi, isRange := strings.Cut(rng, "-")
	n := func(s string) string {
		var i int
		if _, err := fmt.Sscanf(s, "%d", &i); err != nil {
			return s // JAN, MON: already a name
		}
		switch {
		case name == "month" && i >= 1 && i <= 12:
			return monthNames[i]
		case name == "day of the week" && i >= 0 && i <= 7:
			return dayNames[i]
		}
		return s
	}
	out := n(lo)
	if isRange {
		out += "–" + n(hi)
	}
	if hasStep {
		out = "every " + step + " from " + out
	}
	return out
}

func allNumbers(fields []string) bool {
	for _, f := range fields {
		if f == "" || strings.Trim(f, "0123456789") != "" {
			return false
		}
	}
	return true
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
