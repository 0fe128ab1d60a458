package main

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestBareSystems runs each engine alone against the servers the bench
// uses (a server that does not answer fails it): a keyed row, the same key
// again refused, batches keyless and keyed, every row there, and the
// database or file gone after stop.
func TestBareSystems(t *testing.T) {
	for _, driver := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := &bareSys{driver: driver}
			if err := s.start(ctx, func(string, time.Time) { t.Error("a bare engine delivered") }); err != nil {
				s.stop()
				t.Fatalf("%s (the server is required): %v", s.name(), err)
			}
			defer s.stop()
			due := time.Now().Add(time.Hour)
			if err := s.enqueueOne(ctx, job{ID: "one", Due: due, Keyed: true}); err != nil {
				t.Fatal(err)
			}
			if err := s.enqueueOne(ctx, job{ID: "one", Due: due, Keyed: true}); err == nil {
				t.Error("the same key twice: no error (UNIQUE (topic, task_key) missing)")
			}
			if err := s.enqueueOne(ctx, job{ID: "keyless", Due: due}); err != nil {
				t.Fatal(err)
			}
			for _, keyed := range []bool{false, true} {
				jobs := make([]job, batch)
				for i := range jobs {
					jobs[i] = job{ID: fmt.Sprintf("b-%t-%d", keyed, i), Due: due, Keyed: keyed}
				}
				if err := s.enqueue(ctx, jobs); err != nil {
					t.Fatalf("batch keyed %t: %v", keyed, err)
				}
			}
			var rows, keyed int
			q := "SELECT COUNT(*), COUNT(task_key) FROM " + bareTable
			var err error
			if s.pool != nil {
				err = s.pool.QueryRow(ctx, q).Scan(&rows, &keyed)
			} else {
				err = s.db.QueryRowContext(ctx, q).Scan(&rows, &keyed)
			}
			if err != nil {
				t.Fatal(err)
			}
			if rows != 2+2*batch || keyed != 1+batch {
				t.Errorf("%d rows, %d keyed; want %d, %d", rows, keyed, 2+2*batch, 1+batch)
			}
			if d := durability(ctx, s); d == "—" || d == "" {
				t.Errorf("durability %q", d)
			}
		})
	}
}
