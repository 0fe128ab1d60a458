package ontime_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testca"
)

// etcd with authentication on: the node joins with cluster.etcd_username
// and a password read from a file; a wrong password stops NewNode with an
// error naming the key and not showing the password.
func TestEtcdCredentials(t *testing.T) {
	t.Parallel()
	// bcrypt at its lowest cost: the embedded server is built with -race,
	// and at the default cost one password check took over the client's
	// 5 s dial timeout when the package's tests ran together.
	ep := startEtcd(t, func(c *embed.Config) { c.BcryptCost = 4 }).Host
	const password = "etcd-root-pass-4e1b9"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", password); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()
	ctx = context.Background()
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "etcd.pw")
	os.WriteFile(pwFile, []byte(password+"\n"), 0o600)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Cluster.Coordinator = "etcd"
	cfg.Cluster.EtcdEndpoints = []string{ep}
	cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
	cfg.Cluster.EtcdUsername = "root"

	bad := cfg
	bad.Cluster.EtcdPassword = "wrong-" + password
	if _, err := ontime.NewNode(ctx, bad); err == nil || !strings.Contains(err.Error(), "cluster") || strings.Contains(err.Error(), password) {
		t.Fatalf("wrong password: %v", err)
	}
	cfg.Cluster.EtcdPasswordFile = pwFile
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatalf("with the password file: %v", err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	for deadline := time.Now().Add(20 * time.Second); ; {
		v, err := node.Cluster(ctx)
		if err == nil && v.Leader != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader elected through the authenticated client: %v %+v", err, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// etcd over TLS with client certificates: the node trusts the CA of
// cluster.etcd_ca_file and presents cluster.etcd_cert_file/key_file;
// without its certificate it is refused.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "etcd test CA")
	caFile, srvCert, srvKey := ca.Files(t, dir, "etcd-server")
	_, cliCert, cliKey := ca.Files(t, dir, "etcd-client")
	client := startEtcd(t, func(c *embed.Config) {
		c.ClientTLSInfo = transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: caFile, ClientCertAuth: true}
	})
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Cluster.Coordinator = "etcd"
	cfg.Cluster.EtcdEndpoints = []string{client.String()}
	cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
	cfg.Cluster.EtcdCAFile = caFile
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := ontime.NewNode(ctx, cfg); err == nil {
		t.Fatal("joined without a client certificate")
	}
	cfg.Cluster.EtcdCertFile, cfg.Cluster.EtcdKeyFile = cliCert, cliKey
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	for deadline := time.Now().Add(20 * time.Second); ; {
		if v, err := node.Cluster(ctx); err == nil && v.Leader != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader elected over TLS")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startEtcd runs a single-member etcd on free loopback ports, as
// testetcd.Start does, with mod applied (https client URL when mod sets
// client TLS), and returns its client URL.
func startEtcd(t *testing.T, mod func(*embed.Config)) url.URL {
	t.Helper()
	freeURL := func(scheme string) url.URL {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return url.URL{Scheme: scheme, Host: ln.Addr().String()}
	}
	ecfg := embed.NewConfig()
	ecfg.Dir = t.TempDir()
	ecfg.LogLevel = "error"
	mod(ecfg)
	scheme := "http"
	if !ecfg.ClientTLSInfo.Empty() {
		scheme = "https"
	}
	client, peer := freeURL(scheme), freeURL("http")
	ecfg.ListenClientUrls, ecfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ecfg.ListenPeerUrls, ecfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ecfg.InitialCluster = ecfg.InitialClusterFromName(ecfg.Name)
	e, err := embed.StartEtcd(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	return client
}
