package redisstream_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
	"github.com/ontimehq/ontime/internal/testdb"
)

// A Redis past its maxmemory refuses XADD with OOM: back-pressure, a wait
// the lane and the task honour (deliver.RetryAfterOf). On a private
// redis-server: maxmemory is the server's.
func TestOOMIsBackPressure(t *testing.T) {
	t.Parallel()
	srv := testdb.StartRedisAOF(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	p, err := redisstream.New(broker.Options{Name: "t", URL: srv.RedisURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = p.Publish(ctx, "s", &broker.Message{ID: "a", Body: []byte("1")})
	if d, ok := deliver.RetryAfterOf(err); !ok || d != broker.BackPressureWait {
		t.Fatalf("XADD past maxmemory: %v (wait %s %v); want back-pressure", err, d, ok)
	}
}
