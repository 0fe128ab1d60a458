// Package dbcoord coordinates a cluster through the task database itself:
// node registrations with heartbeats, a leader lease with a term (the
// fencing token), and the assignment of sharding items, written by the
// leader and read by every node. No extra moving parts, the way River and
// xxl-job elect with their own database.
//
// One round, every TTL/3 on every node:
//
//	heartbeat ─► leader? renew : try to acquire (term+1 when it changes hands)
//	          ─► leader: live nodes → cluster.Assign → write rows under term
//	          ─► read own items → callback when they change
//
// A node that has not heartbeated successfully for TTL minus a margin drops
// all its items before any leader may consider it dead (fencing by time);
// the leader reassigns a node's items only once its heartbeat is older than
// TTL. Writes of the assignment are fenced by the leader's term inside the
// same transaction, so a deposed leader writes nothing.
package dbcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
)

// Config configures a coordinator.
type Config struct {
	DB      *sql.DB
	Dialect string // sqlite | mysql | postgres
	NodeID  string
	Addr    string        // the node's API address, shown in the cluster view
	TTL     time.Duration // default 10s
	Items   []string      // every sharding item's key, identical on all nodes
	Logger  *slog.Logger
	// OnAssign is called from the coordinator's goroutine whenever the set
	// of items this node owns changes (nil: none owned).
	OnAssign func(term int64, items []string)
}

// Coordinator runs the protocol for one node.
type Coordinator struct {
	cfg Config
	q   queries
	log *slog.Logger

	owned    *cluster.Tracker
	mu       sync.Mutex
	term     int64 // leader term this node holds, 0 if not leader
	lastBeat time.Time
}

type queries struct {
	upsertNode, selectLeader, renewLeader, acquireLeader, liveNodes, selectAssign, upsertAssign, deleteAssign, deleteNode, pruneNodes string
}

func dialectQueries(d string) (queries, error) {
	ph := func(s string) string { return s }
	var upsertNode, upsertAssign string
	switch d {
	case "postgres":
		n := 0
		ph = func(s string) string {
			var b strings.Builder
			for _, r := range s {
				if r == '?' {
					n++
					fmt.Fprintf(&b, "$%d", n)
					continue
				}
				b.WriteRune(r)
			}
			n = 0
			return b.String()
		}
		fallthrough
	case "sqlite":
		upsertNode = `INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (node_id) DO UPDATE SET addr = excluded.addr, heartbeat_at = excluded.heartbeat_at`
		upsertAssign = `INSERT INTO ontime_assignment (item, node_id, term, since) VALUES (?, ?, ?, ?)
			ON CONFLICT (item) DO UPDATE SET node_id = excluded.node_id, term = excluded.term, since = excluded.since`
	case "mysql":
		upsertNode = `INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE addr = VALUES(addr), heartbeat_at = VALUES(heartbeat_at)`
		upsertAssign = `INSERT INTO ontime_assignment (item, node_id, term, since) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE node_id = VALUES(node_id), term = VALUES(term), since = VALUES(since)`
	default:
		return queries{}, fmt.Errorf("cluster: dialect %q is not one of sqlite, mysql, postgres", d)
	}
	return queries{
		upsertNode:   ph(upsertNode),
		selectLeader: `SELECT node_id, term, lease_until FROM ontime_leader WHERE id = 1`,
		// version changes on every renewal so that MySQL, which counts changed
		// rather than matched rows, reports the match.
		renewLeader:   ph(`UPDATE ontime_leader SET lease_until = ?, version = version + 1 WHERE id = 1 AND node_id = ? AND term = ?`),
		acquireLeader: ph(`UPDATE ontime_leader SET node_id = ?, term = term + 1, lease_until = ? WHERE id = 1 AND (lease_until < ? OR node_id = '')`),
		liveNodes:     ph(`SELECT node_id FROM ontime_nodes WHERE heartbeat_at >= ?`),
		selectAssign:  `SELECT item, node_id, term, since FROM ontime_assignment`,
		upsertAssign:  ph(upsertAssign),
		deleteAssign:  ph(`DELETE FROM ontime_assignment WHERE item = ?`),
		deleteNode:    ph(`DELETE FROM ontime_nodes WHERE node_id = ?`),
		pruneNodes:    ph(`DELETE FROM ontime_nodes WHERE heartbeat_at < ?`),
	}, nil
}

