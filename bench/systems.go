package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"

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
	// Keyed gives the task a business key, its ID (unique per task, as an
	// order ID is): ontime's key, asynq's TaskID, River's unique args.
	// Not in the payload, which stays {"id","due"} for the receiver.
	Keyed bool `json:"-"`
}

// system is a scheduler under test. Handlers call rec(id, due) and do
// nothing else, so the figures measure the schedulers.
type system interface {
	name() string
	knobs() string
	path() string // how tasks go in and come out: in-process, service …
	start(ctx context.Context, rec func(id string, due time.Time)) error
	enqueue(ctx context.Context, jobs []job) error // a batch, as fast as the system allows
	enqueueOne(ctx context.Context, j job) error   // a single task, the system's one-task call
	stop()
}

const (
	pgAdmin    = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	mysqlAdmin = "root@tcp(127.0.0.1:3306)/" // go-sql-driver DSN, as internal/testdb
	redisAddr  = "127.0.0.1:6379"
)

// benchName returns a fresh name for a database or key prefix of one run.
func benchName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ontime_bench_" + hex.EncodeToString(b[:])
}

// freshMySQL creates a MariaDB database and returns its DSN and a drop func.
func freshMySQL() (string, func(), error) {
	name := benchName()
	db, err := sql.Open("mysql", mysqlAdmin)
	if err != nil {
		return "", nil, err
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		return "", nil, err
	}
	drop := func() { db.Exec("DROP DATABASE IF EXISTS " + name); db.Close() }
	return mysqlAdmin + name, drop, nil
}

// freshPG creates a PostgreSQL database and returns its URL and a drop func.
func freshPG() (string, func(), error) {
	name := benchName()
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

// ontimeSys is one ontime node, embedded in the benchmark process.
type ontimeSys struct {
	label   string
	driver  string // store.driver: sqlite | mysql | postgres
	redis   bool   // hot.tier redis instead of memory
	webhook bool   // deliver by webhook to an in-process HTTP receiver
	node    *ontime.Node
	target  string // the receiver's URL when webhook
	hook    *hookReceiver
	cleanup []func()
}

func (s *ontimeSys) name() string { return s.label }

func (s *ontimeSys) path() string {
	if s.webhook {
		return "in-process (Go API + webhook)"
	}
	return "in-process (Go API + Go handler)"
}

func (s *ontimeSys) knobs() string {
	c := ontime.DefaultConfig()
	var b strings.Builder
	switch s.driver {
	case "sqlite":
		b.WriteString("store sqlite (one file in a temp dir, WAL, synchronous NORMAL)")
	case "mysql":
		b.WriteString("store mysql: MariaDB 127.0.0.1:3306, a fresh database per run, pool 32")
	case "postgres":
		b.WriteString("store postgres: 127.0.0.1:5432, a fresh database per run, pool 32")
	}
	c.Store.Driver = s.driver // store.tables unset: a new store's count
	fmt.Fprintf(&b, ", 1 database × %d tables × %d segments; ", c.Store.NewTables(), c.Store.Segments)
	if s.redis {
		fmt.Fprintf(&b, "hot tier redis (%s DB 0, %d slots, prefix ontime_bench_<random>, its keys deleted after)", redisAddr, c.Hot.Slots)
	} else {
		b.WriteString("hot tier memory")
	}
	fmt.Fprintf(&b, ", window %s, start lead 20ms or twice the slowest recent start and tier pop, a burst spread up to hot.max_fire_lead %s ahead (defaults); ",
		time.Duration(c.Hot.Window), time.Duration(c.Hot.MaxFireLead))
	if s.webhook {
		fmt.Fprintf(&b, "webhook: HTTP POST, unsigned, keep-alive, to a net/http receiver in the bench process on 127.0.0.1, delivery.concurrency %d per destination, timeout %s",
			c.Delivery.Concurrency, time.Duration(c.Delivery.Timeout))
	} else {
		fmt.Fprintf(&b, "Go handler in-process, delivery.concurrency %d per destination", c.Delivery.Concurrency)
	}
	fmt.Fprintf(&b, "; max_attempts %d (no delivery fails)", c.Delivery.MaxAttempts)
	return b.String()
}

func (s *ontimeSys) start(ctx context.Context, rec func(string, time.Time)) error {
	cfg := ontime.DefaultConfig()
	dir, err := os.MkdirTemp("", "ontime-bench")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	cfg.DataDir = dir
	switch s.driver {
	case "postgres":
		dsn, drop, err := freshPG()
		if err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, drop)
		cfg.Store.Driver, cfg.Store.Databases = "postgres", []string{dsn}
	case "mysql":
		dsn, drop, err := freshMySQL()
		if err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, drop)
		cfg.Store.Driver, cfg.Store.Databases = "mysql", []string{dsn}
	}
	if s.redis {
		prefix := benchName()
		cfg.Hot.Tier, cfg.Hot.RedisAddrs, cfg.Hot.RedisPrefix = "redis", []string{redisAddr}, prefix
		s.cleanup = append(s.cleanup, func() { delKeys(prefix + ":*") })
	}
	if s.webhook {
		h, err := startReceiver(rec)
		if err != nil {
			return err
		}
		s.target, s.hook = h.url(), h
		s.cleanup = append(s.cleanup, h.stop)
	}
	n, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		return err
	}
	s.node = n
	if err := n.Handle("bench", func(ctx context.Context, d *ontime.Delivery) error {
		var j job
		_ = json.Unmarshal(d.Payload, &j)
		rec(j.ID, j.Due)
		return nil
	}); err != nil {
		return err
	}
	return n.Start(ctx)
}

