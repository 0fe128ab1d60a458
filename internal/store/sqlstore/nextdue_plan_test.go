package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// NextDue is prepared on PostgreSQL, and after five plans for their values
// PostgreSQL keeps a generic plan for the connection's life, made while the
// table was small. That plan must read the first entry of the segment's
// pending range, whatever the table grows to: for a MIN it aggregated
// every pending entry of the range.
func TestNextDueGenericPlanReadsOneEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), 1, 1)
	// One connection: the calls below and the EXPLAIN meet the same
	// prepared statement.
	s.w[0].SetMaxOpenConns(1)
	s.r[0].SetMaxOpenConns(1)
	now := time.Now()
	for i := range 12 {
		if _, err := s.Insert(ctx, []store.NewTask{newTask(t, fmt.Sprintf("nd-%d", i), now.Add(time.Hour), 1)}); err != nil {
			t.Fatal(err)
		}
		due, _, err := s.NextDue(ctx, store.Item{})
		if err != nil {
			t.Fatal(err)
		}
		if due.IsZero() {
			t.Fatalf("NextDue found nothing pending after %d inserts", i+1)
		}
	}
	var name, types string
	var generic int
	if err := s.r[0].QueryRowContext(ctx, `SELECT name, parameter_types::text, generic_plans FROM pg_prepared_statements WHERE statement LIKE 'SELECT%lease_until%'`).Scan(&name, &types, &generic); err != nil {
		t.Fatal(err)
	}
	if generic == 0 {
		t.Fatalf("NextDue's statement got no generic plan in 12 calls: the test no longer sees what it checks")
	}
	params := strings.TrimSuffix(strings.Repeat("1, ", strings.Count(types, ",")+1), ", ")
	plan := strings.Split(strings.TrimSpace(explain(t, "postgres", s.r[0], `EXECUTE `+name+`(`+params+`)`, nil)), "\n")
	// Each of its three subplans (the due time, then the lease ends of
	// claimed and of running tasks) is a Limit over its index.
	var subplans []string
	for _, l := range plan {
		if strings.Contains(l, "InitPlan") || len(subplans) == 0 {
			subplans = append(subplans, "")
		}
		subplans[len(subplans)-1] += l + "\n"
	}
	if len(subplans) != 4 { // the Result, then three InitPlans
		t.Fatalf("NextDue's plan has %d parts, want the result and 3 subplans:\n%s", len(subplans), strings.Join(plan, "\n"))
	}
	for i, index := range []string{"_scan", "_lease", "_lease"} {
		if sp := subplans[i+1]; !strings.Contains(sp, "Limit") || !strings.Contains(sp, s.names[0]+index) {
			t.Errorf("NextDue's generic plan, subplan %d, is not a Limit over %s:\n%s", i+1, index, strings.Join(plan, "\n"))
		}
	}
}

// BenchmarkNextDueAfterGrowth: NextDue's statement on PostgreSQL, prepared
// on a new store's connection and planned generically there (12 calls),
// then run once the table holds 200,000 pending tasks: as MINs (their
// generic plan aggregates every entry of each range) and in order
// (ORDER BY … LIMIT 1, what NextDue sends).
func BenchmarkNextDueAfterGrowth(b *testing.B) {
	for _, v := range []struct {
		name    string
		ordered bool
	}{{"min", false}, {"ordered", true}} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, Config{Driver: "postgres", DSNs: testdb.DSNs(b, "postgres", 1), Tables: 1, Segments: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.r[0].SetMaxOpenConns(1)
			q := s.d.rebind(nextDueText(s.names[0], "", "", v.ordered))
			args := []any{pgx.QueryExecModeCacheStatement, 0, 0, 0, 1, 0, 2}
			next := func() {
				var due, c, r sql.NullInt64
				if err := s.r[0].QueryRowContext(ctx, q, args...).Scan(&due, &c, &r); err != nil {
					b.Fatal(err)
				}
			}
			now := time.Now()
			add := func(n int) {
				for start := 0; start < n; start += 5000 {
					var news []store.NewTask
					for range min(5000, n-start) {
						news = append(news, newTask(b, "", now.Add(time.Hour), 1))
					}
					if _, err := s.Insert(ctx, news); err != nil {
						b.Fatal(err)
					}
				}
			}
			add(10)
			for range 12 {
				next()
			}
			add(200000)
			b.ResetTimer()
			for range b.N {
				next()
			}
		})
	}
}
