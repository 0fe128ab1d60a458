package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPacerNice(t *testing.T) {
	ctx := context.Background()
	p := newPacer(ExpandOptions{Nice: 2}, 100)
	start := time.Now().Add(-40 * time.Millisecond) // a page of 40 ms
	if err := p.page(ctx, start, 100); err != nil {
		t.Fatal(err)
	}
	// Nice 2 after a 40 ms page: 80 ms more, so 120 ms since it began.
	if took := time.Since(start); took < 120*time.Millisecond {
		t.Fatalf("nice 2 after a 40 ms page returned %s after the page began", took)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.page(cctx, time.Now().Add(-time.Hour), 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	var none *pacer
	if err := none.page(ctx, start, 1); err != nil {
		t.Fatal(err)
	}
}

func TestPacerRate(t *testing.T) {
	ctx := context.Background()
	p := newPacer(ExpandOptions{Rate: 200}, 50)
	start := time.Now()
	for range 6 {
		if err := p.page(ctx, time.Now(), 50); err != nil {
			t.Fatal(err)
		}
	}
	// 300 rows at 200 a second, the first page from the bucket: 1.25 s.
	if took := time.Since(start); took < 1250*time.Millisecond {
		t.Fatalf("300 rows at 200/s took %s", took)
	}
}

func TestExpandOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o     ExpandOptions
		field string
	}{
		{ExpandOptions{Page: -1}, "page: "},
		{ExpandOptions{Page: 10001}, "page: "},
		{ExpandOptions{Nice: -0.5}, "nice: "},
		{ExpandOptions{Nice: 101}, "nice: "},
		{ExpandOptions{Rate: -1}, "rate: "},
		{ExpandOptions{Rate: 2e7}, "rate: "},
	} {
		if err := c.o.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %q", c.o, err, c.field)
		}
	}
	if err := (ExpandOptions{Page: 100, Nice: 1.5, Rate: 5000}).Validate(); err != nil {
		t.Fatal(err)
	}
}
