package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestUnavailable: with the server cut off (a proxy in front of the real
// one closed: refused dials, reset sockets), every driver's errors match
// store.ErrUnavailable; a statement error while it is up does not; once
// it is back the same store works again.
func TestUnavailable(t *testing.T) {
	for _, engine := range []string{"mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn, proxy := testdb.ProxyDSN(t, engine, testdb.DSNs(t, engine, 1)[0])
			s := openT(t, engine, []string{dsn}, 2, 1)
			ctx := context.Background()
			due := time.Now().Add(time.Hour)
			if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "a", due, 1)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "not-an-id"); err == nil || errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a malformed ID: %v; want an error that is not ErrUnavailable", err)
			}

			proxy.Down()
			// Twice: the pooled connections die first, then dials are refused.
			for i := range 2 {
				if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "b", due, 1)}); !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("insert %d while down: %v; want ErrUnavailable", i, err)
				}
			}
			if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("ping while down: %v", err)
			}
			if _, err := s.List(ctx, store.ListFilter{Limit: 10}); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("list while down: %v", err)
			}

			proxy.Up()
			if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "b", due, 1)}); err != nil {
				t.Fatalf("insert after the server is back: %v", err)
			}
		})
	}
}
