package sqlstore_test

import (
	"context"
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
		return s
	}
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
				return s
			})
		})
	}
}
