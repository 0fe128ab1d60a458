package outboxrelay

import (
	"context"
	"errors"
	"testing"
)

// TestPageCountsReport: the passes between two reports are summed into
// the next one, a pass that only fetched is not work worth a report, and
// a report starts the sums afresh even when it fails (ErrLost ends the
// run: its counts are not carried into another).
func TestPageCountsReport(t *testing.T) {
	var c pageCounts
	c.add(passStats{fetched: 3})
	if c.worked() {
		t.Fatal("a pass that relayed nothing counts as work")
	}
	c.add(passStats{fetched: 5, relayed: 4, setAside: 1})
	c.addFinished(2) // by the finish loop
	c.add(passStats{fetched: 2, relayed: 2, retried: 1})
	if !c.worked() {
		t.Fatal("passes that relayed are not work")
	}
	var got [3]int
	report := func(_ context.Context, fetched, processed, failed int) error {
		got = [3]int{fetched, processed, failed}
		return errors.New("lost")
	}
	if err := c.report(context.Background(), report); err == nil {
		t.Fatal("the report's error was dropped")
	}
	if want := [3]int{10, 8, 2}; got != want {
		t.Fatalf("reported %v, want %v (fetched, processed, failed)", got, want)
	}
	if c != (pageCounts{}) {
		t.Fatalf("sums kept after a report: %+v", c)
	}
}
