package ontime

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	hotredis "github.com/ontimehq/ontime/internal/hot/redis"
)

// checkRedisCoordinator validates cluster.redis_*: its own addresses, or
// the hot tier's when it has none.
func (c *Config) checkRedisCoordinator() error {
	cl := c.Cluster
	if ttl := time.Duration(cl.LeaseTTL); ttl < MinClusterLeaseTTL || ttl > MaxClusterLeaseTTL {
		return fmt.Errorf("cluster.lease_ttl: %s is out of range %s..%s", ttl, MinClusterLeaseTTL, MaxClusterLeaseTTL)
	}
	if len(cl.RedisAddrs) == 0 {
		if len(c.Hot.RedisAddrs) == 0 {
			return errors.New("cluster.redis_addrs: at least one address is needed for cluster.coordinator redis (or hot.redis_addrs to share the hot tier's)")
		}
		if cl.RedisMasterName != "" || cl.RedisPasswordFile != "" || cl.RedisCAFile != "" {
			return errors.New("cluster.redis_addrs: cluster.redis_master_name, redis_password_file and redis_ca_file need addresses of their own")
		}
	}
	if err := (hotredis.ClientConfig{Addrs: cl.RedisAddrs, MasterName: cl.RedisMasterName}).Check("cluster.redis_addrs"); len(cl.RedisAddrs) > 0 && err != nil {
		return err
	}
	if strings.ContainsAny(cl.RedisMasterName, " \t{}") {
		return fmt.Errorf("cluster.redis_master_name: %q must not contain spaces or braces", cl.RedisMasterName)
	}
	if strings.ContainsAny(cl.RedisPrefix, "{} ") {
		return fmt.Errorf("cluster.redis_prefix: %q must not contain braces or spaces", cl.RedisPrefix)
	}
	if strings.Contains(c.NodeID, "|") {
		return fmt.Errorf("node_id: %q must not contain | with cluster.coordinator redis", c.NodeID)
	}
	return nil
}

// checkZooKeeperCoordinator validates cluster.zookeeper_*.
func (c *Config) checkZooKeeperCoordinator() error {
	cl := c.Cluster
	if len(cl.ZooKeeperServers) == 0 {
		return errors.New("cluster.zookeeper_servers: at least one host:port is needed for cluster.coordinator zookeeper")
	}
	for i, s := range cl.ZooKeeperServers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("cluster.zookeeper_servers[%d]: %q is not host:port", i, s)
		}
	}
	if p := cl.ZooKeeperPrefix; p != "" && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//")) {
		return fmt.Errorf("cluster.zookeeper_prefix: %q must be an absolute znode path without a trailing slash", p)
	}
	if (cl.ZooKeeperUsername == "") != (cl.ZooKeeperPasswordFile == "") {
		return errors.New("cluster.zookeeper_username: give it with cluster.zookeeper_password_file, or neither")
	}
	// A session's timeout is whole milliseconds; ZooKeeper's servers
	// allow 2..20 ticks by default (4s..40s at tickTime 2s).
	if ttl := time.Duration(cl.LeaseTTL); ttl < time.Second || ttl > MaxClusterLeaseTTL {
		return fmt.Errorf("cluster.lease_ttl: %s is out of range 1s..%s for zookeeper", ttl, MaxClusterLeaseTTL)
	}
	if strings.Contains(c.NodeID, "/") {
		return fmt.Errorf("node_id: %q must not contain / with cluster.coordinator zookeeper", c.NodeID)
	}
	return nil
}

// redisCoordinatorClient is how the Redis coordinator reaches Redis: its
// own cluster.redis_* settings, or the hot tier's.
func (n *Node) redisCoordinatorClient() (hotredis.ClientConfig, string, error) {
	cl, hot := n.cfg.Cluster, n.cfg.Hot
	prefix := cl.RedisPrefix
	if prefix == "" {
		prefix = hot.RedisPrefix
	}
	if len(cl.RedisAddrs) == 0 {
		var tlsCfg *tls.Config
		if hot.RedisCAFile != "" {
			var err error
			if tlsCfg, err = tlsFiles("hot.redis", hot.RedisCAFile, "", ""); err != nil {
				return hotredis.ClientConfig{}, "", err
			}
		}
		return hotredis.ClientConfig{Addrs: hot.RedisAddrs, Password: n.sec.redisPassword, TLS: tlsCfg}, prefix, nil
	}
	var tlsCfg *tls.Config
	if cl.RedisCAFile != "" {
		var err error
		if tlsCfg, err = tlsFiles("cluster.redis", cl.RedisCAFile, "", ""); err != nil {
			return hotredis.ClientConfig{}, "", err
		}
	}
	return hotredis.ClientConfig{Addrs: cl.RedisAddrs, MasterName: cl.RedisMasterName, Password: n.sec.coordRedisPassword, TLS: tlsCfg}, prefix, nil
}
