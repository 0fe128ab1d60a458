package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/halves"
)

// appendTaskRequest writes json.Marshal's bytes, and fails where it fails.
func TestAppendTaskRequestIsMarshal(t *testing.T) {
	for _, tr := range []TaskRequest{{}, {Topic: "t"}, {Topic: "a<b>&", Key: "k\n\u2028", DueAt: "2030-01-01T00:00:00Z", Delay: "5s",
		Payload: json.RawMessage(`{ "x" : "<&>" }`), Target: "http://h/p?a=1&b=2", MaxAttempts: -3, IfExists: "replace"},
		{Topic: "t", Payload: json.RawMessage(`null`)}, {Topic: "bad\xff"}} {
		want, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendTaskRequest(nil, &tr)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %s (%v)\nwant %s", tr, got, err, want)
		}
	}
	_, want := json.Marshal(TaskRequest{Topic: "t", Payload: json.RawMessage(`{bad`)})
	if _, err := appendTaskRequest(nil, &TaskRequest{Topic: "t", Payload: json.RawMessage(`{bad`)}); err == nil || err.Error() != want.Error() {
		t.Errorf("invalid payload: got %v, want json.Marshal's %v", err, want)
	}
}

// TestBatchBodyIsMarshal: a batch's body, however many tasks (encoded in
// two halves from halves.From on), is json.Marshal's of the request, and
// a batch with bad payloads fails with the first one's error.
func TestBatchBodyIsMarshal(t *testing.T) {
	for _, n := range []int{0, 1, halves.From - 1, halves.From, halves.From + 1, 1000} {
		ts := make([]TaskRequest, n)
		for i := range ts {
			ts[i] = TaskRequest{Topic: "t", Key: fmt.Sprintf("k<%d>", i), Delay: "1h", Payload: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}
		}
		got, err := batchBody(ts)
		if err != nil {
			t.Fatal(err)
		}
		raws := make([]json.RawMessage, n)
		for i := range ts {
			if raws[i], err = json.Marshal(ts[i]); err != nil {
				t.Fatal(err)
			}
		}
		want, err := json.Marshal(apiv1.BatchRequest{Tasks: raws})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			want = []byte(`{"tasks":[]}`) // a nil slice marshals as null; the client sends an empty batch as []
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d tasks:\n got %s\nwant %s", n, got, want)
		}
		if n < 2 {
			continue
		}
		bad := func(i int) { ts[i].Payload = json.RawMessage(fmt.Sprintf(`{"bad %d"`, i)) }
		bad(n - 1)
		bad(n / 3)
		_, want2 := json.Marshal(ts[n/3])
		if _, err := batchBody(ts); err == nil || err.Error() != want2.Error() {
			t.Fatalf("%d tasks, bad payloads at %d and %d: %v, want the first's %v", n, n/3, n-1, err, want2)
		}
	}
}
