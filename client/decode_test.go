package client

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/jsonr"
)

// decodeSeeds are answers as the node writes them and the corners the
// fast path leaves to encoding/json.
var decodeSeeds = []string{
	`{"id":"01JD0000000000000000000000","topic":"t","due_at":"2026-11-23T18:00:00.123456789Z","first_due_at":"2026-11-23T18:00:00.123456789Z","payload":{"order":1,"note":"a \"b\""},"max_attempts":3,"status":"pending","attempts":0,"created_at":"2026-11-23T17:00:00Z","updated_at":"2026-11-23T17:00:00Z"}` + "\n",
	`{"id":"x","topic":"t","key":"k","target":"http://h/p","last_error":"boom","payload":null,"max_attempts":-1,"attempts":12,"due_at":"2026-11-23T18:00:00+02:00"}`,
	`{"id":"x","topic":"t \u003c","payload":[1, 2 ,{"a":[]}] , "status":"dead"}`,
	`{"ID":"x"}`, `{"id":null}`, `{"id":"x","extra":1}`, `{"attempts":1.5}`, `{"attempts":1e3}`, `{"attempts":01}`,
	`{"due_at":"2026-13-23T18:00:00Z"}`, `{"due_at":"yesterday"}`, `{"payload":{"a":}}`, `{"payload":tru}`,
	`{"id":"x"} x`, `{"id":"x",}`, `{}`, ` {"id" : "x" } `, `[]`, `null`, ``, `{"id":"\xff"}`,
	`{"tasks":[]}`, `{"tasks":null}`, `{"tasks":[{}]}`,
	`{"tasks":[{"id":"a","topic":"t","payload":{"x":1},"status":"pending"},{"error":{"code":"invalid","field":"topic","message":"is empty"}}]}`,
	`{"tasks":[{"error":{"code":"a"},"error":{"message":"m"}}]}`,
	`{"tasks":[{"id":"a"}],"tasks":[{"error":{"code":"x"}}]}`,
	`{"tasks":[{"id":"a","error":{"code":"x","message":"y"}}]}`,
	`{"tasks":[{"id":"a","created":true},{"error":{"code":"x","message":"y"},"created":false},{"created":true}]}`,
	`{"tasks":[{"id":"a","created":null}]}`, `{"tasks":[{"id":"a","created":1}]}`, `{"tasks":[{"id":"a","created":truex}]}`,
	`{"tasks":[{"created":false,"id":"a","created":true}]}`,
	`{"tasks":[{"id":"a"}],"next_cursor":"01JD"}`, `{"next_cursor":"c","tasks":[]}`,
	`{"error":{"code":"not_found","field":"id","message":"no task has this id"}}`,
	// Minimal batch answers, and the corners of reading them.
	`{"tasks":[{"id":"01JD0000000000000000000000","status":"pending","created":true},{"error":{"code":"invalid","field":"topic","message":"is empty"},"created":false},{"id":"b","status":"done","created":false}]}` + "\n",
	`{"tasks":[{"ID":"a","status":"pending"}]}`, `{"tasks":[{"id":"a","Status":"x"}]}`, `{"tasks":[{"id":"a","extra":{"x":[1,2]},"more":tru}]}`,
	`{"tasks":[{"id":"a","status":null}]}`, `{"tasks":[{"id":"a","status":"pending","status":"done"}]}`,
	// Times, topics, targets and statuses repeated from task to task, then not.
	`{"tasks":[{"id":"a","topic":"t","target":"http://h/1","status":"pending","due_at":"2026-11-23T18:00:00+02:00","first_due_at":"2026-11-23T18:00:00+02:00","created_at":"2026-11-23T17:00:00Z","updated_at":"2026-11-23T17:00:01Z"},` +
		`{"id":"b","topic":"u","target":"http://h/1","status":"done","due_at":"2026-11-23T18:00:00+02:00","first_due_at":"2026-11-23T19:00:00Z","created_at":"2026-11-23T17:00:01Z","updated_at":"2026-11-23T17:00:01Z"},` +
		`{"id":"c","topic":"t","target":"","status":"done","due_at":"2026-11-23T19:00:00Z","created_at":"2026-11-23T17:00:01Z"}]}`,
	`{"tasks":[{"id":"a","due_at":"2026-11-23T18:00:00Z"},{"id":"b","due_at":"2026-11-23T18:00:00+0200"}]}`,
	`{"tasks":[{"id":"a","topic":"t","created_at":"2026-11-23T18:00:00Z"},{"id":"b","topic":"t","created_at":"2026-11-23T18:00:00Z"}],"next_cursor":"c"}`,
}

