package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Get returns one task.
func (s *Store) Get(ctx context.Context, id string) (_ *task.Task, err error) {
	defer classify(&err)
	return s.get(ctx, s.r, id)
}

// getW reads through the writer pool: right after a write, SQLite's reader
// connections may not have seen it yet.
func (s *Store) getW(ctx context.Context, id string) (*task.Task, error) {
	return s.get(ctx, s.w, id)
}

func (s *Store) get(ctx context.Context, pools []*sql.DB, id string) (*task.Task, error) {
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryTasks(ctx, pools[db], `SELECT `+cols+` FROM `+s.names[t]+` WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return rows[0], nil
}

// getManyChunk bounds the IDs of one query (its placeholders).
const getManyChunk = 1000

// GetMany returns the tasks of ids that exist, by ID; an ID that is
// missing (never written, deleted by retention, malformed) is absent from
// the map. The IDs of one database are read in one query per
// getManyChunk IDs — a UNION ALL of the lookups of their tables — so a
// caller that watches many tasks (the outbox relay's in-flight rows) pays
// a round trip per database, not one per task.
func (s *Store) GetMany(ctx context.Context, ids []string) (_ map[string]*task.Task, err error) {
	defer classify(&err)
	out := make(map[string]*task.Task, len(ids))
	byDB := map[int][]group{}
	var dbs []int
	for _, g := range s.groupIDs(ids) {
		if _, ok := byDB[g.db]; !ok {
			dbs = append(dbs, g.db)
		}
		byDB[g.db] = append(byDB[g.db], g)
	}
	for _, db := range dbs {
		var q strings.Builder
		var args []any
		flush := func() error {
			if len(args) == 0 {
				return nil
			}
			rows, err := s.queryTasks(ctx, s.r[db], q.String(), args...)
			if err != nil {
				return fmt.Errorf("get %d tasks: %w", len(args), err)
			}
			for _, t := range rows {
				out[t.ID] = t
			}
			q.Reset()
			args = args[:0]
			return nil
		}
		for _, g := range byDB[db] {
			for start := 0; start < len(g.idx); {
				n := min(len(g.idx)-start, getManyChunk-len(args))
				if q.Len() > 0 {
					q.WriteString(" UNION ALL ")
				}
				q.WriteString(`SELECT ` + cols + ` FROM ` + s.names[g.table] + ` WHERE id IN (` + placeholders(n) + `)`)
				for _, i := range g.idx[start : start+n] {
					args = append(args, ids[i])
				}
				start += n
				if len(args) >= getManyChunk {
					if err := flush(); err != nil {
						return nil, err
					}
				}
			}
		}
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
