package ontime

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/store"
)

// Job is a scan job written in Go, ElasticJob style: every fire time of
// Cron, Run is called once for each of the job's Items this node owns
// (the cluster's coordinator spreads items over live nodes, moves a dead
// node's items within cluster.lease_ttl, and never lets two live nodes run
// one item at once). Register it with Node.RegisterJob, on every node.
type Job struct {
	Name     string // 1–64 of A-Z a-z 0-9 _ . -
	Cron     string // 5 or 6 fields, @every 10s, @hourly …
	TimeZone string // IANA; default UTC
	// Misfire: a fire time missed while no node held an item — "fire_once"
	// (default) runs it once when the item is taken again, "skip" waits
	// for the next one.
	Misfire string
	// Overlap: "skip" (the only policy): a trigger while the item still
	// runs does nothing.
	Overlap     string
	Items       int      // sharding items, 0 … Items-1; default 1
	ItemParams  []string // Shard.Param of each item (ElasticJob's sharding-item-parameters)
	Concurrency int      // items one node runs at once; default 8
	// Run processes one item. An error ends the item's run as failed; the
	// next fire time runs it again.
	Run func(ctx context.Context, s Shard) error
}

// Shard is the sharding context of one item's run (ElasticJob's
// ShardingContext).
type Shard struct {
	Item  int    // 0 … Total-1
	Total int    // the job's number of items
	Param string // ItemParams[Item], "" when none
	run   *scanjob.ItemRun
}

// Stopping reports that the run should end after the page at hand: the
// item is moving to another node, the job was paused, or the node stops.
// A run that stops early is resumed by the item's next holder.
func (s Shard) Stopping() bool { return s.run != nil && s.run.Stopping() }

// ErrItemLost is returned by Shard.Report once another node holds the
// item: the run must stop.
var ErrItemLost = scanjob.ErrLost

// Report records a page's counts in the item's run (GET
// /v1/jobs/{name}/runs and the job metrics) and checks the item is still
// this node's: ErrItemLost when it is not.
func (s Shard) Report(ctx context.Context, fetched, processed, failed int) error {
	if s.run == nil {
		return nil
	}
	return s.run.Page(ctx, "", fetched, processed, failed, 0)
}

// Dataflow is a Job's Run made of a fetch and a process step (ElasticJob's
// DataflowJob): Fetch returns a page of the item's data, Process handles
// it. Streaming fetches again after each page until Fetch returns nothing
// (or the run must stop); otherwise one page per trigger.
//
//	node.RegisterJob(ontime.Job{Name: "outbox", Cron: "@every 10s", Items: 4,
//		Run: ontime.Dataflow[Msg]{Fetch: fetch, Process: process, Streaming: true}.Run})
type Dataflow[T any] struct {
	Fetch     func(ctx context.Context, s Shard) ([]T, error)
	Process   func(ctx context.Context, s Shard, data []T) error
	Streaming bool
}

// Run runs the dataflow for one item.
func (d Dataflow[T]) Run(ctx context.Context, s Shard) error {
	if d.Fetch == nil || d.Process == nil {
		return errors.New("ontime: a Dataflow needs Fetch and Process")
	}
	for !s.Stopping() {
		data, err := d.Fetch(ctx, s)
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if len(data) == 0 {
			return nil
		}
		if err := d.Process(ctx, s, data); err != nil {
			_ = s.Report(ctx, len(data), 0, len(data))
			return fmt.Errorf("process: %w", err)
		}
		if err := s.Report(ctx, len(data), len(data), 0); err != nil {
			return err
		}
		if !d.Streaming {
			return nil
		}
	}
	return nil
}

// RegisterJob adds a Go job. Register before Start, on every node of the
// cluster (a node only runs the items of jobs it knows).
func (n *Node) RegisterJob(j Job) error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.started || n.stopDone != nil {
		return errors.New("ontime: register jobs before Start")
	}
	if j.Run == nil {
		return fmt.Errorf("%w: run: a Run function is required", ErrInvalid)
	}
	run := j.Run
	err := n.jobs.AddGo(scanjob.GoJob{Name: j.Name, Cron: j.Cron, TimeZone: j.TimeZone, Misfire: j.Misfire, Overlap: j.Overlap,
		Items: j.Items, ItemParams: j.ItemParams, Concurrency: j.Concurrency,
		Run: func(ctx context.Context, r *scanjob.ItemRun) error {
			i, _ := strconv.Atoi(r.Item())
			return run(ctx, Shard{Item: i, Total: r.Total(), Param: r.Param(), run: r})
		}})
	if err != nil {
		return fmt.Errorf("%w: job %s: %w", ErrInvalid, j.Name, err)
	}
	return nil
}

// jobsAPI is the job service as the HTTP routes see it: GET
// /v1/jobs/{name} shows each item's owner from the coordinator.
type jobsAPI struct{ n *Node }

func (a jobsAPI) List() []scanjob.Info { return a.n.jobs.List() }

func (a jobsAPI) Get(ctx context.Context, name string) (scanjob.Info, error) {
	var owner func(string) string
	if a.n.cluster != nil {
		st, err := a.n.cluster.coord.Status(ctx)
		if err != nil {
			return scanjob.Info{}, err
		}
		owner = func(k string) string { return st.Assignment[k] }
	} else {
		owner = func(string) string { return a.n.cfg.NodeID }
	}
	return a.n.jobs.Get(ctx, name, owner)
}

func (a jobsAPI) Runs(ctx context.Context, name, item string, limit int) ([]store.JobRun, error) {
	return a.n.jobs.Runs(ctx, name, item, limit)
}

func (a jobsAPI) Trigger(ctx context.Context, name string) (scanjob.Info, error) {
	return a.n.jobs.Trigger(ctx, name)
}

func (a jobsAPI) SetPaused(ctx context.Context, name string, paused bool) (scanjob.Info, error) {
	return a.n.jobs.SetPaused(ctx, name, paused)
}
