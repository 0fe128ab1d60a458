// Package brokertest is the contract suite of a broker publisher: every
// kind under internal/deliver/broker passes Run against its real server.
// It holds a publisher to what broker.Publisher promises: the message
// arrives with its body and ontime-* headers; success is the broker's
// acknowledgement, never "written to a socket"; a refusal is an error of
// its own publish with the broker's reason; a connection lost before the
// acknowledgement is ErrConnLost, and the publisher reconnects by itself;
// a broker that is down or silent costs an error within the caller's
// context, never a hang; Stop is idempotent.
//
// Each test makes its own destination (stream, subject, exchange and
// queue, topic, key) with a unique name, runs in parallel and removes what
// it made. Outages are faked by a testdb.Proxy between the publisher and
// the shared server.
package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Harness is one kind of broker under test.
type Harness struct {
	// Kind is the kind as the composition root registers it; the suite
	// builds every publisher with Kind.New.
	Kind broker.Kind
	// URL is the real server's, with one host:port.
	URL string
	// Destination makes a destination no other test uses, read live by a
	// consumer that feeds r, and returns the ADDRESS of mq://NAME/ADDRESS
	// that reaches it. It removes what it made when t ends.
	Destination func(t *testing.T, r *Receiver) (address string)
	// Refused makes addresses the broker refuses or cannot route, each
	// with a fragment of the reason a publish's error must carry.
	Refused func(t *testing.T) []Refusal
	// MessageID: the kind carries Message.ID as the broker's own message
	// ID (AMQP message_id, NATS Nats-Msg-Id), which the consumer reports as
	// Received.ID.
	MessageID bool
}

// Refusal is an address the broker refuses, and why.
type Refusal struct{ Address, Reason string }

// Received is a message as a consumer got it.
type Received struct {
	ID      string // the broker's message ID, where the kind has one
	Body    []byte
	Headers map[string]string
}

// Receiver collects what a destination's consumer received.
type Receiver struct {
	mu   sync.Mutex
	msgs []Received
	more chan struct{} // closed and replaced on every Add
}

// NewReceiver returns an empty receiver.
func NewReceiver() *Receiver { return &Receiver{more: make(chan struct{})} }

// Add records a message; consumers call it from any goroutine.
func (r *Receiver) Add(m Received) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	close(r.more)
	r.more = make(chan struct{})
}

// waitFor returns the messages received once ok holds for them, failing t
// after patience.
func (r *Receiver) waitFor(t *testing.T, what string, ok func([]Received) bool) []Received {
	t.Helper()
	deadline := time.After(patience)
	for {
		r.mu.Lock()
		msgs, more := append([]Received(nil), r.msgs...), r.more
		r.mu.Unlock()
		if ok(msgs) {
			return msgs
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: not received within %s (%d messages so far)", what, patience, len(msgs))
		}
	}
}