// Migrate creates the coordinator's tables if missing. Idempotent; safe to
// run from several nodes at once (CREATE IF NOT EXISTS, and the leader row
// is inserted only when absent).
func Migrate(ctx context.Context, db *sql.DB, dialect string) error {
	text := "VARCHAR(128)"
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ontime_nodes (node_id ` + text + ` NOT NULL PRIMARY KEY, addr ` + text + ` NOT NULL, heartbeat_at BIGINT NOT NULL, started_at BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ontime_leader (id INT NOT NULL PRIMARY KEY, node_id ` + text + ` NOT NULL, term BIGINT NOT NULL, lease_until BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS ontime_assignment (item ` + text + ` NOT NULL PRIMARY KEY, node_id ` + text + ` NOT NULL, term BIGINT NOT NULL, since BIGINT NOT NULL)`,
	}
	switch dialect {
	case "postgres", "sqlite":
		stmts = append(stmts, `INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, '', 0, 0) ON CONFLICT (id) DO NOTHING`)
	case "mysql":
		stmts = append(stmts, `INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, '', 0, 0) ON DUPLICATE KEY UPDATE id = id`)
	default:
		return fmt.Errorf("cluster: dialect %q is not one of sqlite, mysql, postgres", dialect)
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("cluster: migrate: %w", err)
		}
	}
	return nil
}

// New checks cfg and builds a coordinator.
func New(cfg Config) (*Coordinator, error) {
	if cfg.DB == nil {
		return nil, errors.New("cluster: DB is required")
	}
	if cfg.NodeID == "" || len(cfg.NodeID) > 128 {
		return nil, errors.New("node_id: 1 to 128 characters are required for a cluster")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < 300*time.Millisecond || cfg.TTL > 10*time.Minute {
		return nil, fmt.Errorf("cluster.lease_ttl: %s is out of range 300ms..10m", cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	q, err := dialectQueries(cfg.Dialect)
	if err != nil {
		return nil, err
	}
	items := slices.Clone(cfg.Items)
	slices.Sort(items)
	cfg.Items = items
	return &Coordinator{cfg: cfg, q: q, log: cfg.Logger, owned: cluster.NewTracker(cfg.OnAssign)}, nil
}

// Run runs rounds until ctx ends, then gives up leadership and membership
// so others take over at once rather than after the TTL.
func (c *Coordinator) Run(ctx context.Context) error {
	tick := time.NewTicker(c.cfg.TTL / 3)
	defer tick.Stop()
	started := time.Now()
	for {
		c.round(ctx, started)
		select {
		case <-ctx.Done():
			c.leave()
			return nil
		case <-tick.C:
		}
	}
}

func (c *Coordinator) round(ctx context.Context, started time.Time) {
	now := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.TTL/3)
	defer cancel()
	if _, err := c.cfg.DB.ExecContext(rctx, c.q.upsertNode, c.cfg.NodeID, c.cfg.Addr, now.UnixMicro(), started.UnixMicro()); err != nil {
		c.log.Warn("cluster heartbeat failed", "err", err)
		c.mu.Lock()
		last := c.lastBeat
		c.mu.Unlock()
		// Fencing by time: stop owning before any leader may call us dead.
		if time.Since(last) > c.cfg.TTL*2/3 {
			c.setOwned(0, nil)
			c.mu.Lock()
			c.term = 0
			c.mu.Unlock()
		}
		return
	}
	c.mu.Lock()
	c.lastBeat = now
	c.mu.Unlock()
	term, err := c.lead(rctx, now)
	if err != nil {
		c.log.Warn("cluster leader election failed", "err", err)
	}
	if term > 0 {
		if err := c.rebalance(rctx, now, term); err != nil {
			c.log.Warn("cluster rebalance failed", "err", err)
		}
	}
	if err := c.readOwn(rctx); err != nil {
		c.log.Warn("cluster read assignment failed", "err", err)
	}
}

// lead renews or acquires the leader lease; it returns the term held, 0 if
// another node leads.
func (c *Coordinator) lead(ctx context.Context, now time.Time) (int64, error) {
	until := now.Add(c.cfg.TTL).UnixMicro()
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	if term > 0 {
		res, err := c.cfg.DB.ExecContext(ctx, c.q.renewLeader, until, c.cfg.NodeID, term)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return term, nil
		}
		c.log.Info("cluster leadership lost", "term", term)
		c.mu.Lock()
		c.term = 0
		c.mu.Unlock()
	}
	res, err := c.cfg.DB.ExecContext(ctx, c.q.acquireLeader, c.cfg.NodeID, until, now.UnixMicro())
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, nil
	}
	var node string
	var lease int64
	if err := c.cfg.DB.QueryRowContext(ctx, c.q.selectLeader).Scan(&node, &term, &lease); err != nil {
		return 0, err
	}
	if node != c.cfg.NodeID {
		return 0, nil
	}
	c.mu.Lock()
	c.term = term
	c.mu.Unlock()
	c.log.Info("cluster leader elected", "node", c.cfg.NodeID, "term", term)
	return term, nil
}

func (c *Coordinator) rebalance(ctx context.Context, now time.Time, term int64) error {
	// Forget registrations of nodes gone for long (restarted nodes come
	// back under a new ID): they would clutter the cluster view forever.
	if _, err := c.cfg.DB.ExecContext(ctx, c.q.pruneNodes, now.Add(-10*c.cfg.TTL).UnixMicro()); err != nil {
		return err
	}
	rows, err := c.cfg.DB.QueryContext(ctx, c.q.liveNodes, now.Add(-c.cfg.TTL).UnixMicro())
	if err != nil {
		return err
	}
	var nodes []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		nodes = append(nodes, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	cur, _, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	prev := make(map[string]string, len(cur))
	for it, g := range cur {
		prev[it] = g.Node
	}
	next := cluster.Assign(c.cfg.Items, nodes, prev)
	if cluster.Moved(prev, next) == 0 && len(prev) == len(next) {
		return nil
	}
	tx, err := c.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Fence: still the leader under this term, inside the transaction.
	res, err := tx.ExecContext(ctx, c.q.renewLeader, now.Add(c.cfg.TTL).UnixMicro(), c.cfg.NodeID, term)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("no longer leader")
	}
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n] = true
	}
	for _, it := range c.cfg.Items {
		if prev[it] == next[it] {
			continue
		}
		// An item taken from a live node is handed over only after that node
		// has surely read the change (it reads every TTL/3) or fenced itself
		// (2/3 TTL without a heartbeat): no two live nodes own it at once.
		since := now
		if live[prev[it]] {
			since = now.Add(c.cfg.TTL)
		}
		if _, err := tx.ExecContext(ctx, c.q.upsertAssign, it, next[it], term, since.UnixMicro()); err != nil {
			return err
		}
	}
	for it := range prev {
		if _, ok := next[it]; !ok {
			if _, err := tx.ExecContext(ctx, c.q.deleteAssign, it); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	c.log.Info("cluster rebalanced", "term", term, "nodes", len(nodes), "moved", cluster.Moved(prev, next))
	return nil
}

// assignment reads item → owner and the highest term written.
func (c *Coordinator) assignment(ctx context.Context) (map[string]cluster.Grant, int64, error) {
	rows, err := c.cfg.DB.QueryContext(ctx, c.q.selectAssign)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := map[string]cluster.Grant{}
	var maxTerm int64
	for rows.Next() {
		var it, node string
		var term, since int64
		if err := rows.Scan(&it, &node, &term, &since); err != nil {
			return nil, 0, err
		}
		out[it] = cluster.Grant{Node: node, Since: time.UnixMicro(since), Term: term}
		maxTerm = max(maxTerm, term)
	}
	return out, maxTerm, rows.Err()
}

func (c *Coordinator) readOwn(ctx context.Context) error {
	all, _, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	c.owned.Set(cluster.Owned(all, c.cfg.NodeID, time.Now()))
	return nil
}

func (c *Coordinator) setOwned(term int64, items []string) { c.owned.Set(term, items) }

func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.setOwned(0, nil)
	if _, err := c.cfg.DB.ExecContext(ctx, c.q.deleteNode, c.cfg.NodeID); err != nil {
		c.log.Warn("cluster leave", "err", err)
	}
	c.mu.Lock()
	term := c.term
	c.term = 0
	c.mu.Unlock()
	if term > 0 {
		// Hand leadership over at once: expire our lease.
		if _, err := c.cfg.DB.ExecContext(ctx, c.q.renewLeader, int64(0), c.cfg.NodeID, term); err != nil {
			c.log.Warn("cluster resign", "err", err)
		}
	}
}

// Status reads the cluster's state from the database.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	var st cluster.Status
	var lease int64
	if err := c.cfg.DB.QueryRowContext(ctx, c.q.selectLeader).Scan(&st.Leader, &st.Term, &lease); err != nil {
		return st, err
	}
	if lease < time.Now().UnixMicro() {
		st.Leader = ""
	}
	assign, _, err := c.assignment(ctx)
	if err != nil {
		return st, err
	}
	st.Assignment = make(map[string]string, len(assign))
	counts := map[string]int{}
	for it, g := range assign {
		st.Assignment[it] = g.Node
		counts[g.Node]++
	}
	rows, err := c.cfg.DB.QueryContext(ctx, `SELECT node_id, addr, heartbeat_at FROM ontime_nodes ORDER BY node_id`)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	cutoff := time.Now().Add(-c.cfg.TTL)
	for rows.Next() {
		var ns cluster.NodeStatus
		var hb int64
		if err := rows.Scan(&ns.ID, &ns.Addr, &hb); err != nil {
			return st, err
		}
		ns.Heartbeat = time.UnixMicro(hb)
		ns.Live = !ns.Heartbeat.Before(cutoff)
		ns.Items = counts[ns.ID]
		st.Nodes = append(st.Nodes, ns)
	}
	return st, rows.Err()
}
