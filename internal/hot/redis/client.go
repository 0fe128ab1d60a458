package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// ClientConfig is how a part of ontime reaches Redis: the hot tier and the
// Redis coordinator (internal/cluster/rediscoord) read the same settings
// the same way.
type ClientConfig struct {
	// Addrs: one: standalone; several: Redis Cluster; with MasterName,
	// Sentinel's addresses. Each is host:port or a redis:// / rediss://
	// URL (user, password, database, TLS).
	Addrs    []string
	Password string      // overrides a URL's password when set
	TLS      *tls.Config // for rediss:// (nil: the system's CAs)
	// MasterName is the master Sentinel watches, by name: Addrs are then
	// the Sentinels', and the client follows the master they name across
	// failovers.
	MasterName string
}

// Check validates the addresses; errors name field (the config key of
// Addrs), never quoting a URL, which may carry a password.
func (c ClientConfig) Check(field string) error {
	if len(c.Addrs) == 0 {
		return fmt.Errorf("%s: at least one address is required", field)
	}
	for i, a := range c.Addrs {
		if strings.Contains(a, "://") {
			if _, err := goredis.ParseURL(a); err != nil {
				return fmt.Errorf("%s[%d]: not a redis:// or rediss:// URL", field, i)
			}
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%s[%d]: %q is not host:port", field, i, a)
		}
	}
	if strings.ContainsAny(c.MasterName, " \t\n") {
		return errors.New("redis master name: must not contain spaces")
	}
	return nil
}

// Options reads the addresses, credentials and TLS of c (checked before):
// the first URL with a user, password or database gives them to all, as
// a cluster's nodes share them.
func (c ClientConfig) Options() *goredis.UniversalOptions {
	o := &goredis.UniversalOptions{IsClusterMode: len(c.Addrs) > 1 && c.MasterName == "", MasterName: c.MasterName}
	for _, a := range c.Addrs {
		if !strings.Contains(a, "://") {
			o.Addrs = append(o.Addrs, a)
			continue
		}
		u, _ := goredis.ParseURL(a)
		o.Addrs = append(o.Addrs, u.Addr)
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = u.Username, u.Password
		}
		if o.DB == 0 {
			o.DB = u.DB
		}
		if u.TLSConfig != nil && o.TLSConfig == nil {
			o.TLSConfig = u.TLSConfig
		}
	}
	if c.Password != "" {
		o.Password = c.Password
	}
	if o.TLSConfig != nil && c.TLS != nil {
		t := c.TLS.Clone()
		t.ServerName = o.TLSConfig.ServerName
		o.TLSConfig = t
	}
	o.Dialer = redialer(o.TLSConfig)
	o.DialTimeout = dialTimeout
	// One dial per go-redis attempt: redialer does the retrying.
	o.DialerRetries = 1
	return o
}
