package ontime

// Configuration of a node: defaults, then ontime.yaml (unknown keys are
// errors), then ONTIME_* environment overrides, then validation. Every
// error names the key it is about.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/operation"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// UnmarshalYAML reads "30s"-style strings.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("want a duration such as 30s")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 30s", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Config is the whole node configuration. Defaults are in Default.
type Config struct {
	Listen    string         `yaml:"listen"`   // API address; default 127.0.0.1:7070
	DataDir   string         `yaml:"data_dir"` // default ./ontime-data
	NodeID    string         `yaml:"node_id"`  // default <hostname>-<random>
	LogLevel  string         `yaml:"log_level"`
	LogFormat string         `yaml:"log_format"` // json (default) | text
	Store     StoreConfig    `yaml:"store"`
	Hot       HotConfig      `yaml:"hot"`
	Cluster   ClusterConfig  `yaml:"cluster"`
	Delivery  DeliveryConfig `yaml:"delivery"`
	HTTP      HTTPConfig     `yaml:"http"`
	Auth      AuthConfig     `yaml:"auth"` // API tokens (config_security.go)
	TLS       TLSConfig      `yaml:"tls"`  // API over TLS
	// Schedules are upserted when the node starts (schedules.go).
	Schedules []Schedule  `yaml:"schedules"`
	Jobs      []JobConfig `yaml:"jobs"` // scan jobs over the users' tables (config_jobs.go)
	// Outboxes are the users' outbox tables the node relays into tasks
	// (config_outbox.go, package outbox).
	Outboxes []OutboxConfig `yaml:"outboxes"`
	// Brokers names the message brokers mq://NAME/ADDRESS targets reach:
	// NAME → amqp(s)://, nats://, redis(s)://, mqtt(s):// URL.
	Brokers map[string]string `yaml:"brokers"`
	// Destinations are webhook destinations with settings of their own
	// (config_destinations.go): "https://host[:port]" → concurrency,
	// timeout, batch, rate.
	Destinations map[string]DestinationConfig `yaml:"destinations"`
	// Retention: config_retention.go.
	Retention RetentionConfig `yaml:"retention"`
	// Topics are settings per topic (config_topics.go): NAME → target,
	// the default target of the topic's tasks submitted without one.
	Topics map[string]TopicConfig `yaml:"topics"`
	// Metrics: config_metrics.go.
	Metrics MetricsConfig `yaml:"metrics"`
	// Tracing and Audit: config_observe.go.
	Tracing TracingConfig `yaml:"tracing"`
	Audit   AuditConfig   `yaml:"audit"`
	// Operations: how bulk operations (POST /v1/operations) walk the
	// task tables.
	Operations OperationsConfig `yaml:"operations"`
	// Debug: config_debug.go.
	Debug DebugConfig `yaml:"debug"`
}

// OperationsConfig paces bulk operations: each page of rows is one
// transaction, so its size bounds how long a page holds its rows' locks.
type OperationsConfig struct {
	PageSize  int      `yaml:"page_size"`  // rows per transaction; default 500, 10..10000
	PagePause Duration `yaml:"page_pause"` // rest between pages (room for the delivery path); default 0, at most 10s
}

// NewTables is the tables a new store of this config gets: Tables, or
// DefaultTables when unset. An existing store keeps the count it records.
func (c StoreConfig) NewTables() int {
	if c.Tables != 0 {
		return c.Tables
	}
	return DefaultTables
}

// maxEntries is hot.max_entries, or its tier's default when unset.
func (h HotConfig) maxEntries() int {
	switch {
	case h.MaxEntries != 0:
		return h.MaxEntries
	case h.Tier == "redis":
		return DefaultMaxEntries
	}
	return DefaultMemoryMaxEntries
}

