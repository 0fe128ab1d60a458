package ontime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// Results (issue 29 item 6): a webhook's 2xx JSON answer and a Go
// handler's SetResult are kept with the done task and shown by
// GET /v1/tasks/{id}; answers that are not JSON, too long, or come with
// a failure are not; retention.done removes them with the task.
func TestResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, ` {"charged": 42, "id": "tx-1"} `)
		case "/problem":
			w.Header().Set("Content-Type", "application/problem+json")
			io.WriteString(w, `["ok"]`)
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, `{"not":"kept"}`)
		case "/big":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `"`+strings.Repeat("x", 200)+`"`)
		case "/bad":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"unterminated": `)
		}
	}))
	defer rcv.Close()
	node := fastNode(t, func(cfg *ontime.Config) {
		cfg.Delivery.MaxResultBytes = 100
		cfg.Retention.Done = ontime.Duration(2 * time.Second)
	}, func(n *ontime.Node) {
		must(t, n.Handle("h.result", func(ctx context.Context, d *ontime.Delivery) error {
			if err := d.SetResult(strings.Repeat("y", 200)); !errors.Is(err, ontime.ErrResultTooLarge) {
				t.Errorf("SetResult over the limit: %v", err)
			}
			if err := d.SetResult(json.RawMessage(`{bad`)); err == nil {
				t.Error("SetResult of invalid JSON: no error")
			}
			return d.SetResult(map[string]any{"rows": 3, "key": d.Key})
		}))
		must(t, n.Handle("h.fails", func(ctx context.Context, d *ontime.Delivery) error {
			_ = d.SetResult("partial")
			return ontime.Permanent(errors.New("no"))
		}))
		must(t, n.Handle("h.none", func(ctx context.Context, d *ontime.Delivery) error { return nil }))
	})
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	submit := func(topic, target string) string {
		tk, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: topic, Key: "k-" + topic + target, Target: target})
		must(t, err)
		return tk.ID
	}
	cases := []struct {
		id, status, result string
	}{
		{submit("w", rcv.URL+"/json"), "done", `{"charged":42,"id":"tx-1"}`}, // kept compact
		{submit("w", rcv.URL+"/problem"), "done", `["ok"]`},
		{submit("w", rcv.URL+"/text"), "done", ``},
		{submit("w", rcv.URL+"/big"), "done", ``},
		{submit("w", rcv.URL+"/bad"), "done", ``},
		{submit("h.result", ""), "done", `{"key":"k-h.result","rows":3}`},
		{submit("h.fails", ""), "dead", ``},
		{submit("h.none", ""), "done", ``},
	}
	for _, c := range cases {
		tk := statusIs(t, node, c.id, c.status)
		if string(tk.Result) != c.result {
			t.Errorf("task %s (%s): result %s, want %s", c.id, c.status, tk.Result, c.result)
		}
		// The API's view shows it as the JSON value itself.
		resp, err := http.Get(srv.URL + "/v1/tasks/" + c.id)
		must(t, err)
		var v map[string]json.RawMessage
		must(t, json.NewDecoder(resp.Body).Decode(&v))
		resp.Body.Close()
		if got, ok := v["result"]; c.result == "" && ok || c.result != "" && string(got) != c.result {
			t.Errorf("GET %s: result %s (present %v), want %s", c.id, got, ok, c.result)
		}
	}
	// retention.done: the done tasks and their results go.
	waitUntil(t, "retention of the done tasks", func() bool {
		_, err := node.Get(ctx, cases[0].id)
		return errors.Is(err, ontime.ErrNotFound)
	})
}

// delivery.max_result_bytes is judged with the field named.
func TestResultConfig(t *testing.T) {
	for _, v := range []int{-1, 1<<20 + 1} {
		cfg := ontime.DefaultConfig()
		cfg.Delivery.MaxResultBytes = v
		cfg.Store.Databases = []string{"x.db"}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "delivery.max_result_bytes") {
			t.Errorf("max_result_bytes %d: %v", v, err)
		}
	}
	cfg := ontime.DefaultConfig()
	if cfg.Delivery.MaxResultBytes != 4096 {
		t.Fatalf("default max_result_bytes %d", cfg.Delivery.MaxResultBytes)
	}
	cfg.Delivery.MaxResultBytes = 0
	cfg.Store.Databases = []string{"x.db"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod   func(*ontime.Config)
		field string
	}{
		{func(c *ontime.Config) { c.Operations.PageSize = 5 }, "operations.page_size"},
		{func(c *ontime.Config) { c.Operations.PageSize = 20000 }, "operations.page_size"},
		{func(c *ontime.Config) { c.Operations.PagePause = ontime.Duration(-time.Second) }, "operations.page_pause"},
		{func(c *ontime.Config) { c.Operations.PagePause = ontime.Duration(time.Minute) }, "operations.page_pause"},
	} {
		cfg := ontime.DefaultConfig()
		c.mod(&cfg)
		cfg.Store.Databases = []string{"x.db"}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
}
