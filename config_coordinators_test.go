package ontime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
)

// TestCoordinatorConfigKeys: cluster.coordinator redis and zookeeper are
// validated at load, each error naming its key.
func TestCoordinatorConfigKeys(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) error {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ontime.LoadConfig(f, nil)
		return err
	}
	for _, ok := range []string{
		"cluster: {coordinator: redis, redis_addrs: [\"127.0.0.1:6379\"]}",
		"cluster: {coordinator: redis, redis_addrs: [\"127.0.0.1:26379\"], redis_master_name: mymaster, redis_prefix: orders}",
		"hot: {tier: redis, redis_addrs: [\"127.0.0.1:6379\"]}\ncluster: {coordinator: redis}",
		"cluster: {coordinator: zookeeper, zookeeper_servers: [\"127.0.0.1:2181\"], zookeeper_prefix: /ontime/orders}",
	} {
		if err := load(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"cluster: {coordinator: redis}", "cluster.redis_addrs"},
		{"cluster: {coordinator: redis, redis_addrs: [nohost]}", "cluster.redis_addrs[0]"},
		{"cluster: {coordinator: redis, redis_addrs: [\"redis://u:hunter22@\"]}", "cluster.redis_addrs[0]"},
		{"cluster: {coordinator: redis, redis_addrs: [\"h:1\"], redis_prefix: \"{x}\"}", "cluster.redis_prefix"},
		{"cluster: {coordinator: redis, redis_addrs: [\"h:1\"], redis_password_file: /nonexistent/pw}", "cluster.redis_password_file"},
		{"hot: {tier: redis, redis_addrs: [\"h:1\"]}\ncluster: {coordinator: redis, redis_master_name: m}", "cluster.redis_addrs"},
		{"cluster: {coordinator: redis, redis_addrs: [\"h:1\"], lease_ttl: 10ms}", "cluster.lease_ttl"},
		{"cluster: {coordinator: zookeeper}", "cluster.zookeeper_servers"},
		{"cluster: {coordinator: zookeeper, zookeeper_servers: [zk]}", "cluster.zookeeper_servers[0]"},
		{"cluster: {coordinator: zookeeper, zookeeper_servers: [\"zk:2181\"], zookeeper_prefix: ontime}", "cluster.zookeeper_prefix"},
		{"cluster: {coordinator: zookeeper, zookeeper_servers: [\"zk:2181\"], zookeeper_username: u}", "cluster.zookeeper_username"},
		{"cluster: {coordinator: zookeeper, zookeeper_servers: [\"zk:2181\"], lease_ttl: 500ms}", "cluster.lease_ttl"},
		{"cluster: {coordinator: consul}", "cluster.coordinator"},
	} {
		err := load(tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter22") {
			t.Errorf("the error shows a password: %v", err)
		}
	}
}
