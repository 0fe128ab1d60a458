package ontime

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/dbcoord"
	"github.com/ontimehq/ontime/internal/cluster/etcdcoord"
	"github.com/ontimehq/ontime/internal/cluster/rediscoord"
	"github.com/ontimehq/ontime/internal/cluster/zkcoord"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// clusterRun is the coordinator of a node in a cluster, one of the node's
// services: started last, stopped first, so that the node hands its items
// to the others before its pipeline stops.
type clusterRun struct {
	coord cluster.Coordinator
}

// newCoordinator builds the configured coordinator (the task database's
// first database, etcd, Redis or ZooKeeper); the node's scanner scans what it assigns.
func (n *Node) newCoordinator(ctx context.Context, st *sqlstore.Store) error {
	var keys []string
	for _, it := range st.Items() {
		keys = append(keys, cluster.ItemKey(it))
	}
	addr := n.cfg.Cluster.Advertise
	if addr == "" {
		addr = n.cfg.Listen
	}
	onAssign := func(term int64, items []string) {
		its := make([]store.Item, 0, len(items))
		for _, k := range items {
			if it, ok := cluster.ParseItemKey(k); ok {
				its = append(its, it)
			}
		}
		n.log.Info("cluster assignment", "term", term, "items", len(its), "job_items", len(items)-len(its))
		n.scan.SetItems(its)
		n.sched.SetOwned(items)
		n.jobs.SetOwned(items) // the scan jobs' items among them
	}
	// Task tables' items only: their claims are atomic, so a brief overlap
	// of old and new owner costs nothing, and a TTL of nobody scanning
	// them would make tasks late after every join.
	atOnce := func(k string) bool { _, ok := cluster.ParseItemKey(k); return ok }
	node := cluster.NodeConfig{NodeID: n.cfg.NodeID, Version: n.version, Addr: addr, TTL: time.Duration(n.cfg.Cluster.LeaseTTL), Items: keys,
		Topics: n.router.Topics, Incarnation: n.inc.ID(), Logger: n.log, OnAssign: onAssign, HandOverAtOnce: atOnce,
		Zone: n.cfg.Cluster.Zone, ItemZone: n.itemZone}
	var c cluster.Coordinator
	switch n.cfg.Cluster.Coordinator {
	case "etcd":
		etcdTLS, err := n.cfg.etcdTLS()
		if err != nil {
			return err
		}
		ec, err := etcdcoord.New(ctx, etcdcoord.Config{Endpoints: n.cfg.Cluster.EtcdEndpoints,
			Username: n.cfg.Cluster.EtcdUsername, Password: n.sec.etcdPassword, TLS: etcdTLS, NodeConfig: node})
		if err != nil {
			return err
		}
		c = ec
	case "redis":
		client, prefix, err := n.redisCoordinatorClient()
		if err != nil {
			return err
		}
		rc, err := rediscoord.New(ctx, rediscoord.Config{ClientConfig: client, Prefix: prefix, NodeConfig: node})
		if err != nil {
			return err
		}
		c = rc
	case "zookeeper":
		zc, err := zkcoord.New(ctx, zkcoord.Config{Servers: n.cfg.Cluster.ZooKeeperServers, Prefix: n.cfg.Cluster.ZooKeeperPrefix,
			Username: n.cfg.Cluster.ZooKeeperUsername, Password: n.sec.zkPassword, NodeConfig: node})
		if err != nil {
			return err
		}
		c = zc
	default:
		// The store made the coordinator's tables when it migrated.
		dc, err := dbcoord.New(dbcoord.Config{Store: st, NodeConfig: node})
		if err != nil {
			return err
		}
		c = dc
	}
	n.cluster = &clusterRun{coord: c}
	return nil
}

// itemZone is a sharding item's zone: its database's — store.zones for
// the task tables' items, jobs[i].source.zones for a configured scan
// job's — and "" for any other item or without zones.
func (n *Node) itemZone(key string) string {
	zones := n.cfg.Store.Zones
	if job, item, ok := scanjob.ParseItemKey(key); ok {
		zones, key = nil, item
		for _, j := range n.cfg.Jobs {
			if j.Name == job {
				zones = j.Source.Zones
			}
		}
	}
	if it, ok := cluster.ParseItemKey(key); ok && it.DB >= 0 && it.DB < len(zones) {
		return zones[it.DB]
	}
	return ""
}

// liveNodes lists the nodes the coordinator sees alive, with when each
// started (this one alone without a cluster): the scanner ends the leases
// of nodes that left, and of restarted nodes' previous processes.
func (n *Node) liveNodes(ctx context.Context) ([]scan.Node, error) {
	if n.cluster == nil {
		return nil, nil
	}
	st, err := n.cluster.coord.Status(ctx)
	if err != nil {
		return nil, err
	}
	var live []scan.Node
	for _, ns := range st.Nodes {
		if ns.Live {
			live = append(live, scan.Node{ID: ns.ID, Started: ns.Started, Incarnation: ns.Incarnation})
		}
	}
	return live, nil
}

