package ontime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testca"
)

// The Redis coordinator reaches Redis as the hot tier does: over TLS with
// a private CA and a password, either the hot tier's own Redis (no
// cluster.redis_addrs: its addresses, password file and CA) or addresses
// of its own with cluster.redis_password_file and cluster.redis_ca_file.
// The node leads its one-node cluster either way; without the CA it does
// not start, and no error shows the password.
func TestRedisCoordinatorTLSAndPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, certFile, keyFile := testca.New(t, "redis coordinator CA").Files(t, dir, "redis")
	const pw = "redis-coord-pass-51c7"
	addr := startRedisWithPassword(t, pw, caFile, certFile, keyFile)
	pwFile := filepath.Join(dir, "redis.pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		modify func(c *ontime.Config)
	}{
		{"shares the hot tier's", func(c *ontime.Config) {
			c.Hot.Tier = "redis"
			c.Hot.RedisAddrs = []string{"rediss://" + addr}
			c.Hot.RedisPasswordFile, c.Hot.RedisCAFile = pwFile, caFile
			c.Hot.RedisPrefix = "coordtls1"
		}},
		{"its own", func(c *ontime.Config) {
			c.Cluster.RedisAddrs = []string{"rediss://" + addr}
			c.Cluster.RedisPasswordFile, c.Cluster.RedisCAFile = pwFile, caFile
			c.Cluster.RedisPrefix = "coordtls2"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ontime.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Store.Tables = 2
			cfg.NodeID = "tls-node"
			cfg.Cluster.Coordinator = "redis"
			cfg.Cluster.LeaseTTL = ontime.Duration(time.Second)
			tc.modify(&cfg)
			ctx := context.Background()
			bad := cfg
			bad.Hot.RedisCAFile, bad.Cluster.RedisCAFile = "", ""
			if bad.Hot.Tier == "redis" {
				bad.Hot.Tier = "memory"
			}
			if _, err := ontime.NewNode(ctx, bad); err == nil || strings.Contains(err.Error(), pw) {
				t.Fatalf("without the CA: %v", err)
			}
			node, err := ontime.NewNode(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := node.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer node.Stop(context.Background())
			deadline := time.Now().Add(20 * time.Second)
			for {
				v, err := node.Cluster(ctx)
				if err == nil && v.Leader == "tls-node" && v.Coordinator == "redis" && len(v.Items) > 0 && v.Items[0].Owner == "tls-node" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the node does not lead its cluster through Redis over TLS: %+v %v", v, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
