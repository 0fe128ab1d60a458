// Package testetcd runs a real single-member etcd in-process for tests
// (go.etcd.io/etcd/server/v3/embed). It is apart from testdb so that only
// the tests that need etcd link its server.
package testetcd

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Start runs etcd on free loopback ports until the test ends and returns
// its client endpoint (host:port).
func Start(t testing.TB) string {
	t.Helper()
	port := func() url.URL {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return url.URL{Scheme: "http", Host: ln.Addr().String()}
	}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	client, peer := port(), port()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("testetcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("testetcd: etcd not ready")
	}
	return client.Host
}
