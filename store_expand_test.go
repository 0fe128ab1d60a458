package ontime_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// startExpander starts the expander of a SQLite store of 2 tables in dir
// (a.db), with expand as store.expand_databases; it stops when t ends.
func startExpander(t *testing.T, dir string, expand ...string) (ontime.Config, *ontime.Expander) {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Store.Databases = []string{filepath.Join(dir, "a.db")}
	cfg.Store.ExpandDatabases = expand
	x := ontime.NewExpander(cfg, nil)
	if err := x.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Stop() })
	return cfg, x
}

// TestStoreExpandRoute: POST /v1/store:expand records an expansion and
// runs its copy on the node's expander (GET /v1/store shows it copied);
// a second one while it runs or with other databases is refused with 409,
// a bad body with 400, and a node without an expander answers 409.
func TestStoreExpandRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg, x := startExpander(t, dir)
	node, err := ontime.NewNode(ctx, cfg, ontime.WithExpander(x))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t", Delay: time.Hour, Target: "http://127.0.0.1:1/x"}); err != nil {
			t.Fatal(err)
		}
	}
	var apiErr *client.APIError
	if _, err := c.StoreExpand(ctx, apiv1.StoreExpandRequest{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "name 1 new databases") {
		t.Fatalf("no databases: %v", err)
	}
	b := filepath.Join(dir, "b.db")
	v, err := c.StoreExpand(ctx, apiv1.StoreExpandRequest{Databases: []string{b}})
	if err != nil || v.Expansion == nil || v.Expansion.Phase != "copy" || v.Expansion.To != 2 {
		t.Fatalf("expand: %+v %v", v, err)
	}
	if _, err := c.StoreExpand(ctx, apiv1.StoreExpandRequest{Databases: []string{filepath.Join(dir, "c.db")}}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("another expansion: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := c.StoreStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v.Expansion != nil && v.Expansion.TablesCopied == v.Expansion.Tables && v.Expansion.RowsCopied > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy did not finish: %+v", v.Expansion)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Post(srv.URL+"/v1/store:expand", "application/json", strings.NewReader(`{"databases": ["x"], "cutover": true, "now": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown field: %d", resp.StatusCode)
	}
	for field, body := range map[string]string{"nice": `{"nice": 101}`, "rate": `{"rate": -1}`} {
		resp, err := http.Post(srv.URL+"/v1/store:expand", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e apiv1.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Field != field {
			t.Fatalf("%s: %d %+v", body, resp.StatusCode, e)
		}
	}

	plain := newTestNode(t)
	defer plain.Stop(context.Background())
	srv2 := httptest.NewServer(plain.HTTPHandler())
	defer srv2.Close()
	c2, err := client.New(srv2.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.StoreExpand(ctx, apiv1.StoreExpandRequest{Databases: []string{b}}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "ontime store expand") {
		t.Fatalf("without an expander: %v", err)
	}
}

// TestStoreExpandFromConfig: POST /v1/store:expand without databases takes
// the node's store.expand_databases; each refusal names where the
// databases came from (the body's databases, or the config's key).
func TestStoreExpandFromConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db"), filepath.Join(dir, "c.db")
	start := func(expand ...string) *ontime.Node {
		t.Helper()
		cfg, x := startExpander(t, dir, expand...)
		node, err := ontime.NewNode(ctx, cfg, ontime.WithExpander(x))
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Stop(context.Background()) })
		return node
	}
	n := start(b, c)
	if _, err := n.StoreExpand(ctx, apiv1.StoreExpandRequest{}); err == nil || !strings.Contains(err.Error(), "store.expand_databases: the store has 1 databases; doubling it needs 1 new ones, got 2") {
		t.Fatalf("two databases for one in the config: %v", err)
	}
	if _, err := n.StoreExpand(ctx, apiv1.StoreExpandRequest{Databases: []string{a}}); err == nil || !strings.Contains(err.Error(), "databases[0] is store.databases[0]") || strings.Contains(err.Error(), "store.expand_databases") {
		t.Fatalf("the store's database in the body: %v", err)
	}
	n.Stop(ctx)
	n = start(b)
	v, err := n.StoreExpand(ctx, apiv1.StoreExpandRequest{})
	if err != nil || v.Expansion == nil || v.Expansion.Phase != "copy" || v.Expansion.To != 2 {
		t.Fatalf("expand from the config: %+v %v", v, err)
	}
	bad := ontime.DefaultConfig()
	bad.DataDir = dir
	bad.Store.Databases = []string{a}
	bad.Store.ExpandDatabases = []string{b, b}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "store.expand_databases[1]: the same database as store.expand_databases[0]") {
		t.Fatalf("one database twice: %v", err)
	}
}

// TestEmbeddedNodeSwitchTopology: a program that embeds a node follows an
// expansion's online cutover as ontime serve does — it waits on
// TopologyChanged and calls SwitchTopology — and the node it gets serves
// the grown store with the same handlers: every task submitted before
// answers by ID, those due around the cutover are delivered, and new
// submits go on.
func TestEmbeddedNodeSwitchTopology(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg, x := startExpander(t, dir)
	var mu sync.Mutex
	delivered := map[string]int{}
	node, err := ontime.NewNode(ctx, cfg, ontime.WithExpander(x))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Handle("emb", func(_ context.Context, d *ontime.Delivery) error {
		mu.Lock()
		delivered[d.ID]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var ids, soon []string
	for i := range 60 {
		delay := time.Hour
		if i%2 == 0 {
			delay = 8 * time.Second // due about when the cutover runs
		}
		tk, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "emb", Delay: delay})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
		if i%2 == 0 {
			soon = append(soon, tk.ID)
		}
	}

	// The program's loop: the node it serves with, switched at a cutover.
	var cur atomic.Pointer[ontime.Node]
	cur.Store(node)
	lctx, stop := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() {
		for {
			n := cur.Load()
			select {
			case <-lctx.Done():
				loopDone <- nil
				return
			case <-n.TopologyChanged():
				next, _, err := ontime.SwitchTopology(lctx, n, 10*time.Second, ontime.WithExpander(x))
				if err != nil {
					loopDone <- err
					return
				}
				cur.Store(next)
			}
		}
	}()
	defer func() {
		stop()
		if err := <-loopDone; err != nil {
			t.Errorf("switch: %v", err)
		}
		_ = cur.Load().Stop(context.Background())
	}()

	if _, err := node.StoreExpand(ctx, apiv1.StoreExpandRequest{Databases: []string{filepath.Join(dir, "b.db")}, Cutover: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n := cur.Load()
		if len(n.Config().Store.Databases) == 2 && n.TopologyEpoch() > node.TopologyEpoch() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the embedded node did not switch to the grown store: %v", n.Config().Store.Databases)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := cur.Load()
	for _, id := range ids {
		if _, err := n.Get(ctx, id); err != nil {
			t.Fatalf("get %s after the switch: %v", id, err)
		}
	}
	if _, _, err := n.Submit(ctx, ontime.TaskSpec{Topic: "emb", Delay: time.Hour}); err != nil {
		t.Fatalf("submit after the switch: %v", err)
	}
	for {
		mu.Lock()
		missing := 0
		for _, id := range soon {
			if delivered[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks due around the cutover not delivered", missing, len(soon))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