// delKeys deletes the Redis keys (DB 0) matching pattern.
func delKeys(pattern string) {
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	defer rdb.Close()
	it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		rdb.Del(ctx, keys[i:min(i+500, len(keys))]...)
	}
}

func (s *ontimeSys) perCall() float64 {
	if s.hook == nil {
		return 0
	}
	return s.hook.perCall()
}

func (s *ontimeSys) spec(j job) ontime.TaskSpec {
	p, _ := json.Marshal(j)
	spec := ontime.TaskSpec{Topic: "bench", DueAt: j.Due, Payload: p, Target: s.target}
	if j.Keyed {
		spec.Key = j.ID
	}
	return spec
}

func (s *ontimeSys) enqueue(ctx context.Context, jobs []job) error {
	specs := make([]ontime.TaskSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = s.spec(j)
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

func (s *ontimeSys) enqueueOne(ctx context.Context, j job) error {
	_, _, err := s.node.Submit(ctx, s.spec(j))
	return err
}

func (s *ontimeSys) stop() {
	if s.node != nil {
		s.node.Stop(context.Background())
		s.node = nil
	}
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cleanup, s.target, s.hook = nil, "", nil
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

func (s *asynqSys) path() string { return "Go client + Go handler" }

const asynqTask = "per task ProcessAt(due), MaxRetry 0 (asynq stores ProcessAt in whole seconds); Redis 127.0.0.1:6379 DB 5, flushed before each run"

func (s *asynqSys) knobs() string {
	if s.tuned {
		return "Concurrency 64, DelayedTaskCheckInterval 10ms, TaskCheckInterval 10ms; " + asynqTask
	}
	return "defaults (Concurrency = GOMAXPROCS, DelayedTaskCheckInterval 5s, TaskCheckInterval 1s); " + asynqTask
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
				if err := s.enqueueOne(ctx, j); err != nil {
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

func (s *asynqSys) enqueueOne(ctx context.Context, j job) error {
	p, _ := json.Marshal(j)
	opts := []asynq.Option{asynq.ProcessAt(j.Due), asynq.MaxRetry(0)}
	if j.Keyed {
		opts = append(opts, asynq.TaskID(j.ID)) // a second enqueue of the ID fails: asynq's idempotency key
	}
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", p), opts...)
	return err
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
	ID  string    `json:"id" river:"unique"` // the key of keyed jobs (UniqueOpts ByArgs)
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

func (s *riverSys) path() string { return "Go client + Go handler" }

const riverTask = "per task ScheduledAt(due), MaxAttempts 1; pgx pool defaults; a fresh PostgreSQL database per run, migrated"

func (s *riverSys) knobs() string {
	if s.tuned {
		return "MaxWorkers 100, FetchCooldown 1ms, FetchPollInterval 50ms; " + riverTask
	}
	return "defaults (MaxWorkers 100, FetchCooldown 100ms, FetchPollInterval 1s); " + riverTask
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

// riverOpts are a job's insert options: keyed jobs are unique by their
// ID (River's unique_key, a unique index), River's business key.
func riverOpts(j job) *river.InsertOpts {
	o := &river.InsertOpts{ScheduledAt: j.Due, MaxAttempts: 1}
	if j.Keyed {
		o.UniqueOpts = river.UniqueOpts{ByArgs: true}
	}
	return o
}

func riverParams(jobs []job) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: benchArgs{ID: j.ID, Due: j.Due}, InsertOpts: riverOpts(j)}
	}
	return params
}

func (s *riverSys) enqueue(ctx context.Context, jobs []job) error {
	_, err := s.client.InsertMany(ctx, riverParams(jobs))
	return err
}

// enqueueCopy is River's fastest batch insert: InsertManyFast, COPY FROM.
func (s *riverSys) enqueueCopy(ctx context.Context, jobs []job) error {
	_, err := s.client.InsertManyFast(ctx, riverParams(jobs))
	return err
}

func (s *riverSys) enqueueOne(ctx context.Context, j job) error {
	_, err := s.client.Insert(ctx, benchArgs{ID: j.ID, Due: j.Due}, riverOpts(j))
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
