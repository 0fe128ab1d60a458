package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// batchRecorder is a receiver of batch calls: it checks each call's
// signature, notes each task's arrival against its due time, and answers
// {"failed": [...]} for the tasks fail picks.
type batchRecorder struct {
	secret string
	fail   func(id string, attempt int) bool

	mu        sync.Mutex
	delivered map[string]int // id → deliveries answered as done
	attempts  map[string]int // id → highest attempt seen
	early     []string
	badSig    int
	calls     int
	most      int
}

func (r *batchRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	var env struct {
		Tasks []struct {
			ID      string    `json:"id"`
			DueAt   time.Time `json:"due_at"`
			Attempt int       `json:"attempt"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := "http://" + req.Host + req.URL.RequestURI()
	sigErr := ontime.VerifySignature(req.Header.Get("Ontime-Signature"), target, body, time.Now(), time.Minute, r.secret)
	var failed []string
	r.mu.Lock()
	r.calls++
	r.most = max(r.most, len(env.Tasks))
	if sigErr != nil {
		r.badSig++
	}
	for _, tk := range env.Tasks {
		if at.Before(tk.DueAt) {
			r.early = append(r.early, fmt.Sprintf("%s attempt %d: %s early", tk.ID, tk.Attempt, tk.DueAt.Sub(at)))
		}
		r.attempts[tk.ID] = max(r.attempts[tk.ID], tk.Attempt)
		if r.fail(tk.ID, tk.Attempt) {
			failed = append(failed, tk.ID)
			continue
		}
		r.delivered[tk.ID]++
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"failed": failed})
}

func (r *batchRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delivered)
}

// TestWebhookBatchDelivery: 5,000 tasks to a destination configured with
// batch 100 — 1,000 due at one instant, 4,000 staggered 0.25 ms apart —
// arrive in signed batch calls of at most 100, every task at or after its
// due time; the tasks the receiver lists as failed on attempt 1 are
// retried and delivered on attempt 2; none is lost.
func TestWebhookBatchDelivery(t *testing.T) {
	t.Parallel()
	rec := &batchRecorder{secret: "s3cret", delivered: map[string]int{}, attempts: map[string]int{},
		fail: func(id string, attempt int) bool { return attempt == 1 && id[len(id)-1] == '7' }}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	_, node := startNode(t, "sqlite", func(cfg *ontime.Config) {
		cfg.Hot.Window = ontime.Duration(5 * time.Second)
		cfg.Delivery.LeaseTTL = ontime.Duration(30 * time.Second)
		cfg.Destinations = map[string]ontime.DestinationConfig{srv.URL: {Batch: 100, Concurrency: 4}}
	})
	ctx := context.Background()
	const n = 5000
	base := time.Now().Add(2 * time.Second)
	ids := map[string]bool{}
	specs := make([]ontime.TaskSpec, 0, 1000)
	for i := range n {
		due := base
		if i >= 1000 {
			due = base.Add(time.Duration(i-1000) * 250 * time.Microsecond)
		}
		specs = append(specs, ontime.TaskSpec{Topic: "e2e.batch", Key: fmt.Sprint(i), DueAt: due, Target: srv.URL + "/hook",
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if len(specs) == cap(specs) {
			res, err := node.SubmitBatch(ctx, specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				ids[r.Task.ID] = true
			}
			specs = specs[:0]
		}
	}
	waitFor(t, 120*time.Second, "every task delivered", func() bool { return rec.count() == n })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.early) > 0 {
		t.Fatalf("%d early deliveries, e.g. %s", len(rec.early), rec.early[0])
	}
	if rec.badSig > 0 {
		t.Errorf("%d of %d calls failed signature verification", rec.badSig, rec.calls)
	}
	if rec.most > 100 || rec.most < 2 {
		t.Errorf("largest batch %d; want 2..100", rec.most)
	}
	dups, retried := 0, 0
	for id := range ids {
		switch c := rec.delivered[id]; {
		case c == 0:
			t.Errorf("task %s lost", id)
		case c > 1:
			dups++
		}
		if id[len(id)-1] == '7' {
			retried++
			if rec.attempts[id] < 2 {
				t.Errorf("task %s failed in its batch and was not retried (attempt %d)", id, rec.attempts[id])
			}
		}
	}
	// At least once is the guarantee: a delivery outliving its lease on a
	// starved machine may come twice; none may be lost.
	t.Logf("%d tasks in %d calls (largest %d); %d retried after \"failed\"; %d delivered twice", n, rec.calls, rec.most, retried, dups)
}

// TestWebhookBatchNon2xxRetriesAll: a batch answered 503 is retried whole,
// then delivered.
func TestWebhookBatchNon2xxRetriesAll(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[int]int{} // attempt → tasks seen
	done := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var env struct {
			Tasks []struct {
				ID      string `json:"id"`
				Attempt int    `json:"attempt"`
			} `json:"tasks"`
		}
		_ = json.NewDecoder(req.Body).Decode(&env)
		mu.Lock()
		defer mu.Unlock()
		fail := false
		for _, tk := range env.Tasks {
			calls[tk.Attempt]++
			fail = fail || tk.Attempt == 1
		}
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		for _, tk := range env.Tasks {
			done[tk.ID] = true
		}
	}))
	defer srv.Close()
	_, node := startNode(t, "sqlite", func(cfg *ontime.Config) {
		cfg.Destinations = map[string]ontime.DestinationConfig{srv.URL: {Batch: 10}}
	})
	specs := make([]ontime.TaskSpec, 30)
	due := time.Now().Add(500 * time.Millisecond)
	for i := range specs {
		specs[i] = ontime.TaskSpec{Topic: "e2e.batch503", Key: fmt.Sprint(i), DueAt: due, Target: srv.URL}
	}
	if _, err := node.SubmitBatch(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "all delivered on a retry", func() bool { mu.Lock(); defer mu.Unlock(); return len(done) == 30 })
	mu.Lock()
	defer mu.Unlock()
	if calls[1] != 30 {
		t.Errorf("attempt 1 reached the receiver for %d of 30 tasks", calls[1])
	}
}