// TestUnmarshalMatchesEncodingJSON: the fast path gives what
// json.Unmarshal gives, value and error alike, for every answer type.
func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		checkUnmarshal(t, []byte(s))
	}
	// A whole batch answer of the node's shape takes the fast path.
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"01JD0000000000000000000000","topic":"bench","due_at":"2026-11-23T18:00:00.5Z","first_due_at":"2026-11-23T18:00:00.5Z","payload":{"order":7},"max_attempts":25,"status":"pending","attempts":0,"created_at":"2026-11-23T17:00:00.5Z","updated_at":"2026-11-23T17:00:00.5Z","created":true}`)
	}
	b.WriteString("]}\n")
	raw := []byte(b.String())
	checkUnmarshal(t, raw)
	var br apiv1.BatchResponse
	p := scan{Scanner: jsonr.New(raw)}
	if !p.batch(&br) || !p.End() || len(br.Tasks) != 1000 {
		t.Fatal("a batch answer of the node's shape is not taken by the fast path")
	}
	// A whole answer read as a minimal one (a node that did not apply the
	// preference) takes the fast path too, as does a minimal one.
	var mr apiv1.BatchMinimalResponse
	p = scan{Scanner: jsonr.New(raw)}
	if !p.minimalBatch(&mr) || !p.End() || len(mr.Tasks) != 1000 || mr.Tasks[999] != (apiv1.BatchRef{ID: "01JD0000000000000000000000", Status: "pending", Created: true}) {
		t.Fatalf("a whole batch answer read as minimal: %+v", mr.Tasks[len(mr.Tasks)-1])
	}
	b.Reset()
	b.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"01JD0000000000000000000000","status":"pending","created":true}`)
	}
	b.WriteString("]}\n")
	raw = []byte(b.String())
	checkUnmarshal(t, raw)
	mr = apiv1.BatchMinimalResponse{}
	p = scan{Scanner: jsonr.New(raw)}
	if !p.minimalBatch(&mr) || !p.End() || len(mr.Tasks) != 1000 {
		t.Fatal("a minimal batch answer of the node's shape is not taken by the fast path")
	}
}

func checkUnmarshal(t *testing.T, raw []byte) {
	t.Helper()
	for _, mk := range []func() any{
		func() any { return new(apiv1.Task) },
		func() any { return new(apiv1.BatchResponse) },
		func() any { return new(apiv1.ListPage) },
		func() any { return new(apiv1.BatchMinimalResponse) },
	} {
		got, want := mk(), mk()
		gerr, werr := unmarshal(raw, got), json.Unmarshal(raw, want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("%T of %q: error %v; encoding/json %v", got, raw, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%T of %q:\n got %+v\nwant %+v", got, raw, got, want)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkUnmarshal(t, raw) })
}

// BenchmarkUnmarshalBatch: the answer to a batch of 1,000 of one submit,
// as the node writes it (go test ./client -run '^$' -bench UnmarshalBatch).
func BenchmarkUnmarshalBatch(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"01JD%022d","topic":"bench","key":"order-%d","due_at":"2026-11-23T18:00:00.5Z","first_due_at":"2026-11-23T18:00:00.5Z","payload":{"order":%d},"target":"http://127.0.0.1:8080/hook","max_attempts":25,"priority":0,"status":"pending","attempts":0,"created_at":"2026-11-23T17:00:00.123456Z","updated_at":"2026-11-23T17:00:00.123456Z","created":true}`, i, i, i)
	}
	sb.WriteString("]}\n")
	raw := []byte(sb.String())
	for b.Loop() {
		var br apiv1.BatchResponse
		if err := unmarshal(raw, &br); err != nil || len(br.Tasks) != 1000 {
			b.Fatal(err)
		}
	}
}
