package client

import (
	"bytes"
	"encoding/json"
	"testing"
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
