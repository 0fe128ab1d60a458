package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/logbridge"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
)

// Config configures the tier.
type Config struct {
	// Addrs: one: standalone; several: Redis Cluster. Each is host:port or
	// a redis:// / rediss:// URL (user, password, database, TLS).
	Addrs      []string
	Password   string        // overrides a URL's password when set
	TLS        *tls.Config   // for rediss:// (nil: the system's CAs)
	Prefix     string        // key prefix; default "ontime"
	Slots      int           // slots per topic; default 8
	Visibility time.Duration // in-flight time before redelivery; default 30s
	// Resync is how often every slot's head is re-read, in case a wake-up
	// message was lost (a reconnect, a FLUSHALL). Default 2s.
	Resync time.Duration
	// EpochCheck is how often the tier checks that Redis still has its
	// data (the epoch key). Default 500ms.
	EpochCheck time.Duration
	// OnLost is called (from the tier's goroutine; it must not block)
	// when Redis lost the tier's data: the entries this node added are
	// gone, and only their holders can add them again.
	OnLost func()
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if err := c.client().Check("hot.redis_addrs"); err != nil {
		return err
	}
	if c.Prefix == "" {
		c.Prefix = "ontime"
	}
	if strings.ContainsAny(c.Prefix, "{} ") {
		return fmt.Errorf("hot.redis_prefix: %q must not contain braces or spaces", c.Prefix)
	}
	if c.Slots == 0 {
		c.Slots = hot.DefaultSlots
	}
	if c.Slots < 1 || c.Slots > hot.MaxSlots {
		return fmt.Errorf("hot.slots: %d is out of range 1..%d", c.Slots, hot.MaxSlots)
	}
	if c.Visibility == 0 {
		c.Visibility = hot.DefaultVisibility
	}
	if c.Visibility < 10*time.Millisecond {
		return fmt.Errorf("hot visibility: %s is below 10ms", c.Visibility)
	}
	if c.Resync == 0 {
		c.Resync = 2 * time.Second
	}
	if c.EpochCheck == 0 {
		c.EpochCheck = 500 * time.Millisecond
	}
	if c.EpochCheck < 10*time.Millisecond {
		return fmt.Errorf("hot epoch check: %s is below 10ms", c.EpochCheck)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Tier is the Redis hot tier. Between Start and Stop it listens for
// wake-ups from other nodes and re-reads every slot's head now and then;
// without them a Pop only learns of entries this process added. Close
// stops it and closes the connection.
type Tier struct {
	startstop.Base
	cfg Config
	rdb goredis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex
	next    map[slotKey]slotNext // when a slot may next have work
	changed chan struct{}        // closed and replaced when next moves earlier
	closed  bool

	epoch string // the epoch key's value as this tier last saw it
}

var _ hot.Tier = (*Tier)(nil)

const never = math.MaxInt64

// slotNext is when a slot may next have work, in µs: its earliest entry's
// time (a Pop taking entries ahead looks that much sooner) and its
// earliest in-flight entry's visibility deadline (judged by now alone).
// 0: look now.
type slotNext struct{ due, flight int64 }

// New connects, checks Redis answers and starts the wake-up listener.
func New(ctx context.Context, cfg Config) (*Tier, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// go-redis has one logger per process: the last tier made sets it.
	goredis.SetLogger(logbridge.Redis{Log: cfg.Logger})
	opts := universalOptions(cfg)
	rdb := goredis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("hot.redis_addrs: cannot reach Redis at %s: %w", strings.Join(opts.Addrs, ","), err)
	}
	t := &Tier{cfg: cfg, rdb: rdb, log: cfg.Logger, next: map[slotKey]slotNext{}, changed: make(chan struct{})}
	if err := t.refresh(pctx); err != nil {
		rdb.Close()
		return nil, err
	}
	epoch, err := t.readEpoch(pctx)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	t.epoch = epoch
	return t, nil
}

// universalOptions is cfg's ClientConfig.Options.
func universalOptions(cfg Config) *goredis.UniversalOptions { return cfg.client().Options() }

func (c *Config) client() ClientConfig {
	return ClientConfig{Addrs: c.Addrs, Password: c.Password, TLS: c.TLS}
}

const (
	// dialTimeout bounds one dial, redialer's retries included: an outage
	// shorter than this costs no failed dial.
	dialTimeout = 2 * time.Second
	// redialEvery is how soon after Redis listens again the tier connects.
	redialEvery = 20 * time.Millisecond
)

// redialer returns a dialer that, while Redis refuses connections, tries
// again every redialEvery until its context ends (dialTimeout), then makes
// the TLS handshake (once) when tls is set.
//
// Why not go-redis's own: it retries 5 times 100 ms apart, and counts every
// dial that failed; after PoolSize of them (20 on 2 cores, reached within
// the first half second of an outage when many callers dial) it dials no
// more and probes once a second. A redis-server restarted after being down
// a second stayed unreachable to the tier up to a second longer, and the
// epoch check, caught in those retries, noticed the lost data later still:
// tasks due in the outage fired up to 3.4 s late. Waiting in the dial
// leaves an outage shorter than dialTimeout without any failed dial, and
// connects within redialEvery of Redis answering.
func redialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{}
		for {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				startstop.Sleep(ctx, redialEvery)
				if ctx.Err() != nil {
					return nil, err
				}
				continue
			}
			if cfg == nil {
				return c, nil
			}
			tc := tls.Client(c, tlsFor(cfg, addr))
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("hot: redis TLS handshake with %s: %w", addr, err)
			}
			return tc, nil
		}
	}
}

