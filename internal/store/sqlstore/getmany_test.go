package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestGetMany: on every engine, over 2 databases × 4 tables, GetMany
// answers each existing task (more than one query's worth of IDs) by ID,
// as Get does, and leaves out the IDs that are missing or malformed.
func TestGetMany(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 2), Tables: 4, Segments: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			due := time.Now().Add(time.Hour)
			var nts []store.NewTask
			for i := range getManyChunk + 200 {
				key := ""
				if i%2 == 0 {
					key = fmt.Sprintf("k%d", i)
				}
				nts = append(nts, newTask(t, key, due, 2))
			}
			if _, err := s.Insert(ctx, nts); err != nil {
				t.Fatal(err)
			}
			missing := newTask(t, "never", due, 2).ID
			ids := []string{missing, "not-an-id"}
			for _, nt := range nts {
				ids = append(ids, nt.ID)
			}
			got, err := s.GetMany(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(nts) {
				t.Fatalf("%d tasks answered, want %d", len(got), len(nts))
			}
			for _, nt := range nts {
				g, ok := got[nt.ID]
				if !ok {
					t.Fatalf("task %s missing", nt.ID)
				}
				one, err := s.Get(ctx, nt.ID)
				if err != nil {
					t.Fatal(err)
				}
				if g.Key != one.Key || g.Status != one.Status || !g.DueAt.Equal(one.DueAt) {
					t.Fatalf("task %s: GetMany %+v, Get %+v", nt.ID, g, one)
				}
			}
			if none, err := s.GetMany(ctx, nil); err != nil || len(none) != 0 {
				t.Fatalf("GetMany of none: %v, %v", none, err)
			}
		})
	}
}
