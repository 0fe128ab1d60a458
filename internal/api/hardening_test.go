package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
	"github.com/ontimehq/ontime/internal/testdb"
)

// endless is a body that never ends: a JSON prefix, then filler bytes,
// made as they are read, counting how many were.
type endless struct {
	prefix string
	filler byte
	read   atomic.Int64
	max    int64 // stop (EOF) after this many, so a broken server cannot hang the test
}

func (e *endless) Read(p []byte) (int, error) {
	n0 := e.read.Load()
	if n0 >= e.max {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), e.max-n0)]
	for i := range p {
		if off := n0 + int64(i); off < int64(len(e.prefix)) {
			p[i] = e.prefix[off]
		} else {
			p[i] = e.filler
		}
	}
	e.read.Add(int64(len(p)))
	return len(p), nil
}

// TestBodyLimitsAreStreamed: a body far over an endpoint's limit is
// answered 413 once the limit is crossed; the server stops reading there,
// so what the client got to send stays near the limit (plus what the
// sockets' buffers hold), not the gigabytes it was ready to.
func TestBodyLimitsAreStreamed(t *testing.T) {
	t.Parallel()
	const batchLimit = 1 << 20
	base := apitest.Start(t, func(c *ontime.Config) {
		c.Delivery.MaxPayloadBytes = 1000
		c.HTTP.MaxBatchBytes = batchLimit
	})
	const offer = 4 << 30 // what the client would send
	const slack = 32 << 20
	for _, tc := range []struct {
		path, prefix, field string
		limit               int64
	}{
		{"/v1/tasks:batch", `{"tasks":[{"topic":"big","payload":"`, "tasks", batchLimit},
		// Many small tasks: the byte budget, not the task count, stops it.
		{"/v1/tasks:batch", `{"tasks":[`, "tasks", batchLimit},
		{"/v1/tasks", `{"topic":"big","payload":"`, "payload", 1000 + 64<<10},
	} {
		body := &endless{prefix: tc.prefix, filler: 'x', max: offer}
		if tc.prefix == `{"tasks":[` {
			body.filler = ' ' // white space between tokens is read as it comes
		}
		req, _ := http.NewRequest("POST", base+tc.path, body)
		req.ContentLength = -1 // streamed, chunked: the server cannot refuse it up front
		resp, err := http.DefaultClient.Do(req)
		sent := body.read.Load()
		if err != nil {
			t.Fatalf("%s: %v (after %d bytes)", tc.prefix, err, sent)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(raw), `"too_large"`) || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: HTTP %d %s; want 413 too_large on %s", tc.prefix, resp.StatusCode, raw, tc.field)
		}
		t.Logf("%s: %d bytes sent for a limit of %d", tc.path, sent, tc.limit)
		if sent < tc.limit || sent > tc.limit+slack {
			t.Errorf("%s: the client sent %d bytes for a limit of %d; want at most %d", tc.prefix, sent, tc.limit, tc.limit+slack)
		}
	}
	// Within the budget a batch still works, and nothing was written above.
	code, m := call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[{"topic":"ok","delay":"1h"}]}`)
	if code != 200 {
		t.Fatalf("small batch: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/v1/tasks?topic=big", ""); code != 200 || len(m["tasks"].([]any)) != 0 {
		t.Fatalf("an over-limit body wrote tasks: %d %v", code, m)
	}
}

// TestInvalidUTF8 is refused naming the field, in a submit and in a batch
// entry, instead of being turned into U+FFFD.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	base := server(t)
	for _, tc := range []struct{ body, field string }{
		{"{\"topic\":\"u\",\"key\":\"k\xff\"}", "key"},
		{"{\"topic\":\"u\xc3\"}", "topic"},
		{"{\"topic\":\"u\",\"target\":\"http://x/\xfe\"}", "target"},
		{"{\"topic\":\"u\",\"payload\":{\"a\":\"\xff\"}}", "payload"},
		{"{\"topic\":\"u\",\"delay\":\"1\xffs\"}", "delay"},
		{"{\"topic\":\"u\",\"k\xffy\":1}", ""},
	} {
		code, m := call(t, "POST", base+"/v1/tasks", tc.body)
		if code != 400 || errField(m) != tc.field {
			t.Errorf("%q: HTTP %d field %q %v; want 400 naming %q", tc.body, code, errField(m), m, tc.field)
		}
	}
	code, m := call(t, "POST", base+"/v1/tasks:batch", "{\"tasks\":[{\"topic\":\"u\",\"key\":\"good\",\"target\":\"http://127.0.0.1:9/t\"},{\"topic\":\"u\",\"key\":\"bad\xff\"}]}")
	if code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	items := m["tasks"].([]any)
	if items[0].(map[string]any)["id"] == nil {
		t.Fatalf("the valid entry was not written: %v", items[0])
	}
	if e, _ := items[1].(map[string]any)["error"].(map[string]any); e == nil || e["field"] != "key" || e["code"] != "invalid" {
		t.Fatalf("the invalid entry: %v", items[1])
	}
	// The only task written is the valid one; U+FFFD would have made a second.
	if _, l := call(t, "GET", base+"/v1/tasks?topic=u", ""); len(l["tasks"].([]any)) != 1 {
		t.Fatalf("tasks written: %v", l)
	}
}

// TestMalformedQueries: what net/url would drop in silence, or an empty
// filter that would mean "no filter", is 400 naming the parameter.
func TestMalformedQueries(t *testing.T) {
	t.Parallel()
	base := server(t)
	for _, tc := range []struct{ query, field string }{
		{"%zz=1", ""},
		{"status=%zz", "status"},
		{"topic=a;b", "topic"},
		{"topic=%ff", "topic"},
		{"status=", "status"},
		{"topic=", "topic"},
		{"limit=", "limit"},
		{"cursor=", "cursor"},
		{"status=pending&status=dead", "status"},
		{"topic=a&colour=red", "colour"},
	} {
		if code, m := call(t, "GET", base+"/v1/tasks?"+tc.query, ""); code != 400 || errField(m) != tc.field {
			t.Errorf("?%s: HTTP %d %v; want 400 naming %q", tc.query, code, m, tc.field)
		}
	}
	// Every route refuses a query it cannot read.
	if code, m := call(t, "GET", base+"/v1/tasks/"+strings.Repeat("0", 26)+"?%zz", ""); code != 400 {
		t.Errorf("get with a malformed query: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/v1/tasks?status=pending&limit=5", ""); code != 200 {
		t.Errorf("a valid query: %d %v", code, m)
	}
}

// TestStoreDown503: a node on a real PostgreSQL cut off by a proxy answers
// submits 503 "unavailable" with Retry-After, not 500; once the database
// is reachable again, the same node accepts submits.
func TestStoreDown503(t *testing.T) {
	t.Parallel()
	dsn, proxy := testdb.ProxyDSN(t, "postgres", testdb.Postgres(t))
	base := apitest.Start(t, func(c *ontime.Config) {
		c.Store.Driver = "postgres"
		c.Store.Databases = []string{dsn}
	})
	submit := func(key string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(`{"topic":"down","delay":"1h","target":"http://127.0.0.1:9/t","key":"`+key+`"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(raw)
	}
	if resp, raw := submit("before"); resp.StatusCode != 201 {
		t.Fatalf("submit while up: %d %s", resp.StatusCode, raw)
	}

	proxy.Down()
	for i := range 3 {
		resp, raw := submit(fmt.Sprintf("during-%d", i))
		if resp.StatusCode != 503 || !strings.Contains(raw, `"code":"unavailable"`) {
			t.Fatalf("submit %d while the store is down: %d %s; want 503 unavailable", i, resp.StatusCode, raw)
		}
		if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("503 without a Retry-After: %q", ra)
		}
	}
	for _, path := range []string{"/v1/tasks?topic=down", "/readyz"} {
		if code, m := call(t, "GET", base+path, ""); code != 503 {
			t.Errorf("GET %s while the store is down: %d %v", path, code, m)
		}
	}

	proxy.Up()
	// The pools may hold a connection or two that died with the proxy;
	// database/sql drops them on first use (the keyed submits and the
	// list use different pools on PostgreSQL: each drops its own).
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, raw := submit("after")
		if resp.StatusCode == 201 {
			break
		}
		if resp.StatusCode != 503 || time.Now().After(deadline) {
			t.Fatalf("submit after the store is back: %d %s", resp.StatusCode, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		code, m := call(t, "GET", base+"/v1/tasks?topic=down", "")
		if code == 200 {
			if len(m["tasks"].([]any)) != 2 {
				t.Fatalf("tasks after recovery: %v; want before and after", m)
			}
			break
		}
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("tasks after recovery: %d %v; want before and after", code, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
