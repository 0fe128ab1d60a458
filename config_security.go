package ontime

// Security configuration: API tokens and TLS, secrets read from files or
// the environment, the target policy, webhook signing keys. Secrets are
// resolved once (resolveSecrets) and every resolved value is handed to the
// node's redactor, so none reaches a log line or an error.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/policy"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
	"github.com/ontimehq/ontime/internal/redact"
	"github.com/ontimehq/ontime/internal/tlsreload"
)

// AuthConfig configures the API's bearer tokens.
type AuthConfig struct {
	Tokens []TokenConfig `yaml:"tokens"`
	// Insecure lets `listen` be a non-loopback address with no tokens:
	// anyone who reaches the port can then do anything.
	Insecure bool `yaml:"insecure"`
}

// TokenConfig is one API token. The token itself is never in the config:
// it is read from token_file or the environment variable token_env.
type TokenConfig struct {
	Name      string `yaml:"name"`       // shown in 403 answers, never the token
	TokenFile string `yaml:"token_file"` // a file holding the token (trailing white space ignored)
	TokenEnv  string `yaml:"token_env"`  // or the environment variable holding it
	Role      string `yaml:"role"`       // read | write | admin | metrics
	Topics    string `yaml:"topics"`     // optional topic glob ("orders.*") the token is limited to
}

// TLSConfig serves the API over TLS. The files are read again on SIGHUP
// and when they change, so certificates rotate without a restart.
type TLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// SigningConfig is a webhook secret for some topics or one destination,
// beside the global delivery.webhook_secret; the first entry that matches
// a delivery signs it.
type SigningConfig struct {
	Topics      string `yaml:"topics"`      // topic glob ("orders.*")
	Destination string `yaml:"destination"` // scheme://host[:port]
	SecretFile  string `yaml:"secret_file"`
	SecretEnv   string `yaml:"secret_env"`
	// The previous secret during a rotation: calls carry a signature by
	// each, so receivers may move to the new one at their pace.
	PreviousSecretFile string `yaml:"previous_secret_file"`
	PreviousSecretEnv  string `yaml:"previous_secret_env"`
}

// MinTokenLen: a token shorter than this can be guessed.
const MinTokenLen = 16

// secrets is the configuration's secrets, read.
type secrets struct {
	tokens        []api.Token
	auth          *api.Auth // nil with no tokens
	keys          *webhook.Keyring
	redisPassword string // hot.redis_password_file
	// coordRedisPassword and zkPassword: cluster.redis_password_file,
	// cluster.zookeeper_password_file.
	coordRedisPassword, zkPassword string
	etcdPassword                   string
	all                            []string
	red                            *redact.Redactor
}

// redactor masks every secret of the config.
func (s *secrets) redactor() *redact.Redactor {
	if s.red == nil {
		s.red = redact.New(s.all...)
	}
	return s.red
}

// readSecret reads a secret from a file or an environment variable; key
// names the config key in errors, which never hold the value.
func readSecret(key, file, env string, getenv func(string) (string, bool)) (string, error) {
	switch {
	case file != "" && env != "":
		return "", fmt.Errorf("%s: give a file or an environment variable, not both", key)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s: %s is empty", key, file)
		}
		return v, nil
	case env != "":
		v, ok := getenv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("%s: environment variable %s is not set", key, env)
		}
		return strings.TrimSpace(v), nil
	}
	return "", nil
}

// loadFiles reads the values the config says are in files and that other
// checks need before the secrets are resolved: store.databases_file.
func (c *Config) loadFiles() error {
	if c.Store.DatabasesFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.Store.DatabasesFile)
	if err != nil {
		return fmt.Errorf("store.databases_file: %w", err)
	}
	var dsns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			dsns = append(dsns, l)
		}
	}
	if len(dsns) == 0 {
		return fmt.Errorf("store.databases_file: %s holds no DSN", c.Store.DatabasesFile)
	}
	c.Store.Databases = dsns
	return nil
}

