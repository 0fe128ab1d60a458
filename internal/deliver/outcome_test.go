package deliver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A refusal by an open breaker says when a probe may go and since when the
// destination fails, so the task can be deferred that long (complete).
func TestCircuitOpenErrorSaysUntilAndSince(t *testing.T) {
	p, _ := NewDispatcher(DispatcherConfig{PerDestConcurrency: 1, Breaker: BreakerConfig{FailureThreshold: 2, OpenFor: time.Hour}})
	startDispatcher(t, p)
	sink := HandlerFunc(func(ctx context.Context, d Delivery) error { return errors.New("boom") })
	ctx := context.Background()
	before := time.Now()
	r := newResult(2)
	for i := range 2 {
		dispatchOne(p, ctx, "d", sink, Delivery{}, r.done(fmt.Sprint(i)))
	}
	waitGroup(t, &r.wg, 5*time.Second)
	r2 := newResult(1)
	dispatchOne(p, ctx, "d", sink, Delivery{}, r2.done("x"))
	waitGroup(t, &r2.wg, 5*time.Second)
	var open *CircuitOpenError
	if !errors.As(r2.errs["x"], &open) || !errors.Is(r2.errs["x"], ErrCircuitOpen) {
		t.Fatalf("refusal %v is not a *CircuitOpenError matching ErrCircuitOpen", r2.errs["x"])
	}
	if open.Dest != "d" || open.Since.Before(before) || open.Since.After(time.Now()) ||
		open.Until.Before(before.Add(59*time.Minute)) || open.Until.After(time.Now().Add(time.Hour)) {
		t.Fatalf("refusal: %+v; want since the first failure, until an hour later", open)
	}
}

func TestSnoozeAndCancelWrappers(t *testing.T) {
	if d, ok := SnoozedFor(fmt.Errorf("wrapped: %w", Snooze(3*time.Second))); !ok || d != 3*time.Second {
		t.Fatalf("SnoozedFor: %s %v", d, ok)
	}
	if d, ok := SnoozedFor(Snooze(-time.Second)); !ok || d != 0 {
		t.Fatalf("a negative snooze: %s %v; want 0", d, ok)
	}
	if _, ok := SnoozedFor(errors.New("x")); ok {
		t.Fatal("a plain error is a snooze")
	}
	why := errors.New("order paid")
	c := fmt.Errorf("handler: %w", Cancel(why))
	if !IsCancel(c) || !errors.Is(c, why) || IsCancel(why) || IsPermanent(c) {
		t.Fatalf("Cancel wrapper: IsCancel %v, Is(why) %v", IsCancel(c), errors.Is(c, why))
	}
	if Cancel(nil).Error() != "cancelled by its handler" {
		t.Fatalf("Cancel(nil): %q", Cancel(nil).Error())
	}
	// Drop: cancelled, its reason said as it is (not the handler's).
	if d := Drop("missed: fire time x"); !IsCancel(d) || d.Error() != "missed: fire time x" || IsPermanent(d) {
		t.Fatalf("Drop: IsCancel %v, %q", IsCancel(d), d.Error())
	}
}
