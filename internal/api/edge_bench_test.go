package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// echoService answers every submit at once with the task the spec
// describes, so that the benchmarks below measure the HTTP edge alone
// (read, decode, encode, write) and not a store's commit; the whole
// service path is BenchmarkHTTPSubmit in e2e.
type echoService struct{}

func (echoService) Submit(_ context.Context, specs []task.Spec) ([]submit.Result, error) {
	now := time.Now()
	res := make([]submit.Result, len(specs))
	for i, s := range specs {
		res[i].Task = &task.Task{ID: "01JD0000000000000000000000", Topic: s.Topic, Key: s.Key, DueAt: now.Add(time.Hour),
			FirstDueAt: now.Add(time.Hour), Payload: s.Payload, MaxAttempts: 3, Status: task.StatusPending, CreatedAt: now, UpdatedAt: now}
	}
	return res, nil
}
func (echoService) Get(context.Context, string) (*task.Task, error)    { return nil, store.ErrNotFound }
func (echoService) Cancel(context.Context, string) (*task.Task, error) { return nil, store.ErrNotFound }
func (echoService) Requeue(context.Context, string) (*task.Task, error) {
	return nil, store.ErrNotFound
}
func (echoService) Purge(context.Context, string) (*task.Task, error) {
	return nil, store.ErrNotFound
}
func (echoService) List(context.Context, store.ListFilter) ([]*task.Task, error) {
	return nil, nil
}
func (echoService) Ready(context.Context) error { return nil }

// BenchmarkEdgeSubmit is one POST /v1/tasks over a loopback keep-alive
// connection, the engine answering at once.
func BenchmarkEdgeSubmit(b *testing.B) {
	srv := httptest.NewServer(NewHandler(Services{Tasks: echoService{}}, Options{}))
	defer srv.Close()
	body := []byte(`{"topic":"bench","delay":"1h","payload":{"order":12345,"note":"a small payload"}}`)
	hc := srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Post(srv.URL+"/v1/tasks", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatal(resp.Status)
		}
	}
}

// BenchmarkEdgeBatch is one POST /v1/tasks:batch of 1,000 tasks, small
// ones, and ones shaped as the bench's batches (a due time, a target, a
// payload of ~80 bytes) answered whole and minimal (Prefer:
// return=minimal).
func BenchmarkEdgeBatch(b *testing.B) {
	srv := httptest.NewServer(NewHandler(Services{Tasks: echoService{}}, Options{}))
	defer srv.Close()
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	for _, bc := range []struct {
		name, prefer string
		task         func(i int) string
	}{
		{"small", "", func(i int) string {
			return `{"topic":"bench","delay":"1h","payload":{"order":` + strconv.Itoa(i) + `}}`
		}},
		{"bench", "", benchTask(due)},
		{"bench/minimal", "return=minimal", benchTask(due)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var raws []json.RawMessage
			for i := range 1000 {
				raws = append(raws, json.RawMessage(bc.task(i)))
			}
			body, _ := json.Marshal(map[string]any{"tasks": raws})
			hc := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks:batch", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if bc.prefer != "" {
					req.Header.Set("Prefer", bc.prefer)
				}
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}

// benchTask is a task as the bench's batch workload submits it.
func benchTask(due string) func(i int) string {
	return func(i int) string {
		return `{"topic":"bench","due_at":"` + due + `","payload":{"id":"batch-false-12-` + strconv.Itoa(i) + `","due":"` + due + `","keyed":false},"target":"http://127.0.0.1:40123/hook"}`
	}
}
