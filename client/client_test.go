package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

func newClient(t *testing.T, base string) *client.Client {
	t.Helper()
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAPIErrorCarriesCodeAndField: error answers of a real node arrive as
// *APIError with the envelope's code and field.
func TestAPIErrorCarriesCodeAndField(t *testing.T) {
	t.Parallel()
	c := newClient(t, apitest.Start(t, func(cfg *ontime.Config) { cfg.Delivery.MaxPayloadBytes = 100 }))
	ctx := context.Background()
	tk, created, err := c.Submit(ctx, client.TaskRequest{Topic: "client.errs", Delay: "1h", Target: "http://127.0.0.1:9/t"})
	if err != nil || !created {
		t.Fatalf("submit: %v created=%v", err, created)
	}
	_, requeueErr := c.Requeue(ctx, tk.ID)
	_, getErr := c.Get(ctx, strings.Repeat("0", 26))
	_, badErr := c.Get(ctx, "not-an-id")
	_, _, topicErr := c.Submit(ctx, client.TaskRequest{Topic: "bad topic"})
	_, _, bigErr := c.Submit(ctx, client.TaskRequest{Topic: "t", Payload: []byte(`"` + strings.Repeat("x", 200) + `"`)})
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   apiv1.Code
		field  string
	}{
		{"requeue of a pending task", requeueErr, 409, apiv1.CodeConflict, ""},
		{"unknown id", getErr, 404, apiv1.CodeNotFound, "id"},
		{"malformed id", badErr, 400, apiv1.CodeInvalid, "id"},
		{"bad topic", topicErr, 400, apiv1.CodeInvalid, "topic"},
		{"payload too large", bigErr, 413, apiv1.CodeTooLarge, "payload"},
	} {
		var ae *client.APIError
		if !errors.As(tc.err, &ae) {
			t.Errorf("%s: error %v is not an *APIError", tc.name, tc.err)
			continue
		}
		if ae.Status != tc.status || ae.Code != tc.code || ae.Field != tc.field || ae.Message == "" {
			t.Errorf("%s: %+v; want status %d code %q field %q", tc.name, *ae, tc.status, tc.code, tc.field)
		}
		if !client.HasCode(tc.err, tc.code) {
			t.Errorf("%s: HasCode(%q) is false", tc.name, tc.code)
		}
	}
	if !client.IsNotFound(getErr) || client.IsNotFound(requeueErr) {
		t.Error("IsNotFound does not tell a 404 from the rest")
	}
}

// TestAPIErrorDecoding: the envelope is decoded as sent, and an answer that
// is not the envelope (a proxy's page) still becomes an *APIError.
func TestAPIErrorDecoding(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/tasks/proxy" {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","field":"x","message":"try later"}}`))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	_, err := c.Get(context.Background(), "any")
	var ae *client.APIError
	if !errors.As(err, &ae) || *ae != (client.APIError{Status: 503, Code: apiv1.CodeUnavailable, Field: "x", Message: "try later"}) {
		t.Fatalf("envelope decoded as %#v (%v)", ae, err)
	}
	if !strings.Contains(err.Error(), "unavailable") || !strings.Contains(err.Error(), "503") {
		t.Errorf("message %q names neither code nor status", err)
	}
	_, err = c.Get(context.Background(), "proxy")
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.Message != "bad gateway" {
		t.Fatalf("non-envelope answer decoded as %#v (%v)", ae, err)
	}
}

// TestCluster: Cluster reads GET /v1/cluster of an in-process node.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := newClient(t, apitest.Start(t, func(cfg *ontime.Config) { cfg.NodeID = "solo"; cfg.Store.Segments = 3 }))
	v, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v.Node != "solo" || v.Coordinator != "none" || v.Leader != "solo" {
		t.Fatalf("view %+v", v)
	}
	if len(v.Nodes) != 1 || v.Nodes[0].ID != "solo" || !v.Nodes[0].Live || v.Nodes[0].Items != 6 {
		t.Fatalf("nodes %+v; want solo, live, with 2 tables × 3 segments", v.Nodes)
	}
	if len(v.Items) != 6 {
		t.Fatalf("%d items, want 6", len(v.Items))
	}
	for _, it := range v.Items {
		if it.Owner != "solo" || it.Item == "" {
			t.Fatalf("item %+v", it)
		}
	}
}

// TestSubmitBatchMinimal: the minimal batch names the tasks it wrote (and
// the one a key found) by ID and status, with each refused task's error in
// its place; a node that ignores Prefer answers whole views, read into
// the same IDs and statuses.
func TestSubmitBatchMinimal(t *testing.T) {
	t.Parallel()
	base, h := apitest.StartHandler(t, nil)
	reqs := []client.TaskRequest{
		{Topic: "min", Key: "k", Delay: "1h", Target: "http://127.0.0.1:9/t"},
		{Topic: "bad topic"},
		{Topic: "min", Delay: "1h", Target: "http://127.0.0.1:9/t", Payload: json.RawMessage(`{"n":1}`)},
		{Topic: "min", Key: "k", Target: "http://127.0.0.1:9/t"},
	}
	check := func(name string, c *client.Client) []client.BatchRef {
		t.Helper()
		refs, err := c.SubmitBatchMinimal(t.Context(), reqs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(refs) != 4 || refs[1].Error == nil || refs[1].Error.Field != "topic" || refs[1].ID != "" ||
			refs[0].ID == "" || refs[2].ID == "" || refs[0].ID == refs[2].ID || refs[3].ID != refs[0].ID || refs[3].Created {
			t.Fatalf("%s: %+v", name, refs)
		}
		for _, i := range []int{0, 2} {
			got, err := c.Get(t.Context(), refs[i].ID)
			if err != nil || got.Status != refs[i].Status || got.Topic != "min" {
				t.Fatalf("%s: task %d %+v (%v) for %+v", name, i, got, err, refs[i])
			}
		}
		return refs
	}
	refs := check("minimal", newClient(t, base))
	if !refs[0].Created || !refs[2].Created || refs[0].Status != "pending" {
		t.Fatalf("first submit: %+v", refs)
	}
	// The same batch again, through a server that drops the preference:
	// the key's task is found, and the keyless one is a new task.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Prefer")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(old.Close)
	again := check("whole views", newClient(t, old.URL))
	if again[0].ID != refs[0].ID || again[0].Created || !again[2].Created || again[2].ID == refs[2].ID {
		t.Fatalf("second submit %+v, first %+v", again, refs)
	}
}
