package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/client"
)

// The floor's answer is a task the Go client decodes, as ontime's is.
func TestCannedTaskDecodes(t *testing.T) {
	b, err := cannedTask()
	if err != nil {
		t.Fatal(err)
	}
	var task client.Task
	if err := json.Unmarshal(b, &task); err != nil || task.ID != floorTaskID || task.Status != "pending" {
		t.Fatalf("canned task %s: %+v, %v", b, task, err)
	}
}

// The floor's webhook calls reach the receiver and are recorded as a
// burst's tasks are.
func TestPostHookIsRecorded(t *testing.T) {
	rec := newRecorder()
	h, err := startReceiver(rec.rec)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	hc := hookClient(4)
	defer hc.CloseIdleConnections()
	due := time.Now().Truncate(time.Millisecond)
	for i := range 3 {
		if err := postHook(context.Background(), hc, 10*time.Second, h.url(), i, due); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rec.state(); n != 3 || h.perCall() != 1 {
		t.Fatalf("received %d tasks, %.1f per call; want 3, 1", n, h.perCall())
	}
	if rec.early > 0 {
		t.Fatalf("%d early: the due instant did not round-trip", rec.early)
	}
}

func TestFloorSectionRenders(t *testing.T) {
	if s := (reportInfo{}).floorSection(false); s != "" {
		t.Fatalf("no floor, section %q", s)
	}
	hook := &result{N: 50000, DrainPerSec: 25000, P99: 2 * time.Second}
	ri := reportInfo{floor: &floorFigures{Enq: enqRates{Single: 10000, Single4: 20000, Single16: 25000}, Hook: hook, Concurr: 32},
		results: []result{
			{System: "ontime service (SQLite)", Path: "service (HTTP + webhook)", Workload: "burst", Enq: enqRates{Single: 2500, Single4: 5000, Single16: 7500}, DrainPerSec: 12500, P99: 4 * time.Second, PerCall: 1},
			{System: "asynq tuned", Path: "Go client + Go handler", Workload: "burst", Enq: enqRates{Single: 16000, Single4: 30000, Single16: 50000}},
		}}
	s := ri.floorSection(false)
	brief := ri.floorSection(true)
	if strings.Contains(brief, "16 clients 0.30×") || !strings.Contains(brief, "≥ 49,500/s, **1.98×** the floor's drain") {
		t.Errorf("brief section keeps per-system lines or drops the goals:\n%s", brief)
	}
	for _, want := range []string{"16 clients 0.30×", "1.5× asynq tuned's 50,000/s = 75,000/s is **3.00×** the floor's 25,000/s",
		"drain 0.50× (12,500/s), p99 2.00×", "≥ 49,500/s, **1.98×** the floor's drain"} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
}
