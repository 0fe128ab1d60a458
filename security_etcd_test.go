package ontime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

// etcd with authentication on: the node joins with cluster.etcd_username
// and a password read from a file; a wrong password stops NewNode with an
// error naming the key and not showing the password.
func TestEtcdCredentials(t *testing.T) {
	t.Parallel()
	ep := testetcd.Start(t)
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
