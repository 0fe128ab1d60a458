package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// The database coordinator's state (dbcoord.Store), in the first database
// beside the tasks; times are Unix microseconds, like the tasks'.
//
//	ontime_nodes       node_id → addr, heartbeat_at, started_at, topics (handoff.go),
//	                   incarnation (schema 12), zone (schema 18), version (schema 19)
//	ontime_leader      one row (id 1): node_id, term, lease_until, version
//	ontime_assignment  item → node_id, term, since
//
// These methods are the statements only. Who may run which, and when —
// heartbeat cadence, when a node counts as dead, the handover delay — is
// dbcoord's protocol.

// coordDB is the pool the coordinator's statements run on.
func (s *Store) coordDB() *sql.DB { return s.w[0] }

// Heartbeat registers node, or refreshes its heartbeat, address, process
// and the topics it has Go handlers for.
func (s *Store) Heartbeat(ctx context.Context, node, addr string, topics []string, proc store.Process, now time.Time) (err error) {
	defer classify(&err)
	// The column's width; a build version is ~50 bytes.
	proc.Version = proc.Version[:min(len(proc.Version), 128)]
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(s.d.upsertNode), node, addr, now.UnixMicro(), proc.Started.UnixMicro(),
		encodeTopics(topics), proc.Incarnation, proc.Version, proc.Zone); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// Deregister removes node's registration.
func (s *Store) Deregister(ctx context.Context, node string) (err error) {
	defer classify(&err)
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_nodes WHERE node_id = ?`), node); err != nil {
		return fmt.Errorf("deregister: %w", err)
	}
	return nil
}

// PruneNodes removes the registrations whose last heartbeat is before
// cutoff.
func (s *Store) PruneNodes(ctx context.Context, cutoff time.Time) (err error) {
	defer classify(&err)
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_nodes WHERE heartbeat_at < ?`), cutoff.UnixMicro()); err != nil {
		return fmt.Errorf("prune nodes: %w", err)
	}
	return nil
}

// LiveNodes lists the nodes whose last heartbeat is at or after since.
func (s *Store) LiveNodes(ctx context.Context, since time.Time) (_ []string, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, s.d.rebind(`SELECT node_id FROM ontime_nodes WHERE heartbeat_at >= ?`), since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("live nodes: %w", err)
	}
	defer rows.Close()
	var nodes []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("live nodes: %w", err)
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("live nodes: %w", err)
	}
	return nodes, nil
}

// Nodes lists every registration by node ID, with its ID, address, last
// heartbeat, process (zone included) and topics.
func (s *Store) Nodes(ctx context.Context) (_ []store.NodeStatus, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, `SELECT node_id, addr, heartbeat_at, started_at, COALESCE(topics, ''), incarnation, version, zone FROM ontime_nodes ORDER BY node_id`)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	defer rows.Close()
	var out []store.NodeStatus
	for rows.Next() {
		var ns store.NodeStatus
		var hb, started int64
		var topics string
		if err := rows.Scan(&ns.ID, &ns.Addr, &hb, &started, &topics, &ns.Incarnation, &ns.Version, &ns.Zone); err != nil {
			return nil, fmt.Errorf("nodes: %w", err)
		}
		ns.Heartbeat, ns.Started, ns.Topics = time.UnixMicro(hb), time.UnixMicro(started), decodeTopics(topics)
		out = append(out, ns)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	return out, nil
}

// Leader reads the leader lease (Node is empty when none was ever taken).
func (s *Store) Leader(ctx context.Context) (_ store.LeaderLease, err error) {
	defer classify(&err)
	var l store.LeaderLease
	var until int64
	if err := s.coordDB().QueryRowContext(ctx, `SELECT node_id, term, lease_until FROM ontime_leader WHERE id = 1`).Scan(&l.Node, &l.Term, &until); err != nil {
		return l, fmt.Errorf("leader: %w", err)
	}
	l.Until = time.UnixMicro(until)
	return l, nil
}

