package ontime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/internal/testdb"
)

// The services start in the order Node.build lists (each before those that
// hand it work) and stop in reverse: with the memory tier, and with the
// Redis tier's listener and a broker connection in their places.
func TestServiceStartOrder(t *testing.T) {
	t.Parallel()
	tail := []string{"*fire.Firer", "*scan.Scanner", "*scanjob.Service", "*retain.Cleaner", "*schedule.Service", "*operation.Service", "*topics.Watcher", "*topics.Settings", "*topics.Counts", "*topics.Folder"}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want []string
	}{
		"memory tier, no broker": {
			want: slices.Concat([]string{"*ontime.storeMark", "gauges", "*console.Sampler", "*complete.Completer", "*deliver.Dispatcher"}, tail),
		},
		"redis tier and a broker": {
			mod: func(c *Config) {
				c.Hot.Tier, c.Hot.RedisAddrs = "redis", []string{testdb.StartRedis(t).Addr()}
				c.Brokers = map[string]string{"mq": testdb.AMQPURL()} // not dialled before Start
			},
			want: slices.Concat([]string{"*ontime.storeMark", "gauges", "*console.Sampler", "*complete.Completer", "*amqp.Publisher", "*deliver.Dispatcher", "*redis.Tier"}, tail),
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Store.Tables = 2
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			n, err := NewNode(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Stop(context.Background()) })
			var got []string
			for _, s := range n.services {
				k := fmt.Sprintf("%T", s)
				if strings.HasSuffix(strings.ToLower(k), "gauges") { // the metrics gauges, wherever they live
					k = "gauges"
				}
				got = append(got, k)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("start order\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}
