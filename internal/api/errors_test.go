package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// failing is an engine whose every call fails with err.
type failing struct{ err error }

func (f failing) Submit(context.Context, []task.Spec) ([]submit.Result, error) { return nil, f.err }
func (f failing) Get(context.Context, string) (*task.Task, error)              { return nil, f.err }
func (f failing) Cancel(context.Context, string) (*task.Task, error)           { return nil, f.err }
func (f failing) Requeue(context.Context, string) (*task.Task, error)          { return nil, f.err }
func (f failing) Purge(context.Context, string) (*task.Task, error)            { return nil, f.err }
func (f failing) List(context.Context, store.ListFilter) ([]*task.Task, error) { return nil, f.err }
func (f failing) Ready(context.Context) error                                  { return f.err }

func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// stoppedNode serves the API of a node that was built and stopped without
// ever starting: its engine is not ready and its store is closed.
func stoppedNode(t *testing.T) string {
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	node, err := ontime.NewNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return serve(t, node.HTTPHandler())
}

// TestErrorAnswers: every kind of failure answers its status and the
// envelope {"error": {"code", "field", "message"}} as JSON.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	live := server(t)
	stopped := stoppedNode(t)
	broken := serve(t, api.NewHandler(api.Services{Tasks: failing{errors.New("disk on fire")}}, api.Options{}))
	wrappedNotReady := serve(t, api.NewHandler(api.Services{Tasks: failing{fmt.Errorf("submit: %w", submit.ErrNotReady)}}, api.Options{}))

	code, pending := call(t, "POST", live+"/v1/tasks", `{"topic":"errs","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	if code != 201 {
		t.Fatalf("submit: %d %v", code, pending)
	}
	pendingID := pending["id"].(string)
	big := `{"topic":"t","payload":"` + strings.Repeat("x", 2000) + `"}`
	zeroID := strings.Repeat("0", 26)

	for _, tc := range []struct {
		name, base, method, path, body string
		status                         int
		code, field                    string
		allow                          []string
	}{
		{"invalid field", live, "POST", "/v1/tasks", `{"topic":"has space"}`, 400, "invalid", "topic", nil},
		{"unknown field", live, "POST", "/v1/tasks", `{"topic":"t","colour":"red"}`, 400, "invalid", "colour", nil},
		{"malformed JSON", live, "POST", "/v1/tasks", `{"topic":`, 400, "invalid", "", nil},
		{"malformed id", live, "GET", "/v1/tasks/not-an-id", "", 400, "invalid", "id", nil},
		{"bad query", live, "GET", "/v1/tasks?limit=0", "", 400, "invalid", "limit", nil},
		{"empty batch", live, "POST", "/v1/tasks:batch", `{"tasks":[]}`, 400, "invalid", "tasks", nil},
		{"too large", live, "POST", "/v1/tasks", big, 413, "too_large", "payload", nil},
		{"not found", live, "GET", "/v1/tasks/" + zeroID, "", 404, "not_found", "id", nil},
		{"conflict", live, "POST", "/v1/tasks/" + pendingID + ":requeue", "", 409, "conflict", "", nil},
		{"unknown path", live, "GET", "/v1/nope", "", 404, "not_found", "", nil},
		{"unknown path outside v1", live, "GET", "/nope", "", 404, "not_found", "", nil},
		{"unknown task op", live, "POST", "/v1/tasks/" + zeroID + ":explode", "", 404, "not_found", "", nil},
		{"wrong method", live, "PUT", "/v1/tasks", `{}`, 405, "invalid", "", []string{"GET", "POST"}},
		{"wrong method on a task", live, "PUT", "/v1/tasks/" + zeroID, `{}`, 405, "invalid", "", []string{"GET", "DELETE", "POST", "PATCH"}},
		{"wrong method on batch", live, "GET", "/v1/tasks:batch", "", 405, "invalid", "", []string{"POST"}},
		{"wrong method on cluster", live, "POST", "/v1/cluster", "", 405, "invalid", "", []string{"GET"}},
		{"not ready: submit", stopped, "POST", "/v1/tasks", `{"topic":"t"}`, 503, "unavailable", "", nil},
		{"not ready: batch", stopped, "POST", "/v1/tasks:batch", `{"tasks":[{"topic":"t"}]}`, 503, "unavailable", "", nil},
		{"not ready: readyz", stopped, "GET", "/readyz", "", 503, "unavailable", "", nil},
		{"not ready, wrapped", wrappedNotReady, "POST", "/v1/tasks", `{"topic":"t"}`, 503, "unavailable", "", nil},
		{"internal: get", broken, "GET", "/v1/tasks/" + zeroID, "", 500, "internal", "", nil},
		{"internal: list", broken, "GET", "/v1/tasks", "", 500, "internal", "", nil},
		{"internal: cluster", stopped, "GET", "/v1/cluster", "", 500, "internal", "", nil},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Error *struct {
				Code    *string `json:"code"`
				Field   string  `json:"field"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if err := jsonStrict(raw, &body); err != nil || body.Error == nil || body.Error.Code == nil {
			t.Errorf("%s: body %q is not the error envelope: %v", tc.name, raw, err)
			continue
		}
		e := body.Error
		if resp.StatusCode != tc.status || *e.Code != tc.code || e.Field != tc.field || e.Message == "" {
			t.Errorf("%s: HTTP %d %s; want %d code %q field %q", tc.name, resp.StatusCode, raw, tc.status, tc.code, tc.field)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		if tc.status == 500 && strings.Contains(string(raw), "disk on fire") {
			t.Errorf("%s: an internal cause reached the client: %s", tc.name, raw)
		}
		allow := resp.Header.Get("Allow")
		for _, m := range tc.allow {
			if !strings.Contains(allow, m) {
				t.Errorf("%s: Allow %q lacks %s", tc.name, allow, m)
			}
		}
		if tc.allow == nil && allow != "" {
			t.Errorf("%s: Allow %q on a %d", tc.name, allow, resp.StatusCode)
		}
	}
}

// TestBatchItemErrorsCarryCodes: a batch answers 200 and each failed entry
// carries the same envelope fields as a whole answer.
func TestBatchItemErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	base := server(t)
	big := `{"topic":"t","payload":"` + strings.Repeat("x", 1500) + `"}`
	code, m := call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[{"topic":"ok","target":"http://127.0.0.1:9/t"},{"topic":"bad topic"},`+big+`,{"topic":"t","colour":1}]}`)
	if code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	items := m["tasks"].([]any)
	for i, want := range []struct{ code, field string }{{"", ""}, {"invalid", "topic"}, {"too_large", "payload"}, {"invalid", "colour"}} {
		e, _ := items[i].(map[string]any)["error"].(map[string]any)
		gotCode, _ := e["code"].(string)
		gotField, _ := e["field"].(string)
		if gotCode != want.code || gotField != want.field {
			t.Errorf("item %d: error %v; want code %q field %q", i, e, want.code, want.field)
		}
	}
}

// jsonStrict decodes one JSON value that has no fields beyond v's.
func jsonStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
