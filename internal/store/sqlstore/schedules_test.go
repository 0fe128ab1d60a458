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

func TestSchedulesContract(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			storetest.RunSchedules(t, func(t *testing.T, topo router.Topology, segments int, hold time.Duration) store.Store {
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
