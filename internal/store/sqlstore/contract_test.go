package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/store/storetest"
	"github.com/ontimehq/ontime/internal/testdb"
)

func opener(engine string) storetest.Opener {
	return func(t *testing.T, topo router.Topology, segments int) store.Store {
		s, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, topo.Databases), Tables: topo.Tables, Segments: segments})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		checkCounts(t, s)
		return s
	}
}

// checkCounts makes t check, when it ends, that the counts s's writes
// maintained equal a COUNT(*) of its tables: every contract test's
// inserts, claims, finishes, retries, cancels, requeues, purges, bulk
// operations and retention deletes then check them. A fold first on
// PostgreSQL, whose reads sum totals and deltas either way.
func checkCounts(t *testing.T, s *sqlstore.Store) {
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := sqlstore.FoldCountsNow(ctx, s); err != nil {
			if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "database is closed") {
				return // the test closed its store
			}
			t.Errorf("fold counts: %v", err)
			return
		}
		drift, err := sqlstore.CountsDrift(ctx, s)
		if err != nil {
			t.Errorf("counts drift: %v", err)
		} else if drift != "" {
			t.Errorf("maintained counts differ from COUNT(*): %s", drift)
		}
	})
}

func TestContract(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, opener(engine))
		})
	}
}

func TestKeysContract(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			storetest.RunKeys(t, func(t *testing.T, topo router.Topology, segments int, hold time.Duration) store.Store {
				s, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, topo.Databases),
					Tables: topo.Tables, Segments: segments, KeyHold: hold})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				checkCounts(t, s)
				return s
			})
		})
	}
}
