package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestOpenWaitsForBusyServer: a PostgreSQL at its connection limit answers
// 53300 "too many clients", which passes as soon as another client leaves.
// Open waits for that instead of failing, so a node started beside busy
// neighbours comes up. The limit here is a role's (CONNECTION LIMIT 2,
// the same 53300 as the server's max_connections), held by two idle
// connections and released a second after Open starts.
func TestOpenWaitsForBusyServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.DSNs(t, "postgres", 1)[0]
	admin := openRaw(t, "postgres", dsn)
	role := testdb.Unique("ontime_busy_")
	if _, err := admin.ExecContext(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Runs after the store and the held connections are closed (cleanups
		// run last-registered first), before testdb drops the database.
		if _, err := admin.ExecContext(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role); err != nil {
			t.Logf("drop role: %v", err)
		}
	})
	if _, err := admin.ExecContext(ctx, "GRANT ALL ON SCHEMA public TO "+role+"; GRANT CREATE ON DATABASE "+dbName(dsn)+" TO "+role); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	roleDSN := u.String()

	var held []*sql.Conn
	pool := openRaw(t, "postgres", roleDSN)
	for range 2 {
		c, err := pool.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The limit is reached: a third connection is refused with 53300.
	third := openRaw(t, "postgres", roleDSN)
	err = third.PingContext(ctx)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Fatalf("third connection: %v; want 53300", err)
	}
	third.Close()

	start := time.Now()
	time.AfterFunc(time.Second, func() {
		for _, c := range held {
			c.Close()
		}
		pool.Close()
	})
	s, err := Open(ctx, Config{Driver: "postgres", DSNs: []string{roleDSN}, Tables: 2, Segments: 1})
	if err != nil {
		t.Fatalf("Open at the connection limit: %v; want it to wait for a free connection", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("Open returned after %v, before a connection was free", waited)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestWhileBusyGivesUp: a server still at its limit when the wait ends is
// reported, and errors other than a busy server are not waited on.
func TestWhileBusyGivesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	busy := &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}
	calls := 0
	err := whileBusy(ctx, 300*time.Millisecond, func() error { calls++; return busy })
	if !errors.Is(err, busy) || calls < 2 {
		t.Fatalf("whileBusy = %v after %d calls; want the busy error after several", err, calls)
	}
	other := &pgconn.PgError{Code: "42P01"}
	calls = 0
	if err := whileBusy(ctx, time.Minute, func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("whileBusy = %v after %d calls; want the other error at once", err, calls)
	}
}

// TestMaxConnsBoundsThePool: store.max_connections bounds each server
// database's pools together (on PostgreSQL the keyed insert's pool takes
// its share of them), and 0 means the default.
func TestMaxConnsBoundsThePool(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			for conns, want := range map[int]int{0: DefaultMaxConns, 3: 3, 12: 12, 20: 20} {
				s, err := Open(context.Background(), Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 2), Tables: 2, Segments: 1, MaxConns: conns})
				if err != nil {
					t.Fatal(err)
				}
				for i, db := range s.w {
					got := db.Stats().MaxOpenConnections
					if s.kw != nil {
						got += s.kw[i].Stats().MaxOpenConnections
					}
					if got != want {
						t.Errorf("MaxConns %d: database %d's pools hold %d, want %d", conns, i, got, want)
					}
				}
				if keyed := s.kw != nil; keyed != (engine == "postgres" && want >= 16) {
					t.Errorf("MaxConns %d: a keyed pool %v", conns, keyed)
				}
				s.Close()
			}
		})
	}
}