// byID waits until every id was received and returns the first message of
// each.
func (r *Receiver) byID(t *testing.T, ids ...string) map[string]Received {
	t.Helper()
	var got map[string]Received
	r.waitFor(t, fmt.Sprintf("%d messages", len(ids)), func(msgs []Received) bool {
		got = map[string]Received{}
		for _, m := range msgs {
			id := m.Headers[broker.HeaderTaskID]
			if _, ok := got[id]; !ok {
				got[id] = m
			}
		}
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
	return got
}

// patience bounds every wait of the suite that would otherwise hang; it is
// no measure of speed.
const patience = 30 * time.Second

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("DeliversBodyAndHeaders", func(t *testing.T) {
		t.Parallel()
		r := NewReceiver()
		addr := h.Destination(t, r)
		p := h.start(t, h.URL)
		if p.Kind() == "" {
			t.Error("Kind() is empty")
		}
		if err := p.CheckAddress(addr); err != nil {
			t.Fatalf("CheckAddress(%q): %v", addr, err)
		}
		m := message("task-1", "k/ü 1", `{"n":1,"s":"ü"}`)
		if err := p.Publish(ctxFor(t), addr, m); err != nil {
			t.Fatalf("publish: %v", err)
		}
		got := r.byID(t, m.ID)[m.ID]
		if !bytes.Equal(got.Body, m.Body) {
			t.Errorf("body %s, want %s", got.Body, m.Body)
		}
		for _, hd := range m.Headers {
			if v, ok := got.Headers[hd.Name]; !ok || v != hd.Value {
				t.Errorf("header %s = %q (present %v), want %q", hd.Name, v, ok, hd.Value)
			}
		}
		if h.MessageID && got.ID != m.ID {
			t.Errorf("broker message ID %q, want %q", got.ID, m.ID)
		}
		if v, ok := got.Headers[broker.HeaderTraceparent]; ok {
			t.Errorf("an untraced message carries %s %q", broker.HeaderTraceparent, v)
		}
	})

	t.Run("CarriesTraceparent", func(t *testing.T) {
		t.Parallel()
		r := NewReceiver()
		addr := h.Destination(t, r)
		p := h.start(t, h.URL)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		one := message("traced-1", "k", `1`)
		one.Traceparent = tp
		if err := p.Publish(ctxFor(t), addr, one); err != nil {
			t.Fatalf("publish: %v", err)
		}
		ids := []string{one.ID}
		if bp, ok := p.(broker.BatchPublisher); ok {
			two := message("traced-2", "k", `2`)
			two.Traceparent = tp
			if errs := bp.PublishBatch(ctxFor(t), addr, []*broker.Message{two}); errs[0] != nil {
				t.Fatalf("publish batch: %v", errs[0])
			}
			ids = append(ids, two.ID)
		}
		got := r.byID(t, ids...)
		for _, id := range ids {
			if v := got[id].Headers[broker.HeaderTraceparent]; v != tp {
				t.Errorf("%s: header %s = %q, want %q", id, broker.HeaderTraceparent, v, tp)
			}
		}
	})

	t.Run("ConcurrentPublishes", func(t *testing.T) {
		t.Parallel()
		r := NewReceiver()
		addr := h.Destination(t, r)
		p := h.start(t, h.URL)
		ctx := ctxFor(t)
		const n = 200
		var ids []string
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			id := fmt.Sprintf("one-%d", i)
			ids = append(ids, id)
			wg.Go(func() { errs[i] = p.Publish(ctx, addr, message(id, "k", `"`+id+`"`)) })
		}
		// A batch publisher's batch, alongside.
		if bp, ok := p.(broker.BatchPublisher); ok {
			var batch []*broker.Message
			for i := range 100 {
				id := fmt.Sprintf("batch-%d", i)
				ids = append(ids, id)
				batch = append(batch, message(id, "k", `"`+id+`"`))
			}
			wg.Go(func() {
				for i, err := range bp.PublishBatch(ctx, addr, batch) {
					if err != nil {
						t.Errorf("batch publish %d: %v", i, err)
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("publish %d: %v", i, err)
			}
		}
		// Each message whole and once: no body swapped, none doubled
		// without a lost connection.
		msgs := r.waitFor(t, "every message", func(msgs []Received) bool { return len(msgs) >= len(ids) })
		seen := map[string]bool{}
		for _, m := range msgs {
			id := m.Headers[broker.HeaderTaskID]
			if seen[id] || string(m.Body) != `"`+id+`"` {
				t.Errorf("message %s: body %s, seen before %v", id, m.Body, seen[id])
			}
			seen[id] = true
		}
		if len(seen) != len(ids) {
			t.Errorf("%d distinct messages, want %d", len(seen), len(ids))
		}
	})

	t.Run("RefusalIsAnErrorOfItsOwn", func(t *testing.T) {
		t.Parallel()
		r := NewReceiver()
		addr := h.Destination(t, r)
		refusals := h.Refused(t)
		p := h.start(t, h.URL)
		ctx := ctxFor(t)
		// Refused and accepted publishes interleaved on one connection:
		// each gets its own outcome.
		const n = 50
		type outcome struct {
			refusal *Refusal
			id      string
			err     error
		}
		var outs []*outcome
		for i := range n {
			outs = append(outs, &outcome{id: fmt.Sprintf("good-%d", i)})
			for j := range refusals {
				outs = append(outs, &outcome{refusal: &refusals[j], id: fmt.Sprintf("bad-%d-%d", j, i)})
			}
		}
		var wg sync.WaitGroup
		for _, o := range outs {
			to := addr
			if o.refusal != nil {
				to = o.refusal.Address
			}
			wg.Go(func() { o.err = p.Publish(ctx, to, message(o.id, "k", "1")) })
		}
		wg.Wait()
		var good []string
		for _, o := range outs {
			switch {
			case o.refusal == nil && o.err != nil:
				t.Errorf("%s: %v", o.id, o.err)
			case o.refusal == nil:
				good = append(good, o.id)
			case o.err == nil || !strings.Contains(o.err.Error(), o.refusal.Reason) || errors.Is(o.err, broker.ErrConnLost):
				t.Errorf("%s to %q: %v; want the broker's reason %q, not a lost connection", o.id, o.refusal.Address, o.err, o.refusal.Reason)
			}
		}
		// The connection outlives the refusals.
		if err := p.Publish(ctx, addr, message("after", "k", "1")); err != nil {
			t.Errorf("publish after refusals: %v", err)
		}
		r.byID(t, append(good, "after")...)
	})

	t.Run("DownBrokerIsAnErrorWithinContext", func(t *testing.T) {
		t.Parallel()
		p := h.start(t, testdb.DeadURL(t, h.URL))
		m := message("t", "k", "1")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := returns(t, func() error { return p.Publish(ctx, "x", m) }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("publish past its deadline: %v; want context.DeadlineExceeded", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := returns(t, func() error { return p.Publish(ctx, "x", m) }); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled publish: %v; want context.Canceled", err)
		}
		returns(t, func() error { p.Stop(); return nil })
	})

	t.Run("NoAcknowledgementNoSuccess", func(t *testing.T) {
		t.Parallel()
		x := h.proxied(t)
		// The broker answers nothing: a publish written to the socket is
		// no success.
		x.proxy.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := returns(t, func() error { return x.p.Publish(ctx, x.addr, message("silent-1", "k", "1")) }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("publish to a silent broker: %v; want context.DeadlineExceeded", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		if err := returns(t, func() error { return x.p.Publish(ctx, x.addr, message("silent-2", "k", "1")) }); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled publish to a silent broker: %v; want context.Canceled", err)
		}
		x.proxy.Resume()
		if err := x.p.Publish(ctxFor(t), x.addr, message("after", "k", "1")); err != nil {
			t.Fatalf("publish once the broker answers again: %v", err)
		}
		x.r.byID(t, "before", "after")
	})

	t.Run("LostConnectionIsErrConnLostThenReconnects", func(t *testing.T) {
		t.Parallel()
		x := h.proxied(t)
		ctx := ctxFor(t)
		inFlight := x.lose(t, func() error { return x.p.Publish(ctx, x.addr, message("lost", "k", "1")) })
		if err := returns(t, func() error { return <-inFlight }); !errors.Is(err, broker.ErrConnLost) {
			t.Errorf("publish whose connection was lost: %v; want ErrConnLost", err)
		}
		x.restore()
		// The publisher reconnects by itself; meanwhile a publish may
		// still meet the dead connection.
		for try := 0; ; try++ {
			err := x.p.Publish(ctx, x.addr, message("after", "k", "1"))
			if err == nil {
				break
			}
			if !errors.Is(err, broker.ErrConnLost) || try == 100 {
				t.Fatalf("publish after the broker came back (try %d): %v", try, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		x.r.byID(t, "before", "after")
	})

	t.Run("SetRepublishesALostMessage", func(t *testing.T) {
		t.Parallel()
		x := h.proxied(t)
		set, err := broker.NewSet(map[string]broker.Publisher{"b": x.p}, patience)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor(t)
		done := x.lose(t, func() error { return set.Deliver(ctx, delivery("lost", "mq://b/"+x.addr)) })
		x.restore()
		if err := returns(t, func() error { return <-done }); err != nil {
			t.Fatalf("deliver across a lost connection: %v", err)
		}
		x.r.byID(t, "before", "lost") // at least once, never lost
	})

	t.Run("StopIsIdempotent", func(t *testing.T) {
		t.Parallel()
		r := NewReceiver()
		addr := h.Destination(t, r)
		p, err := h.Kind.New(broker.Options{Name: "brokertest", URL: h.URL, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)                                 // should the test end early
		returns(t, func() error { p.Stop(); return nil }) // never started
		for range 2 {
			if err := p.Start(context.Background()); err != nil {
				t.Fatalf("start: %v", err)
			}
		}
		select {
		case <-p.Started():
		case <-time.After(patience):
			t.Fatal("Started not closed")
		}
		if err := p.Publish(ctxFor(t), addr, message("one", "k", "1")); err != nil {
			t.Fatalf("publish: %v", err)
		}
		returns(t, func() error {
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(p.Stop)
			}
			wg.Wait()
			p.Stop()
			return nil
		})
		// A stopped publisher publishes nothing, and says so in time.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := returns(t, func() error { return p.Publish(ctx, addr, message("two", "k", "1")) }); err == nil {
			t.Error("a stopped publisher reported a publish as acknowledged")
		}
		r.byID(t, "one")
	})
}

// start builds and starts a publisher of h's kind to url, stopped when t
// ends.
func (h Harness) start(t *testing.T, url string) broker.Publisher {
	t.Helper()
	if err := h.Kind.CheckURL(url); err != nil {
		t.Fatalf("CheckURL: %v", err)
	}
	p, err := h.Kind.New(broker.Options{Name: "brokertest", URL: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// proxied is a test's destination and a publisher that reaches it through
// a proxy faking outages, with one message, "before", acknowledged.
type proxied struct {
	r     *Receiver
	addr  string
	proxy *testdb.Proxy
	p     broker.Publisher
}

func (h Harness) proxied(t *testing.T) *proxied {
	t.Helper()
	x := &proxied{r: NewReceiver()}
	x.addr = h.Destination(t, x.r)
	var u string
	u, x.proxy = testdb.ProxyURL(t, h.URL)
	x.p = h.start(t, u)
	if err := x.p.Publish(ctxFor(t), x.addr, message("before", "k", "1")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return x
}

// lose runs publish while the broker is silent and, once it wrote, takes
// the broker away: a message sent and never acknowledged. The channel
// gets publish's answer.
func (x *proxied) lose(t *testing.T, publish func() error) <-chan error {
	t.Helper()
	x.proxy.Pause()
	done := make(chan error, 1)
	go func() { done <- publish() }()
	deadline := time.Now().Add(patience)
	for x.proxy.Held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the publish wrote nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	x.proxy.Down()
	return done
}

// restore brings the broker back.
func (x *proxied) restore() {
	x.proxy.Resume()
	x.proxy.Up()
}

// message is a task's message as the Set builds it.
func message(id, key, body string) *broker.Message {
	d := delivery(id, "")
	d.Key, d.Payload = key, []byte(body)
	return broker.MessageOf(d)
}

// delivery is a task due to target.
func delivery(id, target string) deliver.Delivery {
	return deliver.Delivery{ID: id, Topic: "brokertest.topic", Key: "k", Target: target, Payload: []byte(`{"id":"` + id + `"}`),
		DueAt: time.Date(2030, 1, 2, 3, 4, 5, 600000000, time.UTC), Attempt: 2}
}

// ctxFor is a context that ends with t, or after patience.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	t.Cleanup(cancel)
	return ctx
}

// returns runs f and fails t if it hangs past patience.
func returns(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(patience):
		t.Fatalf("did not return within %s", patience)
		return nil
	}
}