// tlsFor names the server to verify from addr when cfg does not, as
// crypto/tls's own dialers do.
func tlsFor(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}

// Start runs the wake-up listener and the periodic resync.
func (t *Tier) Start(ctx context.Context) error {
	ctx, ok, started, stopped := t.StartInit(ctx)
	if !ok {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { t.watchEpoch(ctx) })
	wg.Go(func() { t.listen(ctx) })
	wg.Go(func() { startstop.Every(ctx, t.cfg.Resync, t.resync) })
	go func() {
		defer stopped()
		wg.Wait()
	}()
	started()
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// notifyLocked wakes sleeping Pops; t.mu is held.
func (t *Tier) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// lower moves a slot's next entry time earlier and wakes Pops if it did.
func (t *Tier) lower(k slotKey, at int64) {
	t.lowerBoth(k, slotNext{due: at, flight: at})
}

// lowerBoth moves a slot's next times earlier, each to at most to's, and
// wakes Pops if either moved.
func (t *Tier) lowerBoth(k slotKey, to slotNext) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.next[k]
	if !ok {
		cur = slotNext{due: never, flight: never}
	}
	if to.due >= cur.due && to.flight >= cur.flight {
		return
	}
	t.next[k] = slotNext{due: min(cur.due, to.due), flight: min(cur.flight, to.flight)}
	if !t.closed {
		t.notifyLocked()
	}
}

// refresh learns slots other nodes created and marks them to be looked at.
func (t *Tier) refresh(ctx context.Context) error {
	members, err := t.rdb.SMembers(ctx, registryKey(t.cfg.Prefix)).Result()
	if err != nil {
		return fmt.Errorf("hot: read slot registry: %w", err)
	}
	t.mu.Lock()
	for _, m := range members {
		if k, ok := parseRegistryMember(m); ok {
			if _, known := t.next[k]; !known {
				t.next[k] = slotNext{}
			}
		}
	}
	t.mu.Unlock()
	return nil
}

// listen applies wake-up messages: another node (or this one) added an
// entry that is now the head of its slot.
func (t *Tier) listen(ctx context.Context) {
	sub := t.rdb.Subscribe(ctx, wakeChannel(t.cfg.Prefix))
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			parts := strings.Split(msg.Payload, "|")
			if len(parts) != 3 {
				continue
			}
			k, ok := parseRegistryMember(parts[0] + "|" + parts[1])
			due, err := strconv.ParseInt(parts[2], 10, 64)
			if ok && err == nil {
				t.lower(k, due)
			}
		}
	}
}

// resync re-reads the registry and marks every slot to be looked at, every
// Resync: wake-ups are an optimisation, this is the guarantee.
func (t *Tier) resync(ctx context.Context) {
	if err := t.refresh(ctx); err != nil {
		t.log.Warn("hot: redis registry refresh failed", "err", err)
	}
	t.mu.Lock()
	t.lookAgainLocked()
	t.mu.Unlock()
}

// lookAgainLocked marks every slot to be looked at and wakes the sleeping
// Pops; t.mu is held.
func (t *Tier) lookAgainLocked() {
	for k := range t.next {
		t.next[k] = slotNext{}
	}
	if !t.closed {
		t.notifyLocked()
	}
}

