package ontime_test

import (
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
)

// TestConfigSchedules: schedules: in ontime.yaml, with a payload written as
// YAML; each bad value stops the start with the key named.
func TestConfigSchedules(t *testing.T) {
	t.Parallel()
	parse := func(y string) (ontime.Config, error) {
		c := ontime.DefaultConfig()
		if err := ontime.ParseConfig([]byte(y), &c); err != nil {
			return c, err
		}
		c.Store.Databases = []string{"x.db"}
		return c, c.Validate()
	}
	c, err := parse(`
schedules:
  - name: nightly
    cron: "0 2 * * *"
    time_zone: Europe/Berlin
    misfire: fire_once
    task:
      topic: report.nightly
      target: https://reports.example/run
      payload: {kind: daily, days: [1, 2]}
      max_attempts: 5
  - name: beat
    cron: "@every 10s"
    paused: true
    task: {topic: beat}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Schedules) != 2 {
		t.Fatalf("%d schedules", len(c.Schedules))
	}
	n := c.Schedules[0]
	if n.Name != "nightly" || n.Cron != "0 2 * * *" || n.TimeZone != "Europe/Berlin" || n.Misfire != ontime.MisfireFireOnce ||
		n.Task.Topic != "report.nightly" || n.Task.Target != "https://reports.example/run" || n.Task.MaxAttempts != 5 ||
		string(n.Task.Payload) != `{"days":[1,2],"kind":"daily"}` {
		t.Fatalf("nightly: %+v payload %s", n, n.Task.Payload)
	}
	if b := c.Schedules[1]; !b.Paused || b.Task.Payload != nil {
		t.Fatalf("beat: %+v", b)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t}, bogus: 1}", "schedules[0].bogus: unknown key"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t, bogus: 1}}", "schedules[0].task: bogus: unknown key"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: [t]}", "schedules[0].task: want a mapping"},
		{"schedules:\n  - {name: a, cron: '* * *', task: {topic: t}}", "schedules[0].cron:"},
		{"schedules:\n  - {name: 'a b', cron: '@every 1s', task: {topic: t}}", "schedules[0].name:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', time_zone: Mars/Base, task: {topic: t}}", "schedules[0].time_zone:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', misfire: often, task: {topic: t}}", "schedules[0].misfire:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t}}\n  - {name: b, cron: '@every 1s', task: {topic: ''}}", "schedules[1].task.topic:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t, target: 'ftp://x'}}", "schedules[0].task.target:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t, max_attempts: 5000}}", "schedules[0].task.max_attempts:"},
		{"schedules:\n  - {name: a, cron: '@every 1s', task: {topic: t}}\n  - {name: a, cron: '@every 2s', task: {topic: t}}", "schedules[1].name:"},
	} {
		_, err := parse(tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n→ %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