// resolveSecrets reads every secret the config refers to.
func (c *Config) resolveSecrets(getenv func(string) (string, bool)) (*secrets, error) {
	s := &secrets{}
	for i, t := range c.Auth.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if t.TokenFile == "" && t.TokenEnv == "" {
			return nil, fmt.Errorf("%s: give token_file or token_env", key)
		}
		v, err := readSecret(key, t.TokenFile, t.TokenEnv, getenv)
		if err != nil {
			return nil, err
		}
		if len(v) < MinTokenLen {
			return nil, fmt.Errorf("%s: the token of %q is %d characters; at least %d", key, t.Name, len(v), MinTokenLen)
		}
		role, err := api.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("%s.role: %w", key, err)
		}
		s.tokens = append(s.tokens, api.Token{Name: t.Name, Secret: v, Role: role, Topics: t.Topics})
		s.all = append(s.all, v)
	}
	if len(s.tokens) > 0 {
		a, err := api.NewAuth(s.tokens)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	d := c.Delivery
	global := d.WebhookSecret
	if d.WebhookSecretFile != "" {
		if global != "" {
			return nil, errors.New("delivery.webhook_secret_file: give it or delivery.webhook_secret, not both")
		}
		v, err := readSecret("delivery.webhook_secret_file", d.WebhookSecretFile, "", getenv)
		if err != nil {
			return nil, err
		}
		global = v
	}
	keys := &webhook.Keyring{V1: d.SignatureV1}
	if global != "" {
		keys.Global = []string{global}
		prev, err := readSecret("delivery.webhook_previous_secret_file", d.WebhookPreviousSecretFile, "", getenv)
		if err != nil {
			return nil, err
		}
		if prev != "" {
			keys.Global = append(keys.Global, prev)
		}
	} else if d.WebhookPreviousSecretFile != "" {
		return nil, errors.New("delivery.webhook_previous_secret_file: set only beside a current secret")
	}
	for i, sc := range d.Signing {
		key := fmt.Sprintf("delivery.signing[%d]", i)
		cur, err := readSecret(key, sc.SecretFile, sc.SecretEnv, getenv)
		if err != nil {
			return nil, err
		}
		prev, err := readSecret(key+".previous", sc.PreviousSecretFile, sc.PreviousSecretEnv, getenv)
		if err != nil {
			return nil, err
		}
		e := webhook.KeyEntry{Topics: sc.Topics, Destination: strings.TrimRight(sc.Destination, "/")}
		if norm, err := deliver.ParseDestination(e.Destination); err == nil {
			e.Destination = norm // the lane key's form, which the keyring compares with
		}
		if cur != "" {
			e.Secrets = append(e.Secrets, cur)
		}
		if prev != "" {
			e.Secrets = append(e.Secrets, prev)
		}
		if err := webhook.ValidateEntry(key, e); err != nil {
			return nil, err
		}
		if e.Destination != "" {
			u, err := url.Parse(e.Destination)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
				return nil, fmt.Errorf("%s.destination: %q is not scheme://host[:port]", key, sc.Destination)
			}
		}
		keys.Entries = append(keys.Entries, e)
		s.all = append(s.all, e.Secrets...)
	}
	s.all = append(s.all, keys.Global...)
	s.keys = keys
	var err error
	if s.redisPassword, err = readSecret("hot.redis_password_file", c.Hot.RedisPasswordFile, "", getenv); err != nil {
		return nil, err
	}
	s.etcdPassword = c.Cluster.EtcdPassword
	if c.Cluster.EtcdPasswordFile != "" {
		if s.etcdPassword != "" {
			return nil, errors.New("cluster.etcd_password_file: give it or cluster.etcd_password, not both")
		}
		if s.etcdPassword, err = readSecret("cluster.etcd_password_file", c.Cluster.EtcdPasswordFile, "", getenv); err != nil {
			return nil, err
		}
	}
	if s.coordRedisPassword, err = readSecret("cluster.redis_password_file", c.Cluster.RedisPasswordFile, "", getenv); err != nil {
		return nil, err
	}
	if s.zkPassword, err = readSecret("cluster.zookeeper_password_file", c.Cluster.ZooKeeperPasswordFile, "", getenv); err != nil {
		return nil, err
	}
	s.all = append(s.all, s.redisPassword, s.etcdPassword, s.coordRedisPassword, s.zkPassword)
	for _, a := range append(slices.Clone(c.Hot.RedisAddrs), c.Cluster.RedisAddrs...) {
		s.all = append(s.all, redact.URLPassword(a))
	}
	for _, dsn := range append(slices.Clone(c.Store.Databases), c.Store.ExpandDatabases...) {
		s.all = append(s.all, redact.DSNPasswords(dsn)...)
	}
	return s, nil
}

