package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The receiver must record every task of what ontime sends: one body per
// call, a batch of bodies, and bodies its byte scan does not recognise.
func TestReceiverRecordsEveryTask(t *testing.T) {
	due := time.Date(2026, 11, 23, 21, 0, 0, 123456789, time.UTC)
	body := func(id string) string {
		p, _ := json.Marshal(job{ID: id, Due: due})
		return `{"id":"01SERVERID","topic":"bench","key":"","payload":` + string(p) + `,"due_at":"2026-11-23T21:00:00.123456789Z","attempt":1}`
	}
	var mu sync.Mutex
	got := map[string]time.Time{}
	h, err := startReceiver(func(id string, d time.Time) {
		mu.Lock()
		defer mu.Unlock()
		got[id] = d
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	post := func(b string) int {
		resp, err := http.Post(h.url(), "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(body("one")); c/100 != 2 {
		t.Fatalf("single body answered %d", c)
	}
	if c := post(`{"tasks":[` + body("b1") + "," + body("b2") + "," + body("b3") + `]}`); c != http.StatusOK {
		t.Fatalf("batch answered %d", c)
	}
	// Spaced JSON: not what the scan expects, decoded in full.
	if c := post(`{"payload": {"id": "spaced", "due": "2026-11-23T21:00:00.123456789Z"}}`); c/100 != 2 {
		t.Fatalf("spaced body answered %d", c)
	}
	if c := post(`{"nothing":1}`); c != http.StatusBadRequest {
		t.Fatalf("a body without a job answered %d, want 400", c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"one", "b1", "b2", "b3", "spaced"} {
		if d, ok := got[id]; !ok || !d.Equal(due) {
			t.Errorf("%s: recorded %v (%v), want %v", id, d, ok, due)
		}
	}
	if len(got) != 5 {
		t.Errorf("recorded %d tasks, want 5: %v", len(got), got)
	}
	if pc := h.perCall(); pc != 5.0/3 {
		t.Errorf("tasks per call %.2f, want %.2f (5 tasks in 3 calls answered 2xx, the bad one not counted)", pc, 5.0/3)
	}
}
