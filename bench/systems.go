package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	goredis "github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/ontimehq/ontime"
)

// job is one scheduled task: its ID and the instant it is due.
type job struct {
	ID  string    `json:"id"`
	Due time.Time `json:"due"`
}

// system is a scheduler under test. Handlers call rec(id, due) and do
// nothing else, so the figures measure the schedulers.
type system interface {
	name() string
	knobs() string
	start(ctx context.Context, rec func(id string, due time.Time)) error
	enqueue(ctx context.Context, jobs []job) error // a batch, as fast as the system allows
	stop()
}

const pgAdmin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// freshPG creates a PostgreSQL database and returns its URL and a drop func.
func freshPG() (string, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "ontime_bench_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", pgAdmin)
	if err != nil {
		return "", nil, err
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		return "", nil, err
	}
	drop := func() { db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); db.Close() }
	return fmt.Sprintf("postgres://postgres@127.0.0.1:5432/%s?sslmode=disable", name), drop, nil
}

// ---- ontime ----

type ontimeSys struct {
	label, driver string
	node          *ontime.Node
	cleanup       []func()
}

func (s *ontimeSys) name() string { return s.label }
func (s *ontimeSys) knobs() string {
	return "defaults (window 30s, FireLead 20ms), Go handler in-process"
}

func (s *ontimeSys) start(ctx context.Context, rec func(string, time.Time)) error {
	cfg := ontime.DefaultConfig()
	dir, err := os.MkdirTemp("", "ontime-bench")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	cfg.DataDir = dir
	if s.driver == "postgres" {
		dsn, drop, err := freshPG()
		if err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, drop)
		cfg.Store.Driver, cfg.Store.Databases = "postgres", []string{dsn}
	}
	n, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		return err
	}
	if err := n.Handle("bench", func(ctx context.Context, d *ontime.Delivery) error {
		var j job
		_ = json.Unmarshal(d.Payload, &j)
		rec(j.ID, j.Due)
		return nil
	}); err != nil {
		return err
	}
	s.node = n
	return n.Start(ctx)
}

func (s *ontimeSys) enqueue(ctx context.Context, jobs []job) error {
	specs := make([]ontime.TaskSpec, len(jobs))
	for i, j := range jobs {
		p, _ := json.Marshal(j)
		specs[i] = ontime.TaskSpec{Topic: "bench", DueAt: j.Due, Payload: p}
	}
	res, err := s.node.SubmitBatch(ctx, specs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (s *ontimeSys) stop() {
	if s.node != nil {
		s.node.Stop(context.Background())
	}
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// ---- asynq ----

type asynqSys struct {
	tuned  bool
	srv    *asynq.Server
	client *asynq.Client
}

func (s *asynqSys) name() string {
	if s.tuned {
		return "asynq tuned"
	}
	return "asynq default"
}

func (s *asynqSys) knobs() string {
	if s.tuned {
		return "Concurrency 64, DelayedTaskCheckInterval 10ms, TaskCheckInterval 10ms; Redis DB 5"
	}
	return "defaults (Concurrency = GOMAXPROCS, DelayedTaskCheckInterval 5s); Redis DB 5"
}

func (s *asynqSys) start(ctx context.Context, rec func(string, time.Time)) error {
	opt := asynq.RedisClientOpt{Addr: "127.0.0.1:6379", DB: 5}
	// A clean DB for every run.
	rdb := goredis.NewClient(&goredis.Options{Addr: opt.Addr, DB: opt.DB})
	err := rdb.FlushDB(ctx).Err()
	rdb.Close()
	if err != nil {
		return err
	}
	cfg := asynq.Config{LogLevel: asynq.ErrorLevel}
	if s.tuned {
		cfg.Concurrency = 64
		cfg.DelayedTaskCheckInterval = 10 * time.Millisecond
		cfg.TaskCheckInterval = 10 * time.Millisecond
	}
	s.srv = asynq.NewServer(opt, cfg)
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(ctx context.Context, t *asynq.Task) error {
		var j job
		_ = json.Unmarshal(t.Payload(), &j)
		rec(j.ID, j.Due)
		return nil
	})
	s.client = asynq.NewClient(opt)
	return s.srv.Start(mux)
}

// enqueue: asynq has no batch insert; 32 goroutines enqueue concurrently.
func (s *asynqSys) enqueue(ctx context.Context, jobs []job) error {
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	ch := make(chan job)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				p, _ := json.Marshal(j)
				if _, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", p), asynq.ProcessAt(j.Due), asynq.MaxRetry(0)); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (s *asynqSys) stop() {
	if s.srv != nil {
		s.srv.Shutdown()
	}
	if s.client != nil {
		s.client.Close()
	}
}

// ---- River ----

type benchArgs struct {
	ID  string    `json:"id"`
	Due time.Time `json:"due"`
}

func (benchArgs) Kind() string { return "bench" }

type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	rec func(string, time.Time)
}

func (w *benchWorker) Work(ctx context.Context, j *river.Job[benchArgs]) error {
	w.rec(j.Args.ID, j.Args.Due)
	return nil
}

type riverSys struct {
	tuned  bool
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	drop   func()
}

func (s *riverSys) name() string {
	if s.tuned {
		return "River tuned"
	}
	return "River default"
}

func (s *riverSys) knobs() string {
	if s.tuned {
		return "MaxWorkers 100, FetchCooldown 1ms, FetchPollInterval 50ms"
	}
	return "defaults (MaxWorkers 100, FetchCooldown 100ms, FetchPollInterval 1s)"
}

func (s *riverSys) start(ctx context.Context, rec func(string, time.Time)) error {
	dsn, drop, err := freshPG()
	if err != nil {
		return err
	}
	s.drop = drop
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	s.pool = pool
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{rec: rec})
	cfg := &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}, Workers: workers}
	if s.tuned {
		cfg.FetchCooldown = time.Millisecond
		cfg.FetchPollInterval = 50 * time.Millisecond
	}
	c, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	s.client = c
	return c.Start(ctx)
}

func (s *riverSys) enqueue(ctx context.Context, jobs []job) error {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: benchArgs(j), InsertOpts: &river.InsertOpts{ScheduledAt: j.Due, MaxAttempts: 1}}
	}
	_, err := s.client.InsertMany(ctx, params)
	return err
}

func (s *riverSys) stop() {
	if s.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.client.Stop(ctx)
		cancel()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.drop != nil {
		s.drop()
	}
}
