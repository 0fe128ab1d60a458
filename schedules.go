package ontime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/schedule"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Errors of the schedule operations; match with errors.Is.
var (
	ErrScheduleNotFound = store.ErrScheduleNotFound // no schedule has this name
	ErrScheduleExists   = store.ErrScheduleExists   // CreateSchedule of a name in use
)

// Misfire policies: what a schedule does about missed fire times (see
// Schedule.Misfire).
const (
	MisfireSkip     = string(store.MisfireSkip)
	MisfireFireOnce = string(store.MisfireFireOnce)
)

// Schedule is a periodic task: each fire time of Cron, in TimeZone,
// becomes an ordinary task with key NAME@<RFC 3339 fire time> (UTC),
// made ahead of time and delivered like any other, never early. Declared
// under schedules: in the config, or put through the API and the Go API.
type Schedule struct {
	// Name: 1–64 of A-Z a-z 0-9 _ . -
	Name string `yaml:"name"`
	// Cron: 5 fields (minute first), 6 with seconds first, @every 10s,
	// @hourly, @daily …
	Cron string `yaml:"cron"`
	// TimeZone is an IANA name; default UTC. A wall-clock fire time that
	// daylight saving skips does not fire; one it repeats fires once.
	TimeZone string       `yaml:"time_zone"`
	Task     ScheduleTask `yaml:"task"`
	// Misfire is skip (default: go on with the next future fire time) or
	// fire_once (one delivery for all the missed fire times, then go on).
	// A fire time is missed when it is twice cluster.lease_ttl old (the
	// misfire threshold) and no node made its task yet (every node was
	// down), or its task made ahead had not started yet (every node down
	// after it was made, or delivery that far behind): such a task ends
	// cancelled with the reason rather than delivered, but for fire_once's
	// one delivery.
	Misfire string `yaml:"misfire"`
	// Paused: no task is made; the tasks already made and not yet started
	// are withdrawn (cancelled, with the reason as their last error).
	Paused bool `yaml:"paused"`
}

// ScheduleTask is the task each fire time becomes.
type ScheduleTask struct {
	Topic       string
	Payload     json.RawMessage // any JSON value; nil means null
	Target      string          // webhook URL, or "" for the topic's Go handler
	MaxAttempts int             // 0: delivery.max_attempts
}

var scheduleTaskKeys = []string{"topic", "payload", "target", "max_attempts"}

// UnmarshalYAML reads a schedule's task from the config; its payload may
// be any YAML value that has a JSON form.
func (t *ScheduleTask) UnmarshalYAML(n *yaml.Node) error {
	// The config decoder prefixes these errors with the line and the
	// task's key (schedules[0].task).
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping of %s", strings.Join(scheduleTaskKeys, ", "))
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(scheduleTaskKeys, k.Value) {
			return fmt.Errorf("%s: unknown key (known: %s)", k.Value, strings.Join(scheduleTaskKeys, ", "))
		}
	}
	var aux struct {
		Topic       string `yaml:"topic"`
		Payload     any    `yaml:"payload"`
		Target      string `yaml:"target"`
		MaxAttempts int    `yaml:"max_attempts"`
	}
	if err := n.Decode(&aux); err != nil {
		return err
	}
	*t = ScheduleTask{Topic: aux.Topic, Target: aux.Target, MaxAttempts: aux.MaxAttempts}
	if aux.Payload != nil {
		b, err := json.Marshal(aux.Payload)
		if err != nil {
			return fmt.Errorf("payload: has no JSON form: %v", err)
		}
		t.Payload = b
	}
	return nil
}

// MarshalYAML writes the task back with its payload as a YAML value.
func (t ScheduleTask) MarshalYAML() (any, error) {
	var p any
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return nil, err
		}
	}
	return struct {
		Topic       string `yaml:"topic"`
		Payload     any    `yaml:"payload,omitempty"`
		Target      string `yaml:"target,omitempty"`
		MaxAttempts int    `yaml:"max_attempts,omitempty"`
	}{t.Topic, p, t.Target, t.MaxAttempts}, nil
}