// StoreConfig configures the task store.
type StoreConfig struct {
	Driver    string   `yaml:"driver"`    // sqlite | mysql | postgres
	Databases []string `yaml:"databases"` // one DSN per database; sqlite default: data_dir/ontime.db
	// Tables is N, the task tables per database. Unset (0): the
	// number the store was created with, and 1 for a new store (more
	// tables add pages to SQLite's commits, tables to the statements of
	// PostgreSQL and MariaDB, and no parallelism: docs/operations.md,
	// Capacity).
	Tables   int `yaml:"tables"`
	Segments int `yaml:"segments"` // scan segments per table; default 4
	// DatabasesFile, when set, replaces databases with the DSNs in this
	// file, one a line, so passwords stay out of the config.
	DatabasesFile string `yaml:"databases_file"`
	// MaxConnections bounds each node's pool per database (mysql,
	// postgres; SQLite has one writer and ignores it). Every node opens up
	// to this many to each database, so nodes × max_connections must stay
	// under the server's own limit (PostgreSQL's default max_connections
	// is 100). Default 32 (also when 0), 2..1000.
	MaxConnections int `yaml:"max_connections"`
	// Zones names the zone (data centre) of each database, one per entry
	// of databases (empty: no zones): the cluster gives a database's
	// items to nodes of its zone (cluster.zone) while any is alive.
	Zones []string `yaml:"zones"`
	// ExpandDatabases are the new, empty databases of the next expansion
	// (ontime store expand, POST /v1/store:expand), when the command or
	// the call names none: as many as databases, the first becoming the
	// twin of databases[0], and so on. After the cutover, move them to the
	// end of databases and empty this.
	ExpandDatabases []string `yaml:"expand_databases"`
}

// HotConfig configures the hot tier.
type HotConfig struct {
	Tier       string   `yaml:"tier"`        // memory | redis
	RedisAddrs []string `yaml:"redis_addrs"` // one: standalone; several: Redis Cluster
	Window     Duration `yaml:"window"`      // preheat window; default 30s
	Slots      int      `yaml:"slots"`       // redis sorted-set slots per topic; default 8
	// RedisPrefix namespaces the tier's keys, so clusters can share a Redis.
	RedisPrefix string `yaml:"redis_prefix"` // default "ontime"
	// MaxFireLead is how far ahead of their due time the tasks of a burst
	// may be marked running, so that the store's writes for thousands of
	// tasks due at one instant are done before it and all are delivered at
	// it. A task marked running can no longer be cancelled. Default 5s,
	// never more than hot.window; 0 marks every task running 20ms ahead,
	// whatever the load.
	MaxFireLead Duration `yaml:"max_fire_lead"`
	// MaxEntries bounds the entries the hot tier holds (with redis, the
	// tier the cluster shares): past it, scanners leave due tasks in the
	// store until there is room. Unset (0): 250,000 with the memory tier,
	// whose entries are in the node's memory (about 170 bytes each, and
	// each claim's lease kept alive by the node's heartbeat), 1,000,000
	// with redis.
	MaxEntries int `yaml:"max_entries"`
	// MaxBytes bounds the payload bytes of the tasks this node has started
	// and not delivered yet, which it holds in memory: past it, the fire
	// stage starts no more until deliveries finish (a start batch may pass
	// it by one batch). Default 256 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// RedisPasswordFile holds the Redis password (beside any in a
	// redis:// URL of redis_addrs, which it overrides).
	RedisPasswordFile string `yaml:"redis_password_file"`
	RedisCAFile       string `yaml:"redis_ca_file"` // rediss://: the CA to trust (default: the system's)
}

