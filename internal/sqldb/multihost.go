package sqldb

import (
	"cmp"
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hostOrder keeps the hosts of a multi-host PostgreSQL DSN in the order
// written, except that a host whose last attempt failed (no TCP
// connection, or a connection closed before it became a session) is tried
// after the others, the ones whose failed attempt took longest last. pgx
// tries the hosts in order for every new connection: when the first one
// stops answering (its data centre lost, its packets dropped) each attempt
// would wait out the connect timeout on it before reaching the next, and a
// caller whose deadline is shorter (a cluster heartbeat) would never reach
// the promoted replica. Ordering by the cost of the last failure puts a
// standby that refused a read-write session within milliseconds (and may
// since have been promoted) before a host that timed out. A host is back in
// its place once a session to it is made.
type hostOrder struct {
	mu    sync.Mutex
	names map[string]string        // looked-up address → host as written
	cost  map[string]time.Duration // host:port as written → how long its last failed attempt took; absent: it answered
}

func newHostOrder() *hostOrder {
	return &hostOrder{names: map[string]string{}, cost: map[string]time.Duration{}}
}

// failed records a failed attempt that took d; ok a session made.
func (h *hostOrder) failed(key string, d time.Duration) {
	h.mu.Lock()
	h.cost[key] = max(d, time.Nanosecond)
	h.mu.Unlock()
}

func (h *hostOrder) ok(key string) {
	h.mu.Lock()
	delete(h.cost, key)
	h.mu.Unlock()
}

// beforeConnect is a stdlib BeforeConnect hook: it reorders the hosts of
// the connection's config (a shallow copy of the pool's) and wraps its
// lookup and dial to learn which hosts answer.
func (h *hostOrder) beforeConnect(_ context.Context, cc *pgx.ConnConfig) error {
	all := make([]*pgconn.FallbackConfig, 0, 1+len(cc.Fallbacks))
	all = append(all, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
	all = append(all, cc.Fallbacks...)
	h.mu.Lock()
	cost := func(f *pgconn.FallbackConfig) time.Duration {
		return h.cost[net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))]
	}
	slices.SortStableFunc(all, func(a, b *pgconn.FallbackConfig) int { return cmp.Compare(cost(a), cost(b)) })
	h.mu.Unlock()
	cc.Host, cc.Port, cc.TLSConfig = all[0].Host, all[0].Port, all[0].TLSConfig
	cc.Fallbacks = all[1:]
	lookup, dial := cc.LookupFunc, cc.DialFunc
	cc.LookupFunc = func(ctx context.Context, name string) ([]string, error) {
		addrs, err := lookup(ctx, name)
		h.mu.Lock()
		for _, a := range addrs {
			h.names[a] = name
		}
		h.mu.Unlock()
		return addrs, err
	}
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ctx.Err() != nil {
			// The caller's deadline passed on an earlier host: this one
			// was not tried, so nothing is learnt of it.
			return nil, ctx.Err()
		}
		start := time.Now()
		c, err := dial(ctx, network, addr)
		ip, port, splitErr := net.SplitHostPort(addr)
		if splitErr != nil {
			return c, err // a Unix socket
		}
		if err == nil {
			setUserTimeout(c, MultiHostUserTimeout)
		}
		h.mu.Lock()
		// A lookup answers bare addresses or ip:port.
		name, ok := h.names[ip]
		if !ok {
			name, ok = h.names[addr]
		}
		h.mu.Unlock()
		if !ok {
			return c, err
		}
		key := net.JoinHostPort(name, port)
		if err != nil {
			h.failed(key, time.Since(start))
			return nil, err
		}
		return &trackedConn{Conn: c, h: h, key: key, start: start}, nil
	}
	return nil
}

// afterConnect is a stdlib AfterConnect hook: the session is made, so its
// host answers.
func (h *hostOrder) afterConnect(_ context.Context, conn *pgx.Conn) error {
	c := conn.PgConn().Conn()
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = u.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		tc.session.Store(true)
		h.ok(tc.key)
	}
	return nil
}

// trackedConn marks its host bad when it is closed before it became a
// session (a server that took the connection and never answered, or one
// that refused the session: a standby under target_session_attrs).
type trackedConn struct {
	net.Conn
	h       *hostOrder
	key     string
	start   time.Time // the dial's
	session atomic.Bool
}

func (c *trackedConn) Close() error {
	if !c.session.Load() {
		c.h.failed(c.key, time.Since(c.start))
	}
	return c.Conn.Close()
}