func (s Schedule) definition() store.ScheduleDef {
	return store.ScheduleDef{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, Misfire: store.Misfire(s.Misfire), Paused: s.Paused,
		Task: store.ScheduleTask{Topic: s.Task.Topic, Payload: s.Task.Payload, Target: s.Task.Target, MaxAttempts: s.Task.MaxAttempts}}
}

// ScheduleInfo is a stored schedule.
type ScheduleInfo struct {
	Schedule
	// NextFireAt is the first fire time after now; zero when paused or
	// when the expression never fires again.
	NextFireAt time.Time
	// ScheduledUntil: every fire time up to it has been made into a task
	// or passed over by the misfire policy.
	ScheduledUntil time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (n *Node) scheduleInfo(r store.Schedule) *ScheduleInfo {
	return &ScheduleInfo{
		Schedule: Schedule{Name: r.Name, Cron: r.Cron, TimeZone: r.TimeZone, Misfire: string(r.Misfire), Paused: r.Paused,
			Task: ScheduleTask{Topic: r.Task.Topic, Payload: r.Task.Payload, Target: r.Task.Target, MaxAttempts: r.Task.MaxAttempts}},
		NextFireAt: n.sched.NextFire(r), ScheduledUntil: r.Cursor, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// CreateSchedule stores a new schedule; ErrScheduleExists when its name
// is taken. Bad input is a *FieldError naming the field ("task.topic").
func (n *Node) CreateSchedule(ctx context.Context, s Schedule) (*ScheduleInfo, error) {
	r, err := n.sched.Create(ctx, s.definition())
	if err != nil {
		return nil, err
	}
	return n.scheduleInfo(r), nil
}

// PutSchedule creates the schedule or replaces its definition (created
// says which). Fire times already passed are not made again; tasks made
// ahead under the old definition and not yet started are withdrawn and
// made anew.
func (n *Node) PutSchedule(ctx context.Context, s Schedule) (info *ScheduleInfo, created bool, err error) {
	r, created, err := n.sched.Put(ctx, s.definition())
	if err != nil {
		return nil, false, err
	}
	return n.scheduleInfo(r), created, nil
}

// Schedule returns the schedule name.
func (n *Node) Schedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	r, err := n.sched.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return n.scheduleInfo(r), nil
}

// Schedules returns every schedule by name.
func (n *Node) Schedules(ctx context.Context) ([]*ScheduleInfo, error) {
	rs, err := n.sched.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*ScheduleInfo, len(rs))
	for i, r := range rs {
		out[i] = n.scheduleInfo(r)
	}
	return out, nil
}

// DeleteSchedule removes a schedule and withdraws its tasks made ahead and
// not yet started (cancelled, with the reason as their last error; a
// triggered task stays); it returns the schedule as it was.
func (n *Node) DeleteSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	r, err := n.sched.Delete(ctx, name)
	if err != nil {
		return nil, err
	}
	info := n.scheduleInfo(r)
	info.NextFireAt = time.Time{}
	return info, nil
}

// PauseSchedule stops a schedule; its tasks made ahead and not yet started
// are withdrawn.
func (n *Node) PauseSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	r, err := n.sched.Pause(ctx, name)
	if err != nil {
		return nil, err
	}
	return n.scheduleInfo(r), nil
}

// ResumeSchedule restarts a paused schedule from its next fire time after
// now; the fire times of the pause are not owed.
func (n *Node) ResumeSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	r, err := n.sched.Resume(ctx, name)
	if err != nil {
		return nil, err
	}
	return n.scheduleInfo(r), nil
}

// TriggerSchedule makes one task of the schedule now, outside its cron
// (paused schedules too), keyed NAME+trigger@<RFC 3339 now>: no change or
// delete of the schedule withdraws it.
func (n *Node) TriggerSchedule(ctx context.Context, name string) (*Task, error) {
	t, _, err := n.sched.Trigger(ctx, name)
	if err != nil {
		return nil, err
	}
	return viewOf(t), nil
}

