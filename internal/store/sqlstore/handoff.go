package sqlstore

// Schema version 11: who can deliver a task without a target (issue 25
// item 1).
//
//	ontime_nodes.topics  the topics a node has Go handlers for, comma-
//	                     separated, written with each heartbeat (dbcoord):
//	                     every node reads them with the membership, so the
//	                     submit path knows, without asking, whether some
//	                     live node can deliver a task without a target
//	ontime_handoffs      node_id, task_id → topic, due_at, token, created_at:
//	                     a node that fired a task without a target and has
//	                     no handler for its topic writes the row claimed by
//	                     a live node that has one (the outcome, under a new
//	                     token) and leaves it here; that node takes its
//	                     handoffs every poll and puts them in its hot tier
//
// A handoff is a hint: the row's claim is the truth. One never taken (its
// node died) leaves the task claimed until the lease ends, when the item's
// scanner claims it again; a stale one presents a token the row no longer
// has and starts nothing. Both tables live in the first database, beside
// the coordinator's.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// encodeTopics is a node's topics as ontime_nodes.topics keeps them:
// sorted, comma-separated (a topic has no comma).
func encodeTopics(topics []string) string {
	return strings.Join(slices.Sorted(slices.Values(topics)), ",")
}

func decodeTopics(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// createHandoffs makes the handoffs table, per engine.
var createHandoffs = map[string]string{
	"sqlite": `CREATE TABLE IF NOT EXISTS ontime_handoffs (node_id TEXT NOT NULL, task_id TEXT NOT NULL, topic TEXT NOT NULL,
		due_at INTEGER NOT NULL, token INTEGER NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (node_id, task_id))`,
	"postgres": `CREATE TABLE IF NOT EXISTS ontime_handoffs (node_id TEXT COLLATE "C" NOT NULL, task_id TEXT COLLATE "C" NOT NULL, topic TEXT COLLATE "C" NOT NULL,
		due_at BIGINT NOT NULL, token BIGINT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (node_id, task_id))`,
	"mysql": `CREATE TABLE IF NOT EXISTS ontime_handoffs (node_id VARCHAR(128) NOT NULL, task_id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, due_at BIGINT NOT NULL, token BIGINT NOT NULL, created_at BIGINT NOT NULL,
		PRIMARY KEY (node_id, task_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
}

// nodeTopicsColumn is ontime_nodes.topics, per engine: MySQL gives TEXT
// no literal default, so the column is nullable there and read through
// COALESCE everywhere.
var nodeTopicsColumn = map[string]string{
	"sqlite":   "TEXT NULL",
	"postgres": "TEXT NULL",
	"mysql":    "MEDIUMTEXT NULL",
}

var upsertHandoff = map[string]string{
	"sqlite": `INSERT INTO ontime_handoffs (node_id, task_id, topic, due_at, token, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (node_id, task_id) DO UPDATE SET topic = excluded.topic, due_at = excluded.due_at, token = excluded.token, created_at = excluded.created_at`,
	"postgres": `INSERT INTO ontime_handoffs (node_id, task_id, topic, due_at, token, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (node_id, task_id) DO UPDATE SET topic = excluded.topic, due_at = excluded.due_at, token = excluded.token, created_at = excluded.created_at`,
	"mysql": `INSERT INTO ontime_handoffs (node_id, task_id, topic, due_at, token, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE topic = VALUES(topic), due_at = VALUES(due_at), token = VALUES(token), created_at = VALUES(created_at)`,
}

// migrateHandlers is schema version 11 (see the top of this file).
func (s *Store) migrateHandlers(ctx context.Context, c *sql.Conn) error {
	if err := s.addColumn(ctx, c, "ontime_nodes", "topics", nodeTopicsColumn[s.d.name]); err != nil {
		return err
	}
	_, err := c.ExecContext(ctx, createHandoffs[s.d.name])
	return err
}

// HandOff leaves refs (tasks claimed for node under their tokens) for node
// to take, replacing an earlier handoff of the same task to it.
func (s *Store) HandOff(ctx context.Context, node string, refs []store.Ref, now time.Time) (err error) {
	defer classify(&err)
	if len(refs) == 0 {
		return nil
	}
	tx, err := s.coordDB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("hand off: %w", err)
	}
	defer tx.Rollback()
	q := s.d.rebind(upsertHandoff[s.d.name])
	for _, r := range refs {
		if _, err := tx.ExecContext(ctx, q, node, r.ID, r.Topic, r.DueAt.UnixMicro(), r.Token, now.UnixMicro()); err != nil {
			return fmt.Errorf("hand off %s: %w", r.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("hand off: %w", err)
	}
	return nil
}

// TakeHandoffs returns up to limit of the tasks handed off to node, the
// earliest due first, and deletes them (each only under the token read:
// one handed off again meanwhile stays for the next take).
func (s *Store) TakeHandoffs(ctx context.Context, node string, limit int) (_ []store.Ref, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, s.d.rebind(`SELECT task_id, topic, due_at, token FROM ontime_handoffs WHERE node_id = ? ORDER BY due_at LIMIT ?`), node, limit)
	if err != nil {
		return nil, fmt.Errorf("take handoffs: %w", err)
	}
	var refs []store.Ref
	for rows.Next() {
		var r store.Ref
		var due int64
		if err := rows.Scan(&r.ID, &r.Topic, &due, &r.Token); err != nil {
			rows.Close()
			return nil, fmt.Errorf("take handoffs: %w", err)
		}
		r.DueAt = time.UnixMicro(due)
		refs = append(refs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take handoffs: %w", err)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	conds := make([]string, len(refs))
	args := []any{node}
	for i, r := range refs {
		conds[i] = `(task_id = ? AND token = ?)`
		args = append(args, r.ID, r.Token)
	}
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_handoffs WHERE node_id = ? AND (`+strings.Join(conds, " OR ")+`)`), args...); err != nil {
		return nil, fmt.Errorf("take handoffs: %w", err)
	}
	return refs, nil
}

// PruneHandoffs deletes the handoffs, to any node, left before cutoff:
// their claims have ended long since (a node that never took them is
// gone), so they could start nothing.
func (s *Store) PruneHandoffs(ctx context.Context, cutoff time.Time) (err error) {
	defer classify(&err)
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_handoffs WHERE created_at < ?`), cutoff.UnixMicro()); err != nil {
		return fmt.Errorf("prune handoffs: %w", err)
	}
	return nil
}
