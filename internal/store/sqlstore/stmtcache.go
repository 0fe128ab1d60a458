package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
)

// stmtCache keeps prepared statements by key until it is closed: SQLite's
// inserts, starts, outcomes and claims (insert_sqlite.go, start_sqlite.go,
// claim_sqlite.go), whose parsing had been a third of their CPU.
//
// Statements are prepared without holding mu: the SQLite writer pool has
// one connection, which a transaction may hold while it looks statements
// up here, and a prepare waiting for that connection under mu would
// deadlock with it.
type stmtCache[K comparable] struct {
	mu     sync.Mutex
	m      map[K]*sql.Stmt
	closed bool
	max    int // statements kept at most; 0: no bound
}

var errStoreClosed = errors.New("store closed")

func newStmtCache[K comparable](max int) *stmtCache[K] {
	return &stmtCache[K]{m: map[K]*sql.Stmt{}, max: max}
}

// ensure prepares, with prep, those of keys not held yet. Past the bound
// a statement is not kept (get finds none).
func (c *stmtCache[K]) ensure(ctx context.Context, keys []K, prep func(context.Context, K) (*sql.Stmt, error)) error {
	c.mu.Lock()
	closed := c.closed
	var missing []K
	for _, k := range keys {
		if c.m[k] == nil && !slices.Contains(missing, k) {
			missing = append(missing, k)
		}
	}
	c.mu.Unlock()
	if closed {
		return errStoreClosed
	}
	for _, k := range missing {
		if _, err := c.prepared(ctx, k, prep); err != nil {
			return err
		}
	}
	return nil
}

// prepared is k's statement, prepared with prep if not held; nil with no
// error once the bound is reached.
func (c *stmtCache[K]) prepared(ctx context.Context, k K, prep func(context.Context, K) (*sql.Stmt, error)) (*sql.Stmt, error) {
	c.mu.Lock()
	st, closed, full := c.m[k], c.closed, c.max > 0 && len(c.m) >= c.max
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errStoreClosed
	case st != nil || full:
		return st, nil
	}
	st, err := prep(ctx, k)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		st.Close()
		return nil, errStoreClosed
	}
	if held := c.m[k]; held != nil {
		st.Close() // prepared meanwhile by a concurrent call
		return held, nil
	}
	c.m[k] = st
	return st, nil
}

func (c *stmtCache[K]) get(k K) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// close closes every statement; later calls fail.
func (c *stmtCache[K]) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for k, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, k)
	}
	return errors.Join(errs...)
}

// len is the number of statements held.
func (c *stmtCache[K]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