// buildSchedules builds the schedule service. A schedule belongs to the
// node owning the sharding item its name hashes to (in a cluster; alone,
// the node owns them all). Fire times are made up to a preheat window
// ahead, and at least three lease TTLs: a round refills the lookahead when
// half of it is left, so at least 1.5 TTLs of tasks are made — longer than
// a killed owner's items take to move — and its successor starts before the
// tasks it made run out.
func (n *Node) buildSchedules() error {
	ttl := time.Duration(n.cfg.Cluster.LeaseTTL)
	cfg := schedule.Config{Store: n.store, Submitter: n.submit, Logger: n.log, Registerer: n.reg,
		Limits:       task.Limits{MaxPayloadBytes: n.cfg.Delivery.MaxPayloadBytes, DefaultMaxAttempts: n.cfg.Delivery.MaxAttempts},
		Lookahead:    max(time.Duration(n.cfg.Hot.Window), 3*ttl),
		MisfireAfter: 2 * ttl,
	}
	if n.cfg.Cluster.Coordinator != "none" {
		for _, it := range n.store.Items() {
			cfg.Items = append(cfg.Items, cluster.ItemKey(it))
		}
	}
	s, err := schedule.New(cfg)
	if err != nil {
		return err
	}
	n.sched = s
	return nil
}

// misfireScreen stands between firing and delivery: the schedule service
// judges the started tasks that are late beyond the misfire threshold
// (schedule.Service.Screen), and those its schedule's misfire policy passes
// over end cancelled with the reason, not delivered.
// pausedTopics is the topics watcher as the fire stage asks it, built
// after the firer (the watcher wakes the scanner, which hands overdue
// tasks to the firer); n.topics is set before the node starts.
type pausedTopics struct{ n *Node }

func (p pausedTopics) Paused(topic string) bool { return p.n.topics.Paused(topic) }

type misfireScreen struct {
	n        *Node // its sched is set before the node starts
	outcomes interface{ Finish(t *task.Task, err error) }
}

func (m misfireScreen) Send(tasks []*task.Task) {
	keep, missed := m.n.sched.Screen(context.Background(), tasks)
	for _, ms := range missed {
		m.outcomes.Finish(ms.Task, deliver.Drop(ms.Reason))
	}
	if len(keep) > 0 {
		m.n.router.Send(keep)
	}
}

// putConfigSchedules upserts the schedules of the config: an unchanged
// one is not written, so nodes starting together do not disturb it.
func (n *Node) putConfigSchedules(ctx context.Context) error {
	for i, s := range n.cfg.Schedules {
		if _, _, err := n.sched.Put(ctx, s.definition()); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return fmt.Errorf("schedules[%d].%s: %s", i, fe.Field, fe.Message)
			}
			return fmt.Errorf("schedules[%d] (%s): %w", i, s.Name, err)
		}
	}
	return nil
}

// validateSchedules checks the config's schedules as the API would, and
// that no name is declared twice.
func (c *Config) validateSchedules() error {
	seen := map[string]int{}
	limits := task.Limits{MaxPayloadBytes: c.Delivery.MaxPayloadBytes, DefaultMaxAttempts: c.Delivery.MaxAttempts}
	for i, s := range c.Schedules {
		d := s.definition()
		if _, err := schedule.Validate(&d, limits, time.Now()); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return fmt.Errorf("schedules[%d].%s: %s", i, fe.Field, fe.Message)
			}
			return fmt.Errorf("schedules[%d]: %w", i, err)
		}
		if j, dup := seen[s.Name]; dup {
			return fmt.Errorf("schedules[%d].name: %q is declared already at schedules[%d]", i, s.Name, j)
		}
		seen[s.Name] = i
	}
	return nil
}
