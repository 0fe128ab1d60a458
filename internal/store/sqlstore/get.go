package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

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