// TryLead takes the leader lease for node until until, raising the term,
// if it is vacant or expired at now. It returns the term taken, 0 when
// another node holds the lease.
func (s *Store) TryLead(ctx context.Context, node string, now, until time.Time) (_ int64, err error) {
	defer classify(&err)
	res, err := s.coordDB().ExecContext(ctx, s.d.rebind(`UPDATE ontime_leader SET node_id = ?, term = term + 1, lease_until = ? WHERE id = 1 AND (lease_until < ? OR node_id = '')`),
		node, until.UnixMicro(), now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("try lead: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, nil
	}
	l, err := s.Leader(ctx)
	if err != nil {
		return 0, err
	}
	if l.Node != node {
		return 0, nil
	}
	return l.Term, nil
}

// renewLead is the lease renewal, and the fence of every write of the
// assignment. version changes on every renewal so that MySQL, which
// counts changed rather than matched rows, reports the match.
const renewLead = `UPDATE ontime_leader SET lease_until = ?, version = version + 1 WHERE id = 1 AND node_id = ? AND term = ?`

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) renewLead(ctx context.Context, db execer, node string, term, until int64) (bool, error) {
	res, err := db.ExecContext(ctx, s.d.rebind(renewLead), until, node, term)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RenewLead extends l.Node's lease under l.Term to l.Until. held is false
// when the lease has changed hands (a higher term exists).
func (s *Store) RenewLead(ctx context.Context, l store.LeaderLease) (held bool, err error) {
	defer classify(&err)
	held, err = s.renewLead(ctx, s.coordDB(), l.Node, l.Term, l.Until.UnixMicro())
	if err != nil {
		return false, fmt.Errorf("renew lead: %w", err)
	}
	return held, nil
}

// Resign expires node's lease under term at once, so that another node
// takes it on its next try instead of after the lease runs out.
func (s *Store) Resign(ctx context.Context, node string, term int64) (err error) {
	defer classify(&err)
	if _, err := s.renewLead(ctx, s.coordDB(), node, term, 0); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	return nil
}

// Assignment reads every item's grant.
func (s *Store) Assignment(ctx context.Context) (_ map[string]store.Grant, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, `SELECT item, node_id, term, since FROM ontime_assignment`)
	if err != nil {
		return nil, fmt.Errorf("assignment: %w", err)
	}
	defer rows.Close()
	out := map[string]store.Grant{}
	for rows.Next() {
		var it, node string
		var term, since int64
		if err := rows.Scan(&it, &node, &term, &since); err != nil {
			return nil, fmt.Errorf("assignment: %w", err)
		}
		out[it] = store.Grant{Node: node, Since: time.UnixMicro(since), Term: term}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("assignment: %w", err)
	}
	return out, nil
}

// HandOver moves to now the Since of the grants of items held by a node
// other than from whose Since is still to come (dbcoord.Store), in one
// transaction.
func (s *Store) HandOver(ctx context.Context, from string, items []string, now time.Time) (err error) {
	defer classify(&err)
	tx, err := s.coordDB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	defer tx.Rollback()
	q := s.d.rebind(`UPDATE ontime_assignment SET since = ? WHERE item = ? AND node_id <> ? AND since > ?`)
	at := now.UnixMicro()
	for _, it := range items {
		if _, err := tx.ExecContext(ctx, q, at, it, from, at); err != nil {
			return fmt.Errorf("hand over %s: %w", it, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	return nil
}

// WriteAssignment writes grants and deletes the items in drop, in one
// transaction fenced by the leader lease l: inside it, the lease is
// renewed to l.Until under l.Term first, and if that matches nothing (the
// lease changed hands) nothing is written and held is false.
func (s *Store) WriteAssignment(ctx context.Context, l store.LeaderLease, grants map[string]store.Grant, drop []string) (held bool, err error) {
	defer classify(&err)
	tx, err := s.coordDB().BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("write assignment: %w", err)
	}
	defer tx.Rollback()
	if held, err := s.renewLead(ctx, tx, l.Node, l.Term, l.Until.UnixMicro()); err != nil || !held {
		if err != nil {
			return false, fmt.Errorf("write assignment: fence: %w", err)
		}
		return false, nil
	}
	upsert := s.d.rebind(s.d.upsertGrant)
	for _, it := range slices.Sorted(maps.Keys(grants)) {
		g := grants[it]
		if _, err := tx.ExecContext(ctx, upsert, it, g.Node, g.Term, g.Since.UnixMicro()); err != nil {
			return false, fmt.Errorf("write assignment: %s: %w", it, err)
		}
	}
	del := s.d.rebind(`DELETE FROM ontime_assignment WHERE item = ?`)
	for _, it := range drop {
		if _, err := tx.ExecContext(ctx, del, it); err != nil {
			return false, fmt.Errorf("write assignment: drop %s: %w", it, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("write assignment: %w", err)
	}
	return true, nil
}
