package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkClusterDrain: 1, 2 and 3 nodes (in one process, so on the same
// 2 cores) on one MariaDB with the database coordinator drain 30,000 tasks
// due at one instant, delivered to a Go handler. The ratio between the
// sub-benchmarks is how delivery scales with nodes here.
//
//	go test ./e2e -run '^$' -bench ClusterDrain -benchtime=1x
func BenchmarkClusterDrain(b *testing.B) {
	for _, nodes := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for range b.N {
				dsn := testdb.MySQL(b)
				var got atomic.Int64
				var last atomic.Int64
				var ns []*ontime.Node
				for i := range nodes {
					cfg := ontime.DefaultConfig()
					cfg.DataDir = b.TempDir()
					cfg.NodeID = fmt.Sprint("bench-", i)
					cfg.Store.Driver, cfg.Store.Databases = "mysql", []string{dsn}
					cfg.Store.Tables, cfg.Store.Segments = 8, 3
					cfg.Cluster.Coordinator = "database"
					cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
					cfg.Hot.Window = ontime.Duration(5 * time.Second)
					n, err := ontime.NewNode(context.Background(), cfg)
					if err != nil {
						b.Fatal(err)
					}
					n.Handle("bench.cluster", func(ctx context.Context, d *ontime.Delivery) error {
						got.Add(1)
						last.Store(time.Now().UnixNano())
						return nil
					})
					if err := n.Start(context.Background()); err != nil {
						b.Fatal(err)
					}
					ns = append(ns, n)
				}
				// Let the leader assign every item.
				deadline := time.Now().Add(30 * time.Second)
				for {
					v, err := ns[0].Cluster(context.Background())
					owned := 0
					if err == nil {
						for _, it := range v.Items {
							if it.Owner != "" {
								owned++
							}
						}
					}
					if err == nil && owned == len(v.Items) && len(v.Nodes) == nodes {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal("cluster never assigned every item")
					}
					time.Sleep(100 * time.Millisecond)
				}
				const total = 30000
				due := time.Now().Add(20 * time.Second) // beyond the window: the owners' scanners claim them
				for i := 0; i < total; i += 1000 {
					specs := make([]ontime.TaskSpec, 1000)
					for j := range specs {
						specs[j] = ontime.TaskSpec{Topic: "bench.cluster", DueAt: due}
					}
					if _, err := ns[(i/1000)%nodes].SubmitBatch(context.Background(), specs); err != nil {
						b.Fatal(err)
					}
				}
				for got.Load() < total && time.Now().Before(due.Add(90*time.Second)) {
					time.Sleep(50 * time.Millisecond)
				}
				drain := time.Unix(0, last.Load()).Sub(due)
				b.ReportMetric(float64(total)/drain.Seconds(), "drain_tasks/s")
				b.ReportMetric(float64(total-got.Load()), "lost")
				for _, n := range ns {
					n.Stop(context.Background())
				}
			}
		})
	}
}
