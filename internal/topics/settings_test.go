package topics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/topics"
)

func openEngine(t *testing.T, engine string, dsns []string) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: dsns, Tables: stagetest.Tables, Segments: stagetest.Segments})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ptr[T any](v T) *T { return &v }

// Each topic's settings resolve field by field: PUT's over the config's
// over the node's; a PUT made through one node reaches another by its
// poll; {} removes it; bad values are refused naming the field and store
// nothing. On every engine.
func TestSettingsResolveAndFollowAnotherNode(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsns := []string{testdb.SQLite(t)}
			if engine != "sqlite" {
				dsns = testdb.DSNs(t, engine, 1)
			}
			hereSt, thereSt := openEngine(t, engine, dsns), openEngine(t, engine, dsns)
			conf, err := topics.ParseLayer("topics.billing.", apiv1.TopicSettings{Target: "https://billing.example/hook", MaxAttempts: 7,
				Retry: &apiv1.Retry{Schedule: []string{"10s", "1m"}}, Timeout: "3s"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defaults := topics.Defaults{MaxAttempts: 25, Timeout: 10 * time.Second,
				Retry: task.Retry{Backoff: task.BackoffExponential, Initial: time.Second, Max: time.Hour, Jitter: 0.2}}
			mk := func(st *sqlstore.Store) *topics.Settings {
				s, err := topics.NewSettings(topics.SettingsConfig{Store: st, Config: map[string]topics.Layer{"billing": conf},
					Defaults: defaults, Poll: 20 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Stop)
				return s
			}
			here, there := mk(hereSt), mk(thereSt)

			// The config's layer over the node's.
			b := there.Settings("billing")
			if b.Target != "https://billing.example/hook" || b.MaxAttempts != 7 || b.Timeout != 3*time.Second ||
				b.Retry.String() != "schedule 10s, 1m0s ±20%" || b.Priority != 0 || b.Rate != 0 ||
				b.Sources != (apiv1.TopicSources{Target: "config", MaxAttempts: "config", Retry: "config", Priority: "node", Rate: "node", Concurrency: "node", Timeout: "config"}) {
				t.Fatalf("config over node: %+v", b)
			}
			if o := there.Settings("other"); o.MaxAttempts != 25 || o.Timeout != 10*time.Second || o.Retry.String() != "exponential 1s..1h0m0s ±20%" || o.Target != "" {
				t.Fatalf("a topic without settings: %+v", o)
			}

			// PUT through here: over the config's, field by field.
			ctx := context.Background()
			if _, err := here.Put(ctx, "billing", apiv1.TopicSettings{MaxAttempts: 3, Priority: ptr(0), Rate: 100, Concurrency: 8,
				Retry: &apiv1.Retry{Backoff: "fixed", Initial: "5s", Jitter: ptr(0.0)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := here.Put(ctx, "fresh", apiv1.TopicSettings{Priority: ptr(9), Timeout: "250ms"}); err != nil {
				t.Fatal(err)
			}
			stagetest.Eventually(t, "the PUT seen by the other node", func() bool { return there.Settings("fresh").Priority == 9 })
			b = there.Settings("billing")
			if b.Target != "https://billing.example/hook" || b.MaxAttempts != 3 || b.Retry.Wait(4, nil) != 5*time.Second || b.Rate != 100 ||
				b.Concurrency != 8 || b.Timeout != 3*time.Second || b.Sources.MaxAttempts != "api" || b.Sources.Target != "config" ||
				b.Sources.Priority != "api" || b.Sources.Retry != "api" {
				t.Fatalf("api over config: %+v", b)
			}
			if r, n := there.Limits("billing"); r != 100 || n != 8 || there.Priority("fresh") != 9 || there.Priority("other") != 0 ||
				there.MaxAttempts("billing") != 3 || there.Target("billing") != "https://billing.example/hook" || there.Timeout("other") != 0 || there.Timeout("fresh") != 250*time.Millisecond {
				t.Fatalf("lookups: %v %v %d %d", r, n, there.Priority("fresh"), there.MaxAttempts("billing"))
			}
			if f := there.Settings("fresh"); f.Timeout != 250*time.Millisecond || f.MaxAttempts != 25 || f.Sources.Timeout != "api" {
				t.Fatalf("a topic with PUT settings only: %+v", f)
			}
			if got := strings.Join(there.Named(), ","); got != "billing,fresh" {
				t.Fatalf("named: %s", got)
			}
			// The task's own policy wins; the topic's otherwise.
			own, _ := task.ParseRetry("retry", task.RetrySpec{Schedule: []string{"1s"}, Jitter: ptr(0.0)})
			if w := there.RetryOf(&task.Task{Topic: "billing", Retry: own.Encode()}).Wait(1, nil); w != time.Second {
				t.Fatalf("the task's own policy: %s", w)
			}
			if w := there.RetryOf(&task.Task{Topic: "billing"}).Wait(1, nil); w != 5*time.Second {
				t.Fatalf("the topic's policy: %s", w)
			}

			// Bad values: refused naming the field, nothing stored.
			for _, tc := range []struct {
				in    apiv1.TopicSettings
				field string
			}{
				{apiv1.TopicSettings{Priority: ptr(10)}, "priority"},
				{apiv1.TopicSettings{MaxAttempts: -1}, "max_attempts"},
				{apiv1.TopicSettings{Rate: -3}, "rate"},
				{apiv1.TopicSettings{Concurrency: 100001}, "concurrency"},
				{apiv1.TopicSettings{Timeout: "5ms"}, "timeout"},
				{apiv1.TopicSettings{Target: "ftp://x"}, "target"},
				{apiv1.TopicSettings{Retry: &apiv1.Retry{Initial: "2m", Max: "1m"}}, "retry.max"},
				{apiv1.TopicSettings{Retry: &apiv1.Retry{Schedule: []string{"1s", "x"}}}, "retry.schedule[1]"},
			} {
				_, err := here.Put(ctx, "billing", tc.in)
				var fe *task.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Errorf("%+v: %v; want an error on %s", tc.in, err, tc.field)
				}
			}
			if b := here.Settings("billing"); b.MaxAttempts != 3 || b.Rate != 100 {
				t.Fatalf("a refused PUT changed the settings: %+v", b)
			}

			// {} removes the PUT's layer: back to the config's.
			if _, err := there.Put(ctx, "billing", apiv1.TopicSettings{}); err != nil {
				t.Fatal(err)
			}
			stagetest.Eventually(t, "the removal seen here", func() bool { return here.Settings("billing").Sources.MaxAttempts == "config" })
			if _, ok := here.Dynamic("billing"); ok {
				t.Fatal("the removed layer still there")
			}
			if b := here.Settings("billing"); b.MaxAttempts != 7 || b.Rate != 0 || b.Retry.String() != "schedule 10s, 1m0s ±20%" {
				t.Fatalf("after the removal: %+v", b)
			}
		})
	}
}

// A stored document this node cannot accept (another node's rules) is
// passed over: the topic keeps its config's settings.
func TestSettingsSkipAnUnreadableDocument(t *testing.T) {
	t.Parallel()
	st := openEngine(t, "sqlite", []string{testdb.SQLite(t)})
	ctx := context.Background()
	if err := st.SetTopicSettings(ctx, "t", []byte(`{"priority": 42}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTopicSettings(ctx, "u", []byte(`{"max_attempts": 4}`)); err != nil {
		t.Fatal(err)
	}
	s, err := topics.NewSettings(topics.SettingsConfig{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if p := s.Settings("t"); p.Priority != 0 || p.Sources.Priority != "node" {
		t.Fatalf("unreadable document applied: %+v", p)
	}
	if u := s.Settings("u"); u.MaxAttempts != 4 {
		t.Fatalf("a good document beside it: %+v", u)
	}
}
