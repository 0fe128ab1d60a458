package sqlstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateJobCreatedFromVersion8: a version 8 database (its job items
// table as version 6 made it) with an item that never fired and one that
// did migrates to version 9: both hold the migration's time as their
// first take; an item first taken afterwards holds its take's time, and
// a later take keeps it. The step and the open run again change nothing.
func TestMigrateJobCreatedFromVersion8(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 1, 1)
			db := s.w[0]
			for _, q := range append([]string{`DROP TABLE ontime_job_items`}, createJobs[engine]...) {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.ExecContext(ctx, s.d.rebind(s.d.upsertMeta), "schema_version", "8"); err != nil {
				t.Fatal(err)
			}
			fired := time.UnixMicro(time.Now().Add(-time.Hour).UnixMicro()).UTC()
			if _, err := db.ExecContext(ctx, s.d.rebind(`INSERT INTO ontime_job_items (job, item, node_id, token, last_fire) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)`),
				"bill", "0.0.0", "n1", 5, 0, "bill", "0.1.0", "n1", 6, fired.UnixMicro()); err != nil {
				t.Fatal(err)
			}
			s.Close()

			before := time.Now().Truncate(time.Microsecond)
			s = openT(t, engine, dsns, 1, 1)
			after := time.Now()
			items, err := s.JobItems(ctx, "bill")
			if err != nil || len(items) != 2 {
				t.Fatalf("items %+v %v", items, err)
			}
			for _, it := range items {
				if it.Created.Before(before) || it.Created.After(after) {
					t.Errorf("item %s: first take %v, want the migration's time in [%v, %v]", it.Item, it.Created, before, after)
				}
			}
			if !items[1].LastFire.Equal(fired) || !items[0].LastFire.IsZero() {
				t.Fatalf("last fire times changed: %+v", items)
			}
			migrated := items[0].Created

			stepAgain(t, s, 0, 9)
			s.Close()
			s = openT(t, engine, dsns, 1, 1)
			var v string
			if err := s.w[0].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
				t.Fatalf("schema version %q, %v", v, err)
			}

			took := time.UnixMicro(time.Now().Add(time.Minute).UnixMicro()).UTC()
			st, err := s.TakeItem(ctx, "bill", "0.0.0", "n2", 7, took)
			if err != nil || !st.Created.Equal(migrated) || st.Owner != "n1" {
				t.Fatalf("take of a migrated item: %+v %v", st, err)
			}
			st, err = s.TakeItem(ctx, "bill", "1.0.0", "n2", 8, took)
			if err != nil || !st.Created.Equal(took) || st.Owner != "" {
				t.Fatalf("first take of a new item: %+v %v", st, err)
			}
			st, err = s.TakeItem(ctx, "bill", "1.0.0", "n3", 9, took.Add(time.Hour))
			if err != nil || !st.Created.Equal(took) || st.Owner != "n2" {
				t.Fatalf("second take of the new item: %+v %v", st, err)
			}
		})
	}
}