// readEpoch returns the epoch key's value, writing a new one if the key is
// missing (the first node, or the data was lost).
func (t *Tier) readEpoch(ctx context.Context) (string, error) {
	key := epochKey(t.cfg.Prefix)
	if err := t.rdb.SetNX(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.FormatUint(rand.Uint64(), 36), 0).Err(); err != nil {
		return "", fmt.Errorf("hot: redis epoch: %w", err)
	}
	v, err := t.rdb.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("hot: redis epoch: %w", err)
	}
	return v, nil
}

// watchEpoch runs checkEpoch every EpochCheck, and again redialEvery after
// a check that could not reach Redis: an outage is when a loss is likely,
// and the check after Redis answers again is the one that finds it.
func (t *Tier) watchEpoch(ctx context.Context) {
	wait := t.cfg.EpochCheck
	for {
		startstop.Sleep(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		wait = t.cfg.EpochCheck
		if !t.checkEpoch(ctx) {
			wait = min(wait, redialEvery)
		}
	}
}

// checkEpoch notices when Redis lost the tier's data
// and tells the node (OnLost), so entries come back within about
// EpochCheck plus a claim instead of when their leases run out. Every node
// notices: the first to look writes a new epoch, the others see it
// changed.
// It says whether Redis answered.
func (t *Tier) checkEpoch(ctx context.Context) bool {
	v, err := t.readEpoch(ctx)
	if err != nil {
		return false // Redis away: the first check after it returns tells
	}
	t.mu.Lock()
	lost := v != t.epoch
	if lost {
		t.epoch = v
		t.lookAgainLocked()
	}
	t.mu.Unlock()
	if lost {
		t.log.Warn("hot: Redis lost the tier's data (flushed or restarted); claiming this node's tasks again")
		if t.cfg.OnLost != nil {
			t.cfg.OnLost()
		}
	}
	return true
}

// group splits entries by slot.
func (t *Tier) group(entries []hot.Entry) map[slotKey][]hot.Entry {
	out := map[slotKey][]hot.Entry{}
	for _, e := range entries {
		k := slotKey{topic: e.Topic, slot: slotOf(e.ID, t.cfg.Slots)}
		out[k] = append(out[k], e)
	}
	return out
}

func (t *Tier) keys(k slotKey) []string {
	return []string{k.store(t.cfg.Prefix), k.prepare(t.cfg.Prefix), k.tokens(t.cfg.Prefix), k.ready(t.cfg.Prefix)}
}

func (t *Tier) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Client is the tier's Redis client: the cluster-wide limits keep their
// state beside the tier's (internal/limit).
func (t *Tier) Client() goredis.UniversalClient { return t.rdb }

// Add puts entries in their slots: the script calls of every slot and the
// registry entries in one round trip, then a wake-up message for each slot
// whose head moved earlier.
func (t *Tier) Add(ctx context.Context, entries ...hot.Entry) error {
	if t.isClosed() {
		return hot.ErrClosed
	}
	groups := t.group(entries)
	slots := make([]slotKey, 0, len(groups))
	calls := make([]scriptCall, 0, len(groups))
	members := make([]any, 0, len(groups))
	for k, es := range groups {
		args := make([]any, 0, 4*len(es))
		for _, e := range es {
			args = append(args, e.ID, strconv.FormatInt(e.Token, 10), strconv.FormatInt(micros(e.DueAt), 10),
				strconv.Itoa(min(max(e.Priority, 0), task.MaxPriority)))
		}
		slots = append(slots, k)
		calls = append(calls, scriptCall{keys: t.keys(k), args: args})
		members = append(members, k.registryMember())
	}
	if len(calls) == 0 {
		return nil
	}
	registry := func(p goredis.Pipeliner) { p.SAdd(ctx, registryKey(t.cfg.Prefix), members...) }
	cmds, err := t.runScripts(ctx, addScript, calls, registry)
	// The slots whose calls went through have their entries, whatever
	// failed beside them: their heads count.
	var wakes []string
	for i, k := range slots {
		res, _ := cmds[i].StringSlice()
		if len(res) == 2 && res[1] != "" && res[0] != res[1] {
			head, _ := strconv.ParseFloat(res[1], 64)
			due := int64(head)
			t.lower(k, due)
			wakes = append(wakes, k.registryMember()+"|"+strconv.FormatInt(due, 10))
		}
	}
	if len(wakes) > 0 {
		if err := t.publish(ctx, wakes); err != nil {
			t.log.Warn("hot: redis wake-up publish failed; others notice at resync", "err", err)
		}
	}
	if err != nil {
		return fmt.Errorf("hot: redis add: %w", err)
	}
	return nil
}

// publish sends wake-up messages, in one round trip.
func (t *Tier) publish(ctx context.Context, msgs []string) error {
	ch := wakeChannel(t.cfg.Prefix)
	if len(msgs) == 1 {
		return t.rdb.Publish(ctx, ch, msgs[0]).Err()
	}
	pipe := t.rdb.Pipeline()
	for _, m := range msgs {
		pipe.Publish(ctx, ch, m)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Pop returns due entries (at most ahead before their time), sleeping
// until the earliest slot head.
func (t *Tier) Pop(ctx context.Context, max int, ahead time.Duration) ([]hot.Entry, error) {
	if max < 1 {
		max = 1
	}
	var aheadUs int64
	if ahead > 0 {
		aheadUs = ahead.Microseconds()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, hot.ErrClosed
		}
		now := time.Now()
		nowUs := micros(now)
		var ready []slotKey
		soonest := int64(never)
		for k, n := range t.next {
			if n.due <= nowUs+aheadUs || n.flight <= nowUs {
				ready = append(ready, k)
				// Claimed for this look; the script says what is next.
				t.next[k] = slotNext{due: never, flight: never}
				continue
			}
			if n.due != never {
				soonest = min(soonest, n.due-aheadUs)
			}
			soonest = min(soonest, n.flight)
		}
		changed := t.changed
		t.mu.Unlock()

		out, firstErr := t.popReady(ctx, ready, now, aheadUs, max)
		if len(out) > 0 {
			slices.SortFunc(out, func(a, b hot.Entry) int { return a.DueAt.Compare(b.DueAt) })
			return out, nil
		}
		if firstErr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, firstErr
		}
		if len(ready) > 0 {
			continue // the scripts may have set earlier heads
		}
		wait := time.Hour
		if soonest != never {
			wait = time.Until(time.UnixMicro(soonest))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// popReady runs the pop script on the ready slots, all in one round trip,
// sharing max between them; a slot that filled its share may hold more
// due entries, so while there is room the slots that did go again. It
// sets each slot's next times and returns what it moved to prepare, and
// the first error (the slots that failed are looked at again at once).
// Entries count as due aheadUs before their time; in-flight ones expire by
// now alone.
func (t *Tier) popReady(ctx context.Context, ready []slotKey, now time.Time, aheadUs int64, max int) ([]hot.Entry, error) {
	horizon := micros(now) + aheadUs
	var out []hot.Entry
	var firstErr error
	for len(ready) > 0 {
		room := max - len(out)
		if room <= 0 {
			// Not looked at: look again at once.
			for _, k := range ready {
				t.lower(k, 0)
			}
			break
		}
		look := ready[:min(len(ready), room)]
		for _, k := range ready[len(look):] {
			t.lower(k, 0)
		}
		shares := make([]int, len(look))
		calls := make([]scriptCall, len(look))
		for i, k := range look {
			shares[i] = room / len(look)
			if i < room%len(look) {
				shares[i]++
			}
			calls[i] = scriptCall{keys: t.keys(k), args: []any{
				strconv.FormatInt(micros(now), 10), strconv.FormatInt(micros(now.Add(t.cfg.Visibility)), 10), shares[i],
				task.DefaultPriorityStep.Microseconds(), strconv.FormatInt(horizon, 10)}}
		}
		cmds, _ := t.runScripts(ctx, popScript, calls, nil)
		ready = nil
		for i, k := range look {
			got, next, err := parsePop(cmds[i], k)
			if err != nil {
				t.lower(k, 0)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			out = append(out, got...)
			if len(got) == shares[i] && next.due <= horizon {
				ready = append(ready, k) // its share was full: there may be more due
				continue
			}
			t.lowerBoth(k, next)
		}
	}
	return out, firstErr
}

// parsePop reads one pop script's answer: the entries it moved to prepare
// and when the slot next has work.
func parsePop(cmd *goredis.Cmd, k slotKey) ([]hot.Entry, slotNext, error) {
	res, err := cmd.StringSlice()
	if err != nil {
		return nil, slotNext{}, fmt.Errorf("hot: redis pop: %w", err)
	}
	if len(res) < 2 {
		return nil, slotNext{}, fmt.Errorf("hot: redis pop: short reply %v", res)
	}
	var out []hot.Entry
	for i := 0; i+1 < len(res)-2; i += 2 {
		tok, due, ok := strings.Cut(res[i+1], "|")
		if !ok {
			continue // token record lost (FLUSHALL between calls): the lease covers it
		}
		prio := 0
		if p, d, ok := strings.Cut(due, "|"); ok {
			prio, _ = strconv.Atoi(p)
			due = d
		}
		tk, err1 := strconv.ParseInt(tok, 10, 64)
		d, err2 := strconv.ParseInt(due, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, hot.Entry{ID: res[i], Topic: k.topic, DueAt: time.UnixMicro(d), Token: tk, Priority: prio})
	}
	score := func(s string) int64 {
		f, err := strconv.ParseFloat(s, 64)
		if s == "" || err != nil {
			return never
		}
		return int64(f)
	}
	return out, slotNext{due: score(res[len(res)-2]), flight: score(res[len(res)-1])}, nil
}

// Ack removes in-flight entries, every slot's in one round trip.
func (t *Tier) Ack(ctx context.Context, entries ...hot.Entry) error {
	var calls []scriptCall
	for k, es := range t.group(entries) {
		args := make([]any, 0, 2*len(es))
		for _, e := range es {
			args = append(args, e.ID, strconv.FormatInt(e.Token, 10))
		}
		calls = append(calls, scriptCall{keys: t.keys(k), args: args})
	}
	if len(calls) == 0 {
		return nil
	}
	if _, err := t.runScripts(ctx, ackScript, calls, nil); err != nil {
		return fmt.Errorf("hot: redis ack: %w", err)
	}
	return nil
}

// Nack returns in-flight entries, due at retryAt, every slot's in one
// round trip.
func (t *Tier) Nack(ctx context.Context, retryAt time.Time, entries ...hot.Entry) error {
	if t.isClosed() {
		return hot.ErrClosed
	}
	var calls []scriptCall
	var slots []slotKey
	for k, es := range t.group(entries) {
		args := make([]any, 0, 1+2*len(es))
		args = append(args, strconv.FormatInt(micros(retryAt), 10))
		for _, e := range es {
			args = append(args, e.ID, strconv.FormatInt(e.Token, 10))
		}
		calls = append(calls, scriptCall{keys: t.keys(k), args: args})
		slots = append(slots, k)
	}
	if len(calls) == 0 {
		return nil
	}
	cmds, err := t.runScripts(ctx, nackScript, calls, nil)
	for i, k := range slots {
		if cmds[i].Err() == nil {
			t.lower(k, micros(retryAt))
		}
	}
	if err != nil {
		return fmt.Errorf("hot: redis nack: %w", err)
	}
	return nil
}

// Remove drops waiting entries, every slot's in one round trip.
func (t *Tier) Remove(ctx context.Context, entries ...hot.Entry) error {
	var calls []scriptCall
	for k, es := range t.group(entries) {
		args := make([]any, len(es))
		for i, e := range es {
			args[i] = e.ID
		}
		calls = append(calls, scriptCall{keys: t.keys(k), args: args})
	}
	if len(calls) == 0 {
		return nil
	}
	if _, err := t.runScripts(ctx, removeScript, calls, nil); err != nil {
		return fmt.Errorf("hot: redis remove: %w", err)
	}
	return nil
}

// Len counts waiting and in-flight entries of the known slots, in one
// round trip (the scanner asks while it holds its claims back).
func (t *Tier) Len(ctx context.Context) (int, error) {
	t.mu.Lock()
	keys := make([]slotKey, 0, len(t.next))
	for k := range t.next {
		keys = append(keys, k)
	}
	t.mu.Unlock()
	if len(keys) == 0 {
		return 0, nil
	}
	pipe := t.rdb.Pipeline()
	cards := make([]*goredis.IntCmd, 0, 3*len(keys))
	for _, k := range keys {
		cards = append(cards, pipe.ZCard(ctx, k.store(t.cfg.Prefix)), pipe.ZCard(ctx, k.prepare(t.cfg.Prefix)), pipe.ZCard(ctx, k.ready(t.cfg.Prefix)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cards {
		n += int(c.Val())
	}
	return n, nil
}

// Close stops the listener, wakes Pops and closes the connections.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.notifyLocked()
	t.mu.Unlock()
	t.Stop()
	return t.rdb.Close()
}