// loopbackListen reports whether a listen address is reachable only from
// this host.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// validateSecurity checks the security keys that need no file read.
func (c *Config) validateSecurity() error {
	if len(c.Auth.Tokens) == 0 && !c.Auth.Insecure && !loopbackListen(c.Listen) {
		return fmt.Errorf("listen: %s is not a loopback address and auth.tokens is empty, so anyone who reaches the port could submit, cancel and read every task; configure auth.tokens, or set auth.insecure: true to accept that", c.Listen)
	}
	for i, t := range c.Auth.Tokens {
		if t.Name == "" {
			return fmt.Errorf("auth.tokens[%d].name: required", i)
		}
		if _, err := api.ParseRole(t.Role); err != nil {
			return fmt.Errorf("auth.tokens[%d].role: %w", i, err)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls: give both tls.cert_file and tls.key_file, or neither")
	}
	if _, err := c.targetPolicy(nil); err != nil {
		return err
	}
	if _, err := policy.NewMatcher("delivery.echo_error_targets", c.Delivery.EchoErrorTargets); err != nil {
		return err
	}
	for i, a := range c.Hot.RedisAddrs {
		if _, err := redisAddr(a); err != nil {
			return fmt.Errorf("hot.redis_addrs[%d]: %w", i, err)
		}
	}
	for i, a := range c.Cluster.RedisAddrs {
		if _, err := redisAddr(a); err != nil {
			return fmt.Errorf("cluster.redis_addrs[%d]: %w", i, err)
		}
	}
	return nil
}

// redisAddr checks one hot.redis_addrs (or cluster.redis_addrs) entry: host:port, or a redis:// or
// rediss:// URL carrying a user, a password, a database.
func redisAddr(a string) (string, error) {
	if !strings.Contains(a, "://") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", errors.New("not host:port or a redis:// / rediss:// URL")
		}
		return a, nil
	}
	u, err := url.Parse(a)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return "", errors.New("not host:port or a redis:// / rediss:// URL") // the URL may hold a password: not quoted
	}
	if u.Port() == "" {
		return "", errors.New("the URL has no port")
	}
	return u.Host, nil
}

// targetPolicy builds the delivery target policy: the config's rules and
// this node's own API addresses.
func (c *Config) targetPolicy(r policy.Resolver) (*policy.Policy, error) {
	return policy.New(policy.Config{Allow: c.Delivery.AllowTargets, Deny: c.Delivery.DenyTargets,
		Self: []string{c.Listen, c.Cluster.Advertise}, Resolver: r})
}

// echoPolicy says whose error answers may be quoted in last_error.
func (c *Config) echoPolicy() func(string) bool {
	if len(c.Delivery.EchoErrorTargets) == 0 {
		return nil
	}
	m, err := policy.NewMatcher("delivery.echo_error_targets", c.Delivery.EchoErrorTargets)
	if err != nil {
		return nil // validated before
	}
	return m.MatchURL
}

// tlsFiles builds a client TLS config from a CA file and an optional
// client certificate (etcd, Redis).
func tlsFiles(key, caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%s_ca_file: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s_ca_file: %s holds no PEM certificate", key, caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%s_cert_file, %s_key_file: give both or neither", key, key)
	}
	if certFile != "" {
		crt, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s_cert_file: %w", key, err)
		}
		cfg.Certificates = []tls.Certificate{crt}
	}
	return cfg, nil
}

// lookupIn is os.LookupEnv over an environment list.
func lookupIn(environ []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
}

// Resolver resolves the names of webhook targets before the target policy
// judges their addresses (WithResolver).
type Resolver = policy.Resolver

// WithResolver sets the resolver of webhook targets' names (default: the
// system's), for a private DNS, or for tests that make a name resolve to a
// denied address.
func WithResolver(r Resolver) NodeOption { return func(o *nodeOptions) { o.resolver = r } }

// auth is the API's token checker; nil with no tokens (loopback only).
func (n *Node) auth() *api.Auth { return n.sec.auth }

// etcdTLS is the client TLS of cluster.etcd_* files; nil when none is set.
func (c *Config) etcdTLS() (*tls.Config, error) {
	cl := c.Cluster
	if cl.EtcdCAFile == "" && cl.EtcdCertFile == "" && cl.EtcdKeyFile == "" {
		return nil, nil
	}
	return tlsFiles("cluster.etcd", cl.EtcdCAFile, cl.EtcdCertFile, cl.EtcdKeyFile)
}

// NewTLSReloader serves the API's tls.cert_file and tls.key_file, read
// again on SIGHUP or when they change; nil when TLS is not configured.
// The caller starts and stops it.
func (c *Config) NewTLSReloader(log *slog.Logger) (*tlsreload.Reloader, error) {
	if c.TLS.CertFile == "" {
		return nil, nil
	}
	return tlsreload.New(c.TLS.CertFile, c.TLS.KeyFile, 0, log)
}

// redactingSink masks secrets in a sink's errors, which become last_error
// (a receiver that answers with a header it was sent, say).
type redactingSink struct {
	s deliver.Sink
	r *redact.Redactor
}

func (s redactingSink) Deliver(ctx context.Context, d deliver.Delivery) error {
	return s.r.Error(s.s.Deliver(ctx, d))
}

// BatchSize is the wrapped sink's (the dispatcher batches a lane only
// when its sink is a BatchSink).
func (s redactingSink) BatchSize(dest string) int { return s.s.(deliver.BatchSink).BatchSize(dest) }

// DeliverBatch passes batches through, masking every error.
func (s redactingSink) DeliverBatch(ctx context.Context, ds []deliver.Delivery) []error {
	errs := s.s.(deliver.BatchSink).DeliverBatch(ctx, ds)
	for i, err := range errs {
		errs[i] = s.r.Error(err)
	}
	return errs
}