// ClusterConfig configures coordination.
type ClusterConfig struct {
	Coordinator   string   `yaml:"coordinator"` // none | database | etcd | redis | zookeeper
	EtcdEndpoints []string `yaml:"etcd_endpoints"`
	// LeaseTTL is how long a silent node keeps its items: a killed node's
	// items move to the others within it. Default 10s.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// Advertise is the API address other nodes and operators reach this node
	// at, shown in GET /v1/cluster. Default: listen.
	Advertise string `yaml:"advertise"`
	// Zone is the zone (data centre) this node runs in, [a-z0-9-]{1,32}
	// (empty: none): it takes the items of its zone's databases
	// (store.zones) first.
	Zone string `yaml:"zone"`
	// etcd credentials and TLS (endpoints https://host:port).
	EtcdUsername     string `yaml:"etcd_username"`
	EtcdPassword     string `yaml:"etcd_password"`
	EtcdPasswordFile string `yaml:"etcd_password_file"`
	EtcdCAFile       string `yaml:"etcd_ca_file"`
	EtcdCertFile     string `yaml:"etcd_cert_file"`
	EtcdKeyFile      string `yaml:"etcd_key_file"`
	// Redis coordinator (internal/cluster/rediscoord). RedisAddrs as the hot
	// tier's (one: standalone; several: Redis Cluster; with
	// RedisMasterName, Sentinels); empty: the hot tier's Redis, with its
	// password and CA. RedisPrefix: its keys are {PREFIX}:coord:…
	// (default: hot.redis_prefix).
	RedisAddrs        []string `yaml:"redis_addrs"`
	RedisMasterName   string   `yaml:"redis_master_name"`
	RedisPrefix       string   `yaml:"redis_prefix"`
	RedisPasswordFile string   `yaml:"redis_password_file"`
	RedisCAFile       string   `yaml:"redis_ca_file"`
	// ZooKeeper coordinator (internal/cluster/zkcoord): the ensemble's
	// servers, the root znode (default /ontime) and digest credentials.
	ZooKeeperServers      []string `yaml:"zookeeper_servers"`
	ZooKeeperPrefix       string   `yaml:"zookeeper_prefix"`
	ZooKeeperUsername     string   `yaml:"zookeeper_username"`
	ZooKeeperPasswordFile string   `yaml:"zookeeper_password_file"`
}

// DeliveryConfig configures how tasks are delivered.
type DeliveryConfig struct {
	WebhookSecret   string   `yaml:"webhook_secret"`
	Timeout         Duration `yaml:"timeout"`           // per webhook call and Go handler call (HandlerTimeout overrides); default 10s
	Concurrency     int      `yaml:"concurrency"`       // per destination; default 32
	MaxAttempts     int      `yaml:"max_attempts"`      // default for tasks; default 25
	MaxPayloadBytes int      `yaml:"max_payload_bytes"` // default 1 MiB
	// MaxResultBytes is the longest result a task keeps: a webhook's 2xx
	// JSON answer, a Go handler's Delivery.SetResult. 0 keeps none;
	// default 4 KiB, at most 1 MiB.
	MaxResultBytes  int      `yaml:"max_result_bytes"`
	RetryBase       Duration `yaml:"retry_base"`       // first retry delay; default 1s
	RetryMax        Duration `yaml:"retry_max"`        // cap; default 1h
	LeaseTTL        Duration `yaml:"lease_ttl"`        // claim lease beyond the due time; default 30s
	BreakerFailures int      `yaml:"breaker_failures"` // consecutive failures that open a destination's breaker; default 10
	BreakerOpenFor  Duration `yaml:"breaker_open_for"` // default 10s
	ShutdownGrace   Duration `yaml:"shutdown_grace"`   // how long SIGTERM waits for in-flight deliveries; default 15s
	// Signing and the target policy (config_security.go; docs/security.md).
	WebhookSecretFile         string          `yaml:"webhook_secret_file"`
	WebhookPreviousSecretFile string          `yaml:"webhook_previous_secret_file"` // rotation: still signed with
	Signing                   []SigningConfig `yaml:"signing"`                      // secrets per topic or destination
	SignatureV1               bool            `yaml:"signature_v1"`                 // also send v1 (no target bound) for old receivers
	AllowTargets              []string        `yaml:"allow_targets"`                // CIDRs, host globs
	DenyTargets               []string        `yaml:"deny_targets"`
	EchoErrorTargets          []string        `yaml:"echo_error_targets"` // whose error answers last_error may quote
	// BrokerConcurrency is the publishes in flight per broker address
	// (mq:// lane), all pipelined on the broker's one connection; default 1000.
	BrokerConcurrency int `yaml:"broker_concurrency"`
}

