package redisstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/brokertest"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestContract runs the publisher contract against the shared Redis, each
// test on a stream key of its own; the refusal is a key that holds a
// string (WRONGTYPE), in the same pipelines as the accepted XADDs.
func TestContract(t *testing.T) {
	url := testdb.RedisURL()
	brokertest.Run(t, brokertest.Harness{
		Kind: redisstream.Kind(),
		URL:  url,
		Destination: func(t *testing.T, r *brokertest.Receiver) string {
			key := testdb.Unique("ontime_t_")
			rdb := client(t, url)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			t.Cleanup(func() {
				cancel()
				<-done
				_ = rdb.Del(context.Background(), key).Err()
			})
			go func() {
				defer close(done)
				last := "0"
				for ctx.Err() == nil {
					res, err := rdb.XRead(ctx, &goredis.XReadArgs{Streams: []string{key, last}, Count: 1000, Block: 200 * time.Millisecond}).Result()
					if err != nil {
						continue
					}
					for _, e := range res[0].Messages {
						r.Add(received(e))
						last = e.ID
					}
				}
			}()
			return key
		},
		Refused: func(t *testing.T) []brokertest.Refusal {
			key := testdb.Unique("ontime_t_")
			rdb := client(t, url)
			if err := rdb.Set(context.Background(), key, "not a stream", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdb.Del(context.Background(), key).Err() })
			return []brokertest.Refusal{{Address: key, Reason: "WRONGTYPE"}}
		},
	})
}

// TestMaxLenTrims: ?maxlen=N on the URL trims the stream (MAXLEN ~ N), so
// it stays near N entries however many are published.
func TestMaxLenTrims(t *testing.T) {
	t.Parallel()
	key := testdb.Unique("ontime_t_")
	rdb := client(t, testdb.RedisURL())
	t.Cleanup(func() { _ = rdb.Del(context.Background(), key).Err() })
	p, err := redisstream.New(broker.Options{Name: "t", URL: testdb.RedisURL() + "?maxlen=10"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	const n = 1000
	ms := make([]*broker.Message, n)
	for i := range ms {
		ms[i] = &broker.Message{ID: fmt.Sprint(i), Body: []byte("1")}
	}
	for i, err := range p.PublishBatch(ctx, key, ms) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// Approximate trimming drops whole radix-tree nodes (100 entries by
	// default): well under n, never under 10.
	if l, err := rdb.XLen(ctx, key).Result(); err != nil || l < 10 || l >= n/2 {
		t.Errorf("XLEN %d (%v) after %d entries with maxlen=10", l, err, n)
	}
}

func client(t *testing.T, url string) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// received is an entry as a consumer reads it: the payload field is the
// body, the others the headers.
func received(e goredis.XMessage) brokertest.Received {
	m := brokertest.Received{Headers: map[string]string{}}
	for k, v := range e.Values {
		s, _ := v.(string)
		if k == redisstream.FieldPayload {
			m.Body = []byte(s)
			continue
		}
		m.Headers[k] = s
	}
	return m
}
