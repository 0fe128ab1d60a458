package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// fireCall is one delivery of a schedule's task, read from the webhook.
type fireCall struct {
	call
	Key  string
	Fire time.Time // the fire time the key names
}

// fireCalls returns the receiver's deliveries of the schedule name.
func fireCalls(r *receiver, name string) []fireCall {
	var out []fireCall
	for _, c := range r.allCalls() {
		key, _ := c.Body["key"].(string)
		at, ok := strings.CutPrefix(key, name+"@")
		if !ok {
			continue
		}
		fire, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			continue
		}
		out = append(out, fireCall{call: c, Key: key, Fire: fire})
	}
	return out
}

// rawDo sends body to the API and returns the status and the decoded
// error, if any.
func rawDo(t *testing.T, method, url, body string) (int, apiv1.ErrorDetail) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb apiv1.ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil {
			t.Fatalf("%s %s: %d answer is not the error envelope: %s", method, url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, eb.Error
}

// waiting counts the tasks of topic not yet started (pending or claimed).
func waiting(t *testing.T, c apiClient, topic string) int {
	n := 0
	for _, st := range []string{"pending", "claimed"} {
		page, err := c.List(t.Context(), client.ListOptions{Topic: topic, Status: st})
		if err != nil {
			return -1
		}
		n += len(page.Tasks)
	}
	return n
}

// running adds to keys the keys of topic's running tasks: marked running
// ahead of their due time (up to hot.max_fire_lead under load), they are
// delivered whatever happens to their schedule.
func running(t *testing.T, c apiClient, topic string, keys map[string]bool) {
	page, err := c.List(t.Context(), client.ListOptions{Topic: topic, Status: "running"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range page.Tasks {
		keys[tk.Key] = true
	}
}

// TestScheduleAPIValidation: every field of a schedule is checked, the
// answer names it, and nothing is written.
func TestScheduleAPIValidation(t *testing.T) {
	t.Parallel()
	c, node := startNode(t, "sqlite", func(cfg *ontime.Config) { cfg.Delivery.MaxPayloadBytes = 100 })
	srv := httptest.NewServer(node.HTTPHandler()) // a second listener, for raw requests
	t.Cleanup(srv.Close)
	base := srv.URL
	ok := func(extra string) string {
		return `{"name":"s","cron":"@every 1s","task":{"topic":"t"` + extra + `}}`
	}
	big := `"` + strings.Repeat("x", 200) + `"`
	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"POST", "/v1/schedules", `{}`, 400, "name"},
		{"POST", "/v1/schedules", `{"name":"a@b","cron":"@every 1s","task":{"topic":"t"}}`, 400, "name"},
		{"POST", "/v1/schedules", `{"name":"s","task":{"topic":"t"}}`, 400, "cron"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"* * *","task":{"topic":"t"}}`, 400, "cron"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"0 0 30 2 *","task":{"topic":"t"}}`, 400, "cron"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","time_zone":"Nowhere/Land","task":{"topic":"t"}}`, 400, "time_zone"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","misfire":"later","task":{"topic":"t"}}`, 400, "misfire"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s"}`, 400, "task.topic"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","task":{"topic":"a b"}}`, 400, "task.topic"},
		{"POST", "/v1/schedules", ok(`,"payload":` + big), 413, "task.payload"},
		{"POST", "/v1/schedules", ok(`,"target":"ftp://x"`), 400, "task.target"},
		{"POST", "/v1/schedules", ok(`,"max_attempts":-1`), 400, "task.max_attempts"},
		{"POST", "/v1/schedules", ok(`,"max_attempts":"3"`), 400, "task.max_attempts"},
		{"POST", "/v1/schedules", ok(`,"bogus":1`), 400, "task.bogus"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","task":{"topic":"t"},"bogus":1}`, 400, "bogus"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","task":{"topic":"t"},"paused":"yes"}`, 400, "paused"},
		{"POST", "/v1/schedules", `{"name":"s","cron":"@every 1s","task":"t"}`, 400, "task"},
		{"POST", "/v1/schedules", "{\"name\":\"s\",\"cron\":\"@every 1s\",\"task\":{\"topic\":\"t\",\"target\":\"http://h/\xff\"}}", 400, "task.target"},
		{"POST", "/v1/schedules", `{"name":"s",`, 400, ""},
		{"POST", "/v1/schedules", ok("") + `{}`, 400, ""},
		{"PUT", "/v1/schedules/s", `{"name":"other","cron":"@every 1s","task":{"topic":"t"}}`, 400, "name"},
		{"PUT", "/v1/schedules/a%40b", `{"cron":"@every 1s","task":{"topic":"t"}}`, 400, "name"},
		{"GET", "/v1/schedules/missing", "", 404, "name"},
		{"DELETE", "/v1/schedules/missing", "", 404, "name"},
		{"POST", "/v1/schedules/missing:pause", "", 404, "name"},
		{"POST", "/v1/schedules/missing:resume", "", 404, "name"},
		{"POST", "/v1/schedules/missing:trigger", "", 404, "name"},
		{"POST", "/v1/schedules/s:explode", "", 404, ""},
		{"POST", "/v1/schedules/s", "", 404, ""},
		{"GET", "/v1/schedules?limit=3", "", 400, "limit"},
	} {
		status, e := rawDo(t, tc.method, base+tc.path, tc.body)
		if status != tc.status || e.Field != tc.field {
			t.Errorf("%s %s %s: %d %+v, want %d naming %q", tc.method, tc.path, tc.body, status, e, tc.status, tc.field)
		}
	}
	all, err := c.ListSchedules(t.Context())
	if err != nil || len(all) != 0 {
		t.Fatalf("bad requests wrote %d schedules (%v)", len(all), err)
	}
	if _, err := c.CreateSchedule(t.Context(), client.ScheduleRequest{Name: "s", Cron: "@every 1s", Task: client.ScheduleTask{Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSchedule(t.Context(), client.ScheduleRequest{Name: "s", Cron: "@every 2s", Task: client.ScheduleTask{Topic: "t"}})
	if !client.HasCode(err, apiv1.CodeConflict) {
		t.Fatalf("second create: %v, want a conflict", err)
	}
}

// TestScheduleAPILifecycle: create, read, list, replace, fire, pause,
// resume, trigger and delete a schedule through the API, with its tasks
// delivered to a webhook: keyed NAME@<fire time>, due at it, never early.
func TestScheduleAPILifecycle(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			c, _ := startNode(t, engine, nil)
			ctx := t.Context()
			req := client.ScheduleRequest{Name: "tick", Cron: "* * * * * *", TimeZone: "Europe/Berlin",
				Task: client.ScheduleTask{Topic: "e2e.sched", Payload: payload(t, map[string]int{"v": 1}), Target: rcv.srv.URL, MaxAttempts: 2}}
			s, err := c.CreateSchedule(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != "tick" || s.TimeZone != "Europe/Berlin" || s.Misfire != "skip" || s.Paused || s.NextFireAt == nil ||
				s.Task.Target != rcv.srv.URL || s.Task.MaxAttempts != 2 || string(s.Task.Payload) != `{"v":1}` {
				t.Fatalf("created %+v", s)
			}
			if g, err := c.GetSchedule(ctx, "tick"); err != nil || g.Cron != "* * * * * *" {
				t.Fatalf("get: %+v, %v", g, err)
			}
			waitFor(t, 30*time.Second, "five fires", func() bool { return len(fireCalls(rcv, "tick")) >= 5 })

			// Replace the payload (PUT of an existing name: 200).
			req.Task.Payload = payload(t, map[string]int{"v": 2})
			s2, created, err := c.PutSchedule(ctx, "tick", req)
			if err != nil || created || string(s2.Task.Payload) != `{"v":2}` {
				t.Fatalf("put: %+v, %v, %v", s2, created, err)
			}
			waitFor(t, 30*time.Second, "a fire with the new payload", func() bool {
				for _, fc := range fireCalls(rcv, "tick") {
					if p, _ := fc.Body["payload"].(map[string]any); p["v"] == float64(2) {
						return true
					}
				}
				return false
			})
			// PUT of a new name: 201.
			if _, created, err := c.PutSchedule(ctx, "other", client.ScheduleRequest{Cron: "@daily", Task: client.ScheduleTask{Topic: "e2e.sched"}}); err != nil || !created {
				t.Fatalf("put new: %v, created %v", err, created)
			}
			if all, err := c.ListSchedules(ctx); err != nil || len(all) != 2 || all[0].Name != "other" || all[1].Name != "tick" {
				t.Fatalf("list: %+v, %v", all, err)
			}

			p, err := c.PauseSchedule(ctx, "tick")
			if err != nil || !p.Paused || p.NextFireAt != nil {
				t.Fatalf("pause: %+v, %v", p, err)
			}
			// The tasks made ahead are withdrawn (none left waiting).
			waitFor(t, 30*time.Second, "tasks ahead withdrawn", func() bool { return waiting(t, c, "e2e.sched") == 0 })
			pausedAt := time.Now()
			started := map[string]bool{}
			running(t, c, "e2e.sched", started)
			time.Sleep(1500 * time.Millisecond)
			resumedAt := time.Now() // fire times after the call began may fire
			r, err := c.ResumeSchedule(ctx, "tick")
			if err != nil || r.Paused || r.NextFireAt == nil {
				t.Fatalf("resume: %+v, %v", r, err)
			}
			waitFor(t, 30*time.Second, "fires after the resume", func() bool {
				n := 0
				for _, fc := range fireCalls(rcv, "tick") {
					if fc.Fire.After(resumedAt) {
						n++
					}
				}
				return n >= 2
			})
			tk, err := c.TriggerSchedule(ctx, "tick")
			if err != nil || !strings.HasPrefix(tk.Key, "tick+trigger@") || tk.Topic != "e2e.sched" {
				t.Fatalf("trigger: %+v, %v", tk, err)
			}
			waitFor(t, 30*time.Second, "the triggered task delivered", func() bool { return rcv.delivered()[tk.ID] > 0 })

			d, err := c.DeleteSchedule(ctx, "tick")
			if err != nil || d.Name != "tick" {
				t.Fatalf("delete: %+v, %v", d, err)
			}
			if _, err := c.GetSchedule(ctx, "tick"); !client.IsNotFound(err) {
				t.Fatalf("get after delete: %v", err)
			}
			waitFor(t, 30*time.Second, "tasks withdrawn after delete", func() bool { return waiting(t, c, "e2e.sched") == 0 })
			deletedAt := time.Now()
			running(t, c, "e2e.sched", started)

			// Every delivery: the fire time in the key is the due time, never
			// early, one task per fire time; none for the paused period nor
			// after the delete, once the tasks made ahead were seen withdrawn
			// (but for those already running); no old payload after the first
			// new one.
			var firstV2 time.Time
			for _, fc := range fireCalls(rcv, "tick") {
				if p, _ := fc.Body["payload"].(map[string]any); p["v"] == float64(2) && (firstV2.IsZero() || fc.Fire.Before(firstV2)) {
					firstV2 = fc.Fire
				}
			}
			ids := map[string]string{}
			for _, fc := range fireCalls(rcv, "tick") {
				if fc.ID == tk.ID {
					continue
				}
				if fc.DueAt.Before(fc.Fire) { // made ahead: due at it; made late: due when made
					t.Errorf("%s: due %s", fc.Key, fc.DueAt)
				}
				if fc.At.Before(fc.Fire) {
					t.Errorf("%s delivered %s early", fc.Key, fc.Fire.Sub(fc.At))
				}
				if prev, ok := ids[fc.Key]; ok && prev != fc.ID {
					t.Errorf("%s: two tasks, %s and %s", fc.Key, prev, fc.ID)
				}
				ids[fc.Key] = fc.ID
				if fc.Fire.After(pausedAt.Add(100*time.Millisecond)) && !fc.Fire.After(resumedAt) && !started[fc.Key] {
					t.Errorf("%s fired while paused (%s..%s)", fc.Key, pausedAt, resumedAt)
				}
				if fc.Fire.After(deletedAt.Add(100*time.Millisecond)) && !started[fc.Key] {
					t.Errorf("%s fired after the delete at %s", fc.Key, deletedAt)
				}
				if p, _ := fc.Body["payload"].(map[string]any); p["v"] == float64(1) && fc.Fire.After(firstV2) {
					t.Errorf("%s fired with the replaced payload", fc.Key)
				}
			}
		})
	}
}

// cancelledOf returns the cancelled tasks of topic.
func cancelledOf(t *testing.T, c apiClient, topic string) []apiv1.Task {
	t.Helper()
	var out []apiv1.Task
	cursor := ""
	for {
		page, err := c.List(t.Context(), client.ListOptions{Topic: topic, Status: "cancelled", Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Tasks...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// TestScheduleMisfireAfterDowntime: a node is stopped past several fire
// times, the first of them made into tasks ahead of time before the stop,
// then started again on the same store. The misfire policy applies to
// every missed fire time alike, made ahead or not: with skip none is
// delivered, with fire_once exactly one, the last; the tasks made ahead
// and passed over end cancelled with the reason. The schedule goes on at
// its next fire time. Every delivery once, never early.
func TestScheduleMisfireAfterDowntime(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	cfg.Hot.Window = ontime.Duration(15 * time.Second)  // lookahead 15s
	cfg.Cluster.LeaseTTL = ontime.Duration(time.Second) // misfire threshold 2s
	cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
	const period, threshold = 6 * time.Second, 2 * time.Second
	for _, m := range []string{"skip", "fire_once"} {
		cfg.Schedules = append(cfg.Schedules, ontime.Schedule{Name: m, Cron: "@every 6s", Misfire: m,
			Task: ontime.ScheduleTask{Topic: "e2e.misfire", Target: rcv.srv.URL}})
	}
	ctx := context.Background()
	_, n1 := runNode(t, cfg)
	waitFor(t, 60*time.Second, "fires before the stop", func() bool {
		return len(fireCalls(rcv, "skip")) >= 2 && len(fireCalls(rcv, "fire_once")) >= 2
	})
	if err := n1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	// The restart: 2.5s after the fire time last, at least 12s after the
	// stop (so at least three fire times passed meanwhile, the first made
	// ahead: at least 7.5s of them were), when it is past the threshold and
	// the next one is 3.5s away: the restarted node starts the overdue
	// tasks well within that.
	last := time.UnixMilli(stoppedAt.Add(18*time.Second).UnixMilli() / period.Milliseconds() * period.Milliseconds())
	restartAt := last.Add(2500 * time.Millisecond)
	time.Sleep(time.Until(restartAt))
	url, _ := runNode(t, cfg)
	c := newAPIClient(t, url)
	waitFor(t, 60*time.Second, "two fires after the restart", func() bool {
		for _, m := range []string{"skip", "fire_once"} {
			n := 0
			for _, fc := range fireCalls(rcv, m) {
				if fc.Fire.After(restartAt) {
					n++
				}
			}
			if n < 2 {
				return false
			}
		}
		return true
	})
	cancelled := cancelledOf(t, c, "e2e.misfire")
	for _, m := range []string{"skip", "fire_once"} {
		seen := map[string]string{}
		var missed []string // delivered for a fire time of the downtime
		next := false
		for _, fc := range fireCalls(rcv, m) {
			if prev, ok := seen[fc.Key]; ok && prev != fc.ID {
				t.Errorf("%s: two tasks for one fire time", fc.Key)
			}
			seen[fc.Key] = fc.ID
			if fc.At.Before(fc.DueAt) || fc.At.Before(fc.Fire) {
				t.Errorf("%s delivered early", fc.Key)
			}
			if fc.Fire.After(stoppedAt) && !fc.Fire.After(restartAt) {
				missed = append(missed, fc.Key)
			}
			next = next || fc.Fire.Equal(last.Add(period))
		}
		var want []string
		if m == "fire_once" {
			want = []string{m + "@" + last.UTC().Format(time.RFC3339Nano)}
		}
		if !slices.Equal(missed, want) {
			t.Errorf("%s: delivered %v for the fire times missed (%s..%s), want %v", m, missed, stoppedAt, restartAt, want)
		}
		if !next {
			t.Errorf("%s: the next fire time after the restart, %s, not delivered", m, last.Add(period))
		}
		// The tasks made ahead and passed over: cancelled, with the reason.
		passed := 0
		for _, tk := range cancelled {
			if strings.HasPrefix(tk.Key, m+"@") {
				passed++
				if !strings.HasPrefix(tk.LastError, "missed: fire time") || !strings.Contains(tk.LastError, "(misfire "+m+")") {
					t.Errorf("%s: cancelled with %q", tk.Key, tk.LastError)
				}
			}
		}
		if passed == 0 {
			t.Errorf("%s: no task made ahead passed over", m)
		}
		t.Logf("%s: %d fires, %d made ahead passed over", m, len(seen), passed)
	}
}

// TestScheduleChangesWithdrawVisibly: a change and the delete of a
// schedule withdraw its tasks made ahead — cancelled with the reason, each
// still answering by its id — and never the task a user triggered, even
// while it waits for a retry.
func TestScheduleChangesWithdrawVisibly(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			rcv.status = func(c call) int { // the triggered task fails
				if k, _ := c.Body["key"].(string); strings.Contains(k, "+trigger@") {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			}
			c, _ := startNode(t, engine, func(cfg *ontime.Config) {
				cfg.Delivery.RetryBase = ontime.Duration(time.Minute)
				cfg.Delivery.RetryMax = ontime.Duration(time.Minute)
			})
			ctx := t.Context()
			const topic = "e2e.withdraw"
			req := client.ScheduleRequest{Name: "nightly", Cron: "@every 1s", Task: client.ScheduleTask{Topic: topic, Target: rcv.srv.URL}}
			if _, err := c.CreateSchedule(ctx, req); err != nil {
				t.Fatal(err)
			}
			tk, err := c.TriggerSchedule(ctx, "nightly")
			if err != nil || !strings.HasPrefix(tk.Key, "nightly+trigger@") {
				t.Fatalf("trigger: %+v, %v", tk, err)
			}
			waitFor(t, 30*time.Second, "the triggered task failed once, its retry a minute away", func() bool {
				g, err := c.Get(ctx, tk.ID)
				return err == nil && g.Status == "pending" && g.Attempts == 1
			})
			reasons := func() map[string]int {
				out := map[string]int{}
				for _, ct := range cancelledOf(t, c, topic) {
					if ct.Key != "" || !strings.HasPrefix(ct.LastError, "withdrawn: ") {
						t.Fatalf("cancelled %+v", ct)
					}
					if got, err := c.Get(ctx, ct.ID); err != nil || got.Status != "cancelled" {
						t.Fatalf("withdrawn task %s by its id: %+v, %v", ct.ID, got, err)
					}
					out[ct.LastError]++
				}
				return out
			}
			req.Task.Payload = payload(t, map[string]int{"v": 2})
			if _, _, err := c.PutSchedule(ctx, "nightly", req); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "tasks withdrawn by the change", func() bool {
				return reasons()["withdrawn: schedule nightly updated"] > 0
			})
			// The new definition's tasks, by their payload: the owner
			// withdraws table by table before it makes them, so a count
			// of waiting tasks could still see old ones not withdrawn yet,
			// and a delete then would find only tasks the change took.
			waitFor(t, 30*time.Second, "tasks made anew", func() bool {
				page, err := c.List(ctx, client.ListOptions{Topic: topic, Status: "pending", Limit: 1000})
				if err != nil {
					return false
				}
				for _, p := range page.Tasks {
					if !strings.HasPrefix(p.Key, "nightly@") || !p.DueAt.After(time.Now().Add(5*time.Second)) {
						continue
					}
					if g, err := c.Get(ctx, p.ID); err == nil && g.Status == "pending" && strings.Contains(string(g.Payload), `"v":2`) {
						return true
					}
				}
				return false
			})
			if _, err := c.DeleteSchedule(ctx, "nightly"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "tasks withdrawn by the delete", func() bool {
				return reasons()["withdrawn: schedule nightly deleted"] > 0
			})
			g, err := c.Get(ctx, tk.ID)
			if err != nil || g.Status != "pending" || g.Key != tk.Key || g.Attempts != 1 {
				t.Fatalf("the triggered task after the change and the delete: %+v, %v", g, err)
			}
		})
	}
}

// TestSchedulesFromConfigAndGoAPI: schedules declared in the config are
// upserted at start (an unchanged one is not rewritten); the Go API
// manages them; their tasks reach a Go handler.
func TestSchedulesFromConfigAndGoAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Schedules = []ontime.Schedule{{Name: "cfg", Cron: "@every 1s", Task: ontime.ScheduleTask{Topic: "e2e.cfg", Payload: []byte(`{"from":"config"}`)}}}
	ctx := context.Background()
	got := make(chan *ontime.Delivery, 100)
	start := func() *ontime.Node {
		n, err := ontime.NewNode(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Handle("e2e.cfg", func(_ context.Context, d *ontime.Delivery) error {
			if time.Now().Before(d.DueAt) {
				t.Errorf("%s delivered early", d.Key)
			}
			select {
			case got <- d:
			default:
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n1 := start()
	first, err := n1.Schedule(ctx, "cfg")
	if err != nil || string(first.Task.Payload) != `{"from":"config"}` || first.TimeZone != "UTC" {
		t.Fatalf("config schedule: %+v, %v", first, err)
	}
	select {
	case d := <-got:
		if !strings.HasPrefix(d.Key, "cfg@") || string(d.Payload) != `{"from":"config"}` {
			t.Fatalf("delivery %+v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery of the config schedule")
	}
	if _, err := n1.PauseSchedule(ctx, "cfg"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n1.PutSchedule(ctx, ontime.Schedule{Name: "api", Cron: "@hourly", Task: ontime.ScheduleTask{Topic: "e2e.cfg"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.CreateSchedule(ctx, ontime.Schedule{Name: "api", Cron: "@hourly", Task: ontime.ScheduleTask{Topic: "e2e.cfg"}}); !errors.Is(err, ontime.ErrScheduleExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := n1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Restart: the config is the source of its schedules, paused included.
	n2 := start()
	defer n2.Stop(ctx)
	again, err := n2.Schedule(ctx, "cfg")
	if err != nil || again.Paused {
		t.Fatalf("after restart: %+v, %v (want the config's definition back)", again, err)
	}
	all, err := n2.Schedules(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("schedules: %d, %v", len(all), err)
	}
	// Unchanged config: not rewritten by a third start.
	if err := n2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	n3 := start()
	defer n3.Stop(ctx)
	third, err := n3.Schedule(ctx, "cfg")
	if err != nil || !third.UpdatedAt.Equal(again.UpdatedAt) {
		t.Fatalf("unchanged config rewrote the schedule: %v → %v (%v)", again.UpdatedAt, third.UpdatedAt, err)
	}
	if _, err := n3.DeleteSchedule(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	if _, err := n3.Schedule(ctx, "api"); !errors.Is(err, ontime.ErrScheduleNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	tk, err := n3.TriggerSchedule(ctx, "cfg")
	if err != nil || !strings.HasPrefix(tk.Key, "cfg+trigger@") {
		t.Fatalf("trigger: %+v, %v", tk, err)
	}
}
