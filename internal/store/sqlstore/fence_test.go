package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestFenceClockSkew: a node whose clock is more than MaxClockSkew off
// the first database's is told so by its mark, which then no longer
// extends its write fence (its marks could look stale to a cutover while
// it writes); a clock within it marks as before. On SQLite the nodes share
// the host's clock: nothing to compare.
func TestFenceClockSkew(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: 2, Segments: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.EnableFence()
			if _, err := s.MarkInUse(ctx, "n1", time.Now()); err != nil {
				t.Fatalf("a clock in time: %v", err)
			}
			for _, off := range []time.Duration{5 * time.Second, -5 * time.Second} {
				until := s.fence.until.Load()
				_, err := s.MarkInUse(ctx, "n1", time.Now().Add(off))
				if engine == "sqlite" {
					if err != nil {
						t.Fatalf("SQLite, clock %s off: %v", off, err)
					}
					continue
				}
				if !errors.Is(err, ErrClockSkew) || !strings.Contains(err.Error(), "this node's clock is") || !strings.Contains(err.Error(), "NTP") {
					t.Fatalf("a clock %s off: %v", off, err)
				}
				if s.fence.until.Load() != until {
					t.Fatalf("a clock %s off extended the fence", off)
				}
			}
			if _, err := s.MarkInUse(ctx, "n1", time.Now()); err != nil {
				t.Fatalf("the clock fixed: %v", err)
			}
		})
	}
}
