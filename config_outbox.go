package ontime

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/outboxrelay"
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/task"
)

// OutboxConfig is one outbox (`outboxes:` in ontime.yaml): tables written
// with the package outbox inside the users' own transactions, relayed by
// the node into tasks. Its items — (database, table, segment) — are owned
// like a scan job's: the coordinator spreads them over live nodes and moves
// a dead node's items (the job "outbox.NAME" in GET /v1/jobs).
type OutboxConfig struct {
	Name      string   `yaml:"name"`      // 1–32 of A-Z a-z 0-9 _ -
	Driver    string   `yaml:"driver"`    // mysql | postgres | sqlite
	Databases []string `yaml:"databases"` // one DSN per database
	Table     string   `yaml:"table"`     // "outbox", or "outbox_{table}" with tables > 1
	Tables    int      `yaml:"tables"`    // per database; default 1
	Segments  int      `yaml:"segments"`  // per table, split by key_shard: a key stays in one; default 1
	IdlePoll  Duration `yaml:"idle_poll"` // the slowest polling when nothing comes; default 1s
	OnRelay   string   `yaml:"on_relay"`  // delete (default) | mark: what becomes of a delivered message's row
	Batch     int      `yaml:"batch"`     // messages per pass; default 500
}

func (o OutboxConfig) relayConfig() outboxrelay.Config {
	return outboxrelay.Config{Name: o.Name, Driver: o.Driver, Databases: o.Databases, Table: o.Table, Tables: o.Tables,
		Segments: o.Segments, IdlePoll: time.Duration(o.IdlePoll), OnRelay: o.OnRelay, Batch: o.Batch}
}

// validateOutboxes checks every outbox; errors name outboxes[i] and the
// key. An outbox's job name must not be a declared job's.
func validateOutboxes(obs []OutboxConfig, jobs []JobConfig) error {
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Name] = true
	}
	for i, o := range obs {
		rc := o.relayConfig()
		if err := rc.Normalize(); err != nil {
			return fmt.Errorf("outboxes[%d].%w", i, err)
		}
		if seen[outboxrelay.JobName(o.Name)] {
			return fmt.Errorf("outboxes[%d].name: %q is declared twice (or a job is named %q)", i, o.Name, outboxrelay.JobName(o.Name))
		}
		seen[outboxrelay.JobName(o.Name)] = true
	}
	return nil
}

// addOutboxes builds a relay per outbox and registers its items as the
// Go job "outbox.NAME": the job service owns, fences and moves them. The
// run of an item loops until the item leaves the node; the cron only
// starts it again after a failed run.
func (n *Node) addOutboxes() error {
	if len(n.cfg.Outboxes) == 0 {
		return nil
	}
	m := metrics.NewOutbox(n.reg)
	for i, oc := range n.cfg.Outboxes {
		r, err := outboxrelay.New(oc.relayConfig(), n.submit, n.log, m)
		if err != nil {
			return fmt.Errorf("outboxes[%d].%w", i, err)
		}
		n.relays = append(n.relays, r)
		err = n.jobs.AddGo(scanjob.GoJob{Name: outboxrelay.JobName(oc.Name), Cron: "@every 1s", Items: r.Items(),
			Concurrency: min(r.Items(), scanjob.MaxConcurrency), LongRunning: true,
			Run: func(ctx context.Context, ir *scanjob.ItemRun) error {
				item, err := strconv.Atoi(ir.Item())
				if err != nil {
					return fmt.Errorf("outbox item %q: %w", ir.Item(), err)
				}
				return r.Run(ctx, item, ir.Stopping, func(ctx context.Context, fetched, processed, failed int) error {
					return ir.Page(ctx, "", fetched, processed, failed, 0)
				})
			}})
		if err != nil {
			return fmt.Errorf("outboxes[%d]: %w", i, err)
		}
	}
	return nil
}

// Outboxes is GET /v1/outboxes: each outbox of the config, its tables read
// now (rows by status, oldest age, held keys, failing rows) and what this
// node relayed of them. The tables are read one after another, each within
// the request's context.
func (n *Node) Outboxes(ctx context.Context) (*apiv1.OutboxList, error) {
	out := &apiv1.OutboxList{Outboxes: make([]apiv1.Outbox, 0, len(n.relays))}
	for _, r := range n.relays {
		out.Outboxes = append(out.Outboxes, r.Status(ctx))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// WakeOutbox makes this node's relay of the outbox pass at once, not at
// its next poll: call it after committing a transaction that wrote to the
// outbox (outbox.Put), for the lowest latency. An unknown name is an
// error; a message is never lost for want of it (the poll finds it).
func (n *Node) WakeOutbox(name string) error {
	for _, r := range n.relays {
		if r.Name() == name {
			r.Wake()
			return nil
		}
	}
	return fmt.Errorf("outbox %q: %w", name, ErrNotFound)
}

// outboxAPI serves the API's outbox needs: GET /v1/outboxes (Node.Outboxes)
// and the outbox message of a task in GET /v1/tasks/{id}.
type outboxAPI struct{ *Node }

// TaskOutbox is the outbox message t was relayed from, when its key names
// one of this node's outboxes and the message's row still names t.
func (a outboxAPI) TaskOutbox(ctx context.Context, t *task.Task) (*apiv1.TaskOutbox, error) {
	_, name, _, _, _, ok := outboxrelay.ParseTaskKey(t.Key)
	if !ok {
		return nil, nil
	}
	for _, r := range a.relays {
		if r.Name() == name {
			return r.TaskOutbox(ctx, t)
		}
	}
	return nil, nil
}