// Start joins the cluster and returns at once: the coordinator runs until
// Stop.
func (cr *clusterRun) Start(ctx context.Context) error { return cr.coord.Start(ctx) }

// Stop leaves the cluster — items handed back, leadership resigned — and
// waits for that. Idempotent, safe to call concurrently.
func (cr *clusterRun) Stop() { cr.coord.Stop() }

// Started is closed once the coordinator runs.
func (cr *clusterRun) Started() <-chan struct{} { return cr.coord.Started() }

// The cluster view's types live in apiv1 with the rest of the wire format;
// these names stay for programs written against the root package.
type (
	// ClusterView is apiv1.ClusterView.
	//
	// Deprecated: use apiv1.ClusterView.
	ClusterView = apiv1.ClusterView
	// ClusterNodeView is apiv1.ClusterNodeView.
	//
	// Deprecated: use apiv1.ClusterNodeView.
	ClusterNodeView = apiv1.ClusterNodeView
	// ClusterItemView is apiv1.ClusterItemView.
	//
	// Deprecated: use apiv1.ClusterItemView.
	ClusterItemView = apiv1.ClusterItemView
)

// Cluster describes the cluster as this node sees it.
func (n *Node) Cluster(ctx context.Context) (*apiv1.ClusterView, error) {
	v := &ClusterView{Node: n.cfg.NodeID, Coordinator: n.cfg.Cluster.Coordinator}
	items := n.store.Items()
	owner := map[string]string{}
	if n.cluster == nil {
		v.Leader = n.cfg.NodeID
		v.Nodes = []ClusterNodeView{{ID: n.cfg.NodeID, Addr: n.cfg.Listen, Heartbeat: time.Now(), Live: true, Items: len(items), Topics: n.router.Topics(),
			Started: timePtr(n.created), Zone: n.cfg.Cluster.Zone}}
		for _, it := range items {
			owner[cluster.ItemKey(it)] = n.cfg.NodeID
		}
	} else {
		st, err := n.cluster.coord.Status(ctx)
		if err != nil {
			return nil, err
		}
		v.Leader, v.Term, owner = st.Leader, st.Term, st.Assignment
		for _, ns := range st.Nodes {
			v.Nodes = append(v.Nodes, ClusterNodeView{ID: ns.ID, Addr: ns.Addr, Heartbeat: ns.Heartbeat, Live: ns.Live, Items: ns.Items, Topics: ns.Topics,
				Started: timePtr(ns.Started), Version: ns.Version, Zone: ns.Zone})
		}
	}
	lags, err := n.itemLags(ctx)
	if err != nil {
		return nil, err
	}
	v.Items = make([]ClusterItemView, len(items))
	for i, it := range items {
		k := cluster.ItemKey(it)
		v.Items[i] = ClusterItemView{Item: k, Owner: owner[k], LagSecs: lags[i], Zone: n.itemZone(k)}
	}
	for i := range v.Nodes {
		// This node's own from the binary: a registration written by
		// this node's previous process may still carry its old one.
		if v.Nodes[i].ID == n.cfg.NodeID {
			v.Nodes[i].Version = n.version
		}
	}
	sort.Slice(v.Nodes, func(a, b int) bool { return v.Nodes[a].ID < v.Nodes[b].ID })
	return v, nil
}

// timePtr is t in UTC for a view, nil when zero (unknown).
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// itemLags is each task item's scan lag in seconds, in store.Items' order:
// how long its earliest unclaimed pending task has been due (0 when none
// is). Eight items are read at a time.
func (n *Node) itemLags(ctx context.Context) ([]float64, error) {
	items := n.store.Items()
	now := time.Now()
	lags := make([]float64, len(items))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var firstErr error
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			due, _, err := n.store.NextDue(ctx, it)
			if err == nil && !due.IsZero() && due.Before(now) {
				lags[i] = now.Sub(due).Seconds()
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return lags, nil
}

// clusterState is the cluster as this node sees it, for the metrics: a
// node without a coordinator is alone and its own leader.
func (n *Node) clusterState(ctx context.Context) (metrics.ClusterState, error) {
	if n.cluster == nil {
		cs := metrics.ClusterState{Leader: true, Live: 1}
		if z := n.cfg.Cluster.Zone; z != "" {
			cs.ZoneLive = map[string]int{z: 1}
		}
		return cs, nil
	}
	st, err := n.cluster.coord.Status(ctx)
	if err != nil {
		return metrics.ClusterState{}, err
	}
	cs := metrics.ClusterState{Leader: st.Leader == n.cfg.NodeID, Term: st.Term}
	// Every zone named, by the databases or by a node, has its series: a
	// dark zone reads 0.
	zones := map[string]int{}
	for _, z := range n.cfg.Store.Zones {
		zones[z] += 0
	}
	for _, ns := range st.Nodes {
		if ns.Zone != "" {
			zones[ns.Zone] += 0
		}
		if ns.Live {
			cs.Live++
			if ns.Zone != "" {
				zones[ns.Zone]++
			}
		}
	}
	if len(zones) > 0 {
		cs.ZoneLive = zones
	}
	return cs, nil
}