// HTTPConfig bounds what one client can make the API server hold: bytes
// of a request, time per request, connections.
type HTTPConfig struct {
	// MaxBatchBytes is the body limit of POST /v1/tasks:batch; a bigger
	// body is refused (413) when the limit is crossed, before the rest is
	// read. A batch is held whole while it is submitted, so this bounds
	// its memory. Default 64 MiB, never below one task's limit.
	MaxBatchBytes     int      `yaml:"max_batch_bytes"`
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"` // to read a request's headers; default 10s
	ReadTimeout       Duration `yaml:"read_timeout"`        // to read a whole request, body included; default 30s
	WriteTimeout      Duration `yaml:"write_timeout"`       // from the end of the headers to the end of the answer; default 60s
	IdleTimeout       Duration `yaml:"idle_timeout"`        // a keep-alive connection waiting for its next request; default 2m
	MaxConnections    int      `yaml:"max_connections"`     // open at once; more wait to be accepted; default 1024

	// MaxInflightBodyBytes bounds the bytes of request bodies the API
	// reads or holds at once, node wide: a body with a Content-Length
	// waits up to 5 s for its share, one without is refused 503 (retry)
	// when the share of its next piece is not there. Default 256 MiB,
	// never below max_batch_bytes.
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`

	// SlowRequest: a request that takes longer is logged at warn, with
	// its request ID. Default 1s; 1ms..1h.
	SlowRequest Duration `yaml:"slow_request"`
}

// Defaults and bounds of the configuration. Where a part of the pipeline
// checks or defaults the same value, these are that part's constants, so
// the config, the store, the router and the tiers cannot disagree.
const (
	DefaultListen              = "127.0.0.1:7070"
	DefaultDataDir             = "./ontime-data"
	DefaultTables              = sqlstore.DefaultTables // a new store's, every engine
	DefaultSegments            = 4
	MaxTables                  = router.MaxTables
	MaxSegments                = router.MaxSegments
	DefaultStoreMaxConnections = sqlstore.DefaultMaxConns
	MinStoreMaxConnections     = 2
	MaxStoreMaxConnections     = 1000
	DefaultWindow              = 30 * time.Second
	MinWindow, MaxWindow       = 100 * time.Millisecond, 24 * time.Hour
	DefaultMaxFireLead         = 5 * time.Second
	DefaultMaxEntries          = 1000000 // with the redis tier
	DefaultMemoryMaxEntries    = 250000  // with the memory tier
	DefaultHotMaxBytes         = 256 << 20
	MinHotMaxBytes             = 1 << 20
	MaxHotMaxBytes             = 1 << 40
	MaxMaxEntries              = 100000000
	MaxMaxFireLead             = time.Minute
	DefaultSlots               = hot.DefaultSlots
	MaxSlots                   = hot.MaxSlots
	DefaultRedisPrefix         = "ontime"
	DefaultClusterLeaseTTL     = cluster.DefaultLeaseTTL
	MinClusterLeaseTTL         = 300 * time.Millisecond
	MaxClusterLeaseTTL         = 10 * time.Minute
	DefaultTimeout             = deliver.DefaultTimeout
	DefaultConcurrency         = deliver.DefaultConcurrency
	DefaultMaxAttempts         = task.DefaultMaxAttempts
	DefaultMaxPayloadBytes     = task.DefaultMaxPayloadBytes
	DefaultMaxResultBytes      = deliver.DefaultMaxResultBytes
	MaxMaxResultBytes          = deliver.MaxMaxResultBytes
	DefaultRetryBase           = time.Second
	DefaultRetryMax            = time.Hour
	DefaultLeaseTTL            = hot.DefaultVisibility // a claim outlives its due time by this much
	DefaultBreakerFailures     = deliver.DefaultBreakerFailures
	DefaultBreakerOpenFor      = deliver.DefaultBreakerOpenFor
	DefaultShutdownGrace       = deliver.DefaultShutdownGrace
	DefaultMaxBatchBytes       = api.DefaultMaxBatchBytes
	MaxMaxBatchBytes           = 1 << 30
	DefaultMaxInflightBody     = api.DefaultMaxInflightBodyBytes
	MaxMaxInflightBody         = 1 << 40
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 30 * time.Second
	DefaultWriteTimeout        = time.Minute
	DefaultIdleTimeout         = 2 * time.Minute
	DefaultMaxConnections      = 1024
)

// Default returns the configuration of `ontime serve` with no file.
func DefaultConfig() Config {
	return Config{
		Listen:    DefaultListen,
		DataDir:   DefaultDataDir,
		LogLevel:  "info",
		LogFormat: "json",
		Store:     StoreConfig{Driver: "sqlite", Segments: DefaultSegments, MaxConnections: DefaultStoreMaxConnections},
		Hot: HotConfig{
			Tier: "memory", Window: Duration(DefaultWindow), Slots: DefaultSlots, RedisPrefix: DefaultRedisPrefix,
			MaxFireLead: Duration(DefaultMaxFireLead), MaxBytes: DefaultHotMaxBytes,
		},
		Cluster: ClusterConfig{Coordinator: "none", LeaseTTL: Duration(DefaultClusterLeaseTTL)},
		Delivery: DeliveryConfig{
			Timeout: Duration(DefaultTimeout), Concurrency: DefaultConcurrency, MaxAttempts: DefaultMaxAttempts,
			MaxPayloadBytes: DefaultMaxPayloadBytes, MaxResultBytes: DefaultMaxResultBytes, RetryBase: Duration(DefaultRetryBase), RetryMax: Duration(DefaultRetryMax),
			LeaseTTL: Duration(DefaultLeaseTTL), BreakerFailures: DefaultBreakerFailures, BreakerOpenFor: Duration(DefaultBreakerOpenFor),
			ShutdownGrace: Duration(DefaultShutdownGrace), BrokerConcurrency: DefaultBrokerConcurrency,
		},
		HTTP: HTTPConfig{
			MaxBatchBytes: DefaultMaxBatchBytes, MaxInflightBodyBytes: DefaultMaxInflightBody, ReadHeaderTimeout: Duration(DefaultReadHeaderTimeout),
			ReadTimeout: Duration(DefaultReadTimeout), WriteTimeout: Duration(DefaultWriteTimeout),
			IdleTimeout: Duration(DefaultIdleTimeout), MaxConnections: DefaultMaxConnections,
			SlowRequest: Duration(api.DefaultSlowRequest),
		},
		Retention:  defaultRetention(),
		Operations: OperationsConfig{PageSize: operation.DefaultPageSize},
		Metrics:    MetricsConfig{MaxTopics: DefaultMetricsMaxTopics},
		Tracing:    TracingConfig{SampleRatio: DefaultSampleRatio},
	}
}

// Load builds the configuration from path ("" for none) and the environment.
func LoadConfig(path string, environ []string) (Config, error) {
	c, err := loadConfig(path, environ)
	if err != nil {
		return Config{}, oneLine{err}
	}
	return c, nil
}

// oneLine is a config error as the one line `ontime serve` prints: a value
// quoted in it (a file name, a YAML scalar) may hold line breaks (found by
// FuzzConfigEnv: ONTIME_STORE_DATABASES_FILE="\n").
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", `\n`) }
func (e oneLine) Unwrap() error { return e.err }

func loadConfig(path string, environ []string) (Config, error) {
	c := DefaultConfig()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		if err := ParseConfig(b, &c); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return Config{}, err
	}
	if err := c.loadFiles(); err != nil {
		return Config{}, err
	}
	applyBrokerEnv(&c, environ)
	c.fill()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	// Read the secrets now, so a missing token file stops the start here.
	if _, err := c.resolveSecrets(lookupIn(environ)); err != nil {
		return Config{}, err
	}
	return c, nil
}

// fill derives the defaults that depend on other values.
func (c *Config) fill() {
	if c.Store.Driver == "sqlite" && len(c.Store.Databases) == 0 {
		c.Store.Databases = []string{filepath.Join(c.DataDir, "ontime.db")}
	}
	if c.NodeID == "" {
		h, _ := os.Hostname()
		if h == "" {
			h = "node"
		}
		c.NodeID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
}

// checkHostPort checks an address key: host:port with a numeric port.
func checkHostPort(key, v string) error {
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("%s: %q is not host:port", key, v)
	}
	return nil
}

// Validate checks every value.
func (c *Config) Validate() error {
	if err := checkHostPort("listen", c.Listen); err != nil {
		return err
	}
	if c.Cluster.Advertise != "" {
		// Checked here so the error names the key (found by FuzzConfigEnv:
		// the target policy's "own API address" error did not).
		if err := checkHostPort("cluster.advertise", c.Cluster.Advertise); err != nil {
			return err
		}
	}
	if c.DataDir == "" {
		return errors.New("data_dir: must not be empty")
	}
	if len(c.NodeID) > 64 {
		return fmt.Errorf("node_id: %d characters; at most 64", len(c.NodeID))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return fmt.Errorf("log_format: %q is not one of json, text", c.LogFormat)
	}
	switch c.Store.Driver {
	case "sqlite", "mysql", "postgres":
	default:
		return fmt.Errorf("store.driver: %q is not one of sqlite, mysql, postgres", c.Store.Driver)
	}
	if len(c.Store.Databases) == 0 {
		return fmt.Errorf("store.databases: at least one DSN is needed for driver %s", c.Store.Driver)
	}
	for i, d := range c.Store.Databases {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("store.databases[%d]: empty DSN", i)
		}
	}
	for i, d := range c.Store.ExpandDatabases {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("store.expand_databases[%d]: empty DSN", i)
		}
		if j := slices.Index(c.Store.ExpandDatabases[:i], d); j >= 0 {
			return fmt.Errorf("store.expand_databases[%d]: the same database as store.expand_databases[%d]", i, j)
		}
	}
	if len(c.Store.Zones) > 0 && len(c.Store.Zones) != len(c.Store.Databases) {
		return fmt.Errorf("store.zones: %d zones for %d databases: give one per database", len(c.Store.Zones), len(c.Store.Databases))
	}
	for i, z := range c.Store.Zones {
		if z == "" {
			return fmt.Errorf("store.zones[%d]: empty zone", i)
		}
		if err := cluster.CheckZone(fmt.Sprintf("store.zones[%d]", i), z); err != nil {
			return err
		}
	}
	if err := cluster.CheckZone("cluster.zone", c.Cluster.Zone); err != nil {
		return err
	}
	if err := (router.Topology{Databases: len(c.Store.Databases), Tables: c.Store.NewTables()}).Validate(); err != nil {
		return err
	}
	if c.Store.Segments < 1 || c.Store.Segments > MaxSegments {
		return fmt.Errorf("store.segments: %d is out of range 1..%d", c.Store.Segments, MaxSegments)
	}
	if n := c.Store.MaxConnections; n != 0 && (n < MinStoreMaxConnections || n > MaxStoreMaxConnections) {
		return fmt.Errorf("store.max_connections: %d is out of range %d..%d", n, MinStoreMaxConnections, MaxStoreMaxConnections)
	}
	switch c.Hot.Tier {
	case "memory":
	case "redis":
		if len(c.Hot.RedisAddrs) == 0 {
			return errors.New("hot.redis_addrs: at least one address is needed for hot.tier redis")
		}
		// Entries may be redis:// URLs: validateSecurity checks them.
	default:
		return fmt.Errorf("hot.tier: %q is not one of memory, redis", c.Hot.Tier)
	}
	if w := time.Duration(c.Hot.Window); w < MinWindow || w > MaxWindow {
		return fmt.Errorf("hot.window: %s is out of range %s..%s", w, MinWindow, MaxWindow)
	}
	if l := time.Duration(c.Hot.MaxFireLead); l < 0 || l > MaxMaxFireLead {
		return fmt.Errorf("hot.max_fire_lead: %s is out of range 0..%s", l, MaxMaxFireLead)
	}
	if c.Hot.MaxEntries < 0 || c.Hot.MaxEntries > MaxMaxEntries {
		return fmt.Errorf("hot.max_entries: %d is out of range 1..%d (0: the tier's default)", c.Hot.MaxEntries, MaxMaxEntries)
	}
	if c.Hot.MaxBytes < MinHotMaxBytes || c.Hot.MaxBytes > MaxHotMaxBytes {
		return fmt.Errorf("hot.max_bytes: %d is out of range %d..%d", c.Hot.MaxBytes, MinHotMaxBytes, MaxHotMaxBytes)
	}
	if c.Hot.Slots < 1 || c.Hot.Slots > MaxSlots {
		return fmt.Errorf("hot.slots: %d is out of range 1..%d", c.Hot.Slots, MaxSlots)
	}
	switch c.Cluster.Coordinator {
	case "none":
	case "database":
		if ttl := time.Duration(c.Cluster.LeaseTTL); ttl < MinClusterLeaseTTL || ttl > MaxClusterLeaseTTL {
			return fmt.Errorf("cluster.lease_ttl: %s is out of range %s..%s", ttl, MinClusterLeaseTTL, MaxClusterLeaseTTL)
		}
	case "etcd":
		if len(c.Cluster.EtcdEndpoints) == 0 {
			return errors.New("cluster.etcd_endpoints: at least one endpoint is needed for cluster.coordinator etcd")
		}
		for i, ep := range c.Cluster.EtcdEndpoints {
			if strings.TrimSpace(ep) == "" {
				return fmt.Errorf("cluster.etcd_endpoints[%d]: empty", i)
			}
		}
		if ttl := time.Duration(c.Cluster.LeaseTTL); ttl < time.Second || ttl > 10*time.Minute || ttl%time.Second != 0 {
			return fmt.Errorf("cluster.lease_ttl: %s must be whole seconds from 1s to 10m for etcd", ttl)
		}
	case "redis":
		if err := c.checkRedisCoordinator(); err != nil {
			return err
		}
	case "zookeeper":
		if err := c.checkZooKeeperCoordinator(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cluster.coordinator: %q is not one of none, database, etcd, redis, zookeeper", c.Cluster.Coordinator)
	}
	d := c.Delivery
	checks := []struct {
		key       string
		v, lo, hi time.Duration
	}{
		{"delivery.timeout", time.Duration(d.Timeout), 10 * time.Millisecond, time.Hour},
		{"delivery.retry_base", time.Duration(d.RetryBase), time.Millisecond, 24 * time.Hour},
		{"delivery.retry_max", time.Duration(d.RetryMax), time.Millisecond, 30 * 24 * time.Hour},
		{"delivery.lease_ttl", time.Duration(d.LeaseTTL), 100 * time.Millisecond, 24 * time.Hour},
		{"delivery.breaker_open_for", time.Duration(d.BreakerOpenFor), 10 * time.Millisecond, time.Hour},
		{"delivery.shutdown_grace", time.Duration(d.ShutdownGrace), 0, time.Hour},
	}
	for _, ck := range checks {
		if ck.v < ck.lo || ck.v > ck.hi {
			return fmt.Errorf("%s: %s is out of range %s..%s", ck.key, ck.v, ck.lo, ck.hi)
		}
	}
	if d.RetryMax < d.RetryBase {
		return fmt.Errorf("delivery.retry_max: %s is below delivery.retry_base %s", time.Duration(d.RetryMax), time.Duration(d.RetryBase))
	}
	if d.Concurrency < 1 || d.Concurrency > 10000 {
		return fmt.Errorf("delivery.concurrency: %d is out of range 1..10000", d.Concurrency)
	}
	if d.MaxAttempts < 1 || d.MaxAttempts > 1000 {
		return fmt.Errorf("delivery.max_attempts: %d is out of range 1..1000", d.MaxAttempts)
	}
	if d.MaxPayloadBytes < 1 || d.MaxPayloadBytes > 64<<20 {
		return fmt.Errorf("delivery.max_payload_bytes: %d is out of range 1..%d", d.MaxPayloadBytes, 64<<20)
	}
	if d.MaxResultBytes < 0 || d.MaxResultBytes > MaxMaxResultBytes {
		return fmt.Errorf("delivery.max_result_bytes: %d is out of range 0..%d (0 keeps no result)", d.MaxResultBytes, MaxMaxResultBytes)
	}
	if d.BreakerFailures < 1 || d.BreakerFailures > 1000000 {
		return fmt.Errorf("delivery.breaker_failures: %d is out of range 1..1000000", d.BreakerFailures)
	}
	if err := c.HTTP.validate(d.MaxPayloadBytes); err != nil {
		return err
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	if o := c.Operations; o.PageSize < 10 || o.PageSize > operation.MaxPageSize {
		return fmt.Errorf("operations.page_size: %d is out of range 10..%d", o.PageSize, operation.MaxPageSize)
	}
	if o := c.Operations; o.PagePause < 0 || time.Duration(o.PagePause) > 10*time.Second {
		return fmt.Errorf("operations.page_pause: %s is out of range 0..10s", time.Duration(o.PagePause))
	}
	if err := c.Tracing.validate(); err != nil {
		return err
	}
	if err := c.Audit.validate(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if err := validateOutboxes(c.Outboxes, c.Jobs); err != nil {
		return err
	}
	if err := validateJobs(c.Jobs); err != nil {
		return err
	}
	if err := validateBrokers(c.Brokers, d.BrokerConcurrency); err != nil {
		return err
	}
	if err := validateDestinations(c.Destinations); err != nil {
		return err
	}
	if err := c.Metrics.validate(); err != nil {
		return err
	}
	if err := c.Debug.validate(); err != nil {
		return err
	}
	if err := c.validateTopics(); err != nil {
		return err
	}
	return c.validateSchedules()
}

func (h HTTPConfig) validate(maxPayload int) error {
	// A batch must be able to carry one task of the largest payload.
	if lo := maxPayload + api.EnvelopeBytes; h.MaxBatchBytes < lo || h.MaxBatchBytes > MaxMaxBatchBytes {
		return fmt.Errorf("http.max_batch_bytes: %d is out of range %d..%d (delivery.max_payload_bytes + %d)", h.MaxBatchBytes, lo, MaxMaxBatchBytes, api.EnvelopeBytes)
	}
	// The budget must hold one batch of the largest size, or none could be read.
	if lo := int64(h.MaxBatchBytes); h.MaxInflightBodyBytes < lo || h.MaxInflightBodyBytes > MaxMaxInflightBody {
		return fmt.Errorf("http.max_inflight_body_bytes: %d is out of range %d..%d (at least http.max_batch_bytes)", h.MaxInflightBodyBytes, lo, int64(MaxMaxInflightBody))
	}
	for _, ck := range []struct {
		key string
		v   Duration
	}{
		{"http.read_header_timeout", h.ReadHeaderTimeout}, {"http.read_timeout", h.ReadTimeout},
		{"http.write_timeout", h.WriteTimeout}, {"http.idle_timeout", h.IdleTimeout},
	} {
		// Zero would mean "no limit" to net/http: the hole this closes.
		if v := time.Duration(ck.v); v < 10*time.Millisecond || v > 24*time.Hour {
			return fmt.Errorf("%s: %s is out of range 10ms..24h", ck.key, v)
		}
	}
	if h.MaxConnections < 1 || h.MaxConnections > 1000000 {
		return fmt.Errorf("http.max_connections: %d is out of range 1..1000000", h.MaxConnections)
	}
	if v := time.Duration(h.SlowRequest); v < time.Millisecond || v > time.Hour {
		return fmt.Errorf("http.slow_request: %s is out of range 1ms..1h", v)
	}
	return nil
}
