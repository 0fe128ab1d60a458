package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
)

// The online cutover's fence (issue 30).
//
// Nodes keep running through an expansion's cutover. The expander records
// a pending cutover (expand_fence in the first database: the epoch it
// moves to and a deadline); every node reads it with its store mark
// (MarkInUse, every second), stops its pipeline, unmarks itself and waits;
// once no node is marked, the expander runs the last catch-up, records the
// 2M databases with the next epoch and clears the fence; the waiting nodes
// reopen the store with the 2M databases and serve again.
//
// A node that misses all of it (paused, partitioned from the first
// database) must not write by the old databases afterwards. Its writes are
// fenced by its mark: a node's store accepts writes only within
// FenceLease of the start of its last mark that found the topology
// unchanged, and the expander waits until every mark is MarkFresh old
// (longer than FenceLease) or gone. A node that learns of a newer epoch
// stops writing at once. This relies on the clocks of the nodes and of the
// expander agreeing to within MarkFresh − FenceLease (2 s): each mark, and
// the cutover before it begins, compares the host's clock with the first
// database's, and one more than MaxClockSkew (1 s) off it is refused
// (ErrClockSkew): the node's marks no longer extend its fence, the
// cutover does not begin. SQLite's nodes share one host's clock.

// Meta keys of the fence (in the first database).
const (
	// metaExpandFence is "EPOCH DEADLINE_µs" while a cutover is pending.
	metaExpandFence = "expand_fence"
)

// FenceLease is how long a node's store accepts writes after the start of
// a mark that found the store's topology unchanged (EnableFence), on
// MariaDB and PostgreSQL.
const FenceLease = 8 * time.Second

// SQLite's fence: its marks queue behind the one writer connection's
// transactions (a batch of 1,000 keyed tasks, deliveries' finishes), and
// one queued past 8 s stopped a node's writes (-race, a loaded machine).
// Its nodes share one host's clock, so the same 2 s margin holds for the
// skew; a cutover waits up to liteMarkFresh for a crashed node's mark.
const (
	liteFenceLease = 28 * time.Second
	liteMarkFresh  = 30 * time.Second
)

// fenceLease is FenceLease, or SQLite's.
func (s *Store) fenceLease() time.Duration {
	if s.d.name == "sqlite" {
		return liteFenceLease
	}
	return FenceLease
}

// markFresh is MarkFresh, or SQLite's.
func (s *Store) markFresh() time.Duration {
	if s.d.name == "sqlite" {
		return liteMarkFresh
	}
	return MarkFresh
}

// fenceGrace is how long after a pending cutover's deadline the nodes
// waiting for it give up and serve the old databases again: an expander
// killed during the fence must not stop the cluster for good, and one
// still running past its deadline does not flip (ExpandCutover).
const fenceGrace = 10 * time.Second

// fence is a store's write fence and its view of an expansion in copy.
type fence struct {
	on    atomic.Bool
	born  time.Time    // monotonic base of until and seen
	until atomic.Int64 // writes accepted before born + until (ns)
	// copyFrom is M while an expansion of M databases copies (retention
	// then keeps the rows that move: a row deleted after its copy would
	// come back on the twin); seen is when copyFrom was read (ns since
	// born).
	copyFrom atomic.Int64
	seen     atomic.Int64
}

// EnableFence makes the store refuse writes once FenceLease has passed
// since the start of the last MarkInUse that found the topology unchanged
// (Open counts as one). Nodes enable it; the CLI's store verbs do not.
func (s *Store) EnableFence() {
	s.fence.until.Store(int64(s.fenceLease()))
	s.fence.on.Store(true)
}

// fenced is nil when the store may write by its databases.
func (s *Store) fenced() error {
	if !s.fence.on.Load() || int64(time.Since(s.fence.born)) < s.fence.until.Load() {
		return nil
	}
	return fmt.Errorf("%w: this node has not confirmed the store's topology within %s (a cutover of an expansion, or the first database unreachable); writes wait for it", store.ErrUnavailable, s.fenceLease())
}

// TopologyState is what the first database records of the topology and of
// an expansion, as a node watches it.
type TopologyState struct {
	Epoch int64
	// Fence: a cutover to epoch FenceEpoch is pending until FenceUntil;
	// nodes stop their pipeline until the epoch moves on or the deadline
	// (plus a grace) passes.
	Fence      bool
	FenceEpoch int64
	FenceUntil time.Time
	Phase      string
	From       int
	// Twins are the DSNs the expander gave the new databases M…2M-1, as
	// it recorded them; empty when unknown.
	Twins []string
}

// Waiting reports whether a node seeing st should keep its pipeline
// stopped: a cutover is pending and its deadline has not lapsed.
func (st TopologyState) Waiting(now time.Time) bool {
	return st.Fence && now.Before(st.FenceUntil.Add(fenceGrace))
}

func parseTopologyState(meta map[string]string) TopologyState {
	var st TopologyState
	st.Epoch, _ = strconv.ParseInt(meta[metaEpoch], 10, 64)
	st.Phase = meta[metaExpandPhase]
	st.From, _ = strconv.Atoi(meta[metaExpandFrom])
	if f := strings.Fields(meta[metaExpandFence]); len(f) == 2 {
		e, err1 := strconv.ParseInt(f[0], 10, 64)
		u, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			st.Fence, st.FenceEpoch, st.FenceUntil = true, e, fromMicros(u)
		}
	}
	if st.From > 0 {
		for i := st.From; i < 2*st.From; i++ {
			dsn := meta[metaExpandDSN+strconv.Itoa(i)]
			if dsn == "" {
				st.Twins = nil
				break
			}
			st.Twins = append(st.Twins, dsn)
		}
	}
	return st
}

// MarkInUse records that node uses the store now, whatever its coordinator
// (only the database coordinator heartbeats into the store), and reads the
// topology: a cutover waits while a node marked itself within MarkFresh.
// A mark that finds the topology unchanged extends the store's write
// fence (EnableFence). It fails with ErrTopology when the store's
// databases changed since Open; the state is returned either way.
func (s *Store) MarkInUse(ctx context.Context, node string, now time.Time) (_ TopologyState, err error) {
	defer classify(&err)
	start := time.Since(s.fence.born)
	skew, err := s.clockSkew(ctx, now)
	if err != nil {
		return TopologyState{}, err
	}
	up := `INSERT INTO ontime_store_users (node_id, epoch, at) VALUES (?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET epoch = excluded.epoch, at = excluded.at`
	if s.d.name == "mysql" {
		up = `INSERT INTO ontime_store_users (node_id, epoch, at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), at = VALUES(at)`
	}
	if _, err := s.w[0].ExecContext(ctx, s.d.rebind(up), node, s.epoch, micros(now)); err != nil {
		return TopologyState{}, err
	}
	meta, err := readMeta(ctx, s.r[0])
	if err != nil {
		return TopologyState{}, err
	}
	st := parseTopologyState(meta)
	s.noteCopy(st, start)
	if st.Epoch != s.epoch {
		// Too late to write by the old databases: stop at once.
		s.fence.until.Store(0)
		return st, fmt.Errorf("%w: the store's databases changed while this node ran (topology epoch %d, now %d): restart it with store.databases as `ontime store status` lists them", ErrTopology, s.epoch, st.Epoch)
	}
	if skew != 0 {
		// Marks stamped by this clock could look stale to a cutover
		// while this node still writes: they no longer extend the fence.
		return st, skewError("this node", skew)
	}
	if lease := s.fenceLease(); s.fence.until.Load() < int64(start+lease) {
		s.fence.until.Store(int64(start + lease))
	}
	return st, nil
}

// MaxClockSkew is how far a node's or an expander's clock may be off the
// first database's: two within it of the database are within MarkFresh −
// FenceLease of each other, which the cutover's fence needs.
const MaxClockSkew = time.Second

// ErrClockSkew is wrapped by a mark or a cutover refused because the
// host's clock is more than MaxClockSkew off the first database's.
var ErrClockSkew = errors.New("clock skew")

func skewError(who string, skew time.Duration) error {
	return fmt.Errorf("%w: %s's clock is %s off the first database's (more than %s; an expansion's cutover relies on it): fix the host's time sync (NTP)", ErrClockSkew, who, skew.Round(time.Millisecond), MaxClockSkew)
}

// nowQuery asks a server engine for its clock, µs since the epoch.
var nowQuery = map[string]string{
	"postgres": `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`,
	"mysql":    `SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)`,
}

// clockSkew is how far now, read on this host just before, is off the
// first database's clock beyond MaxClockSkew and the query's round trip
// (0 within them, and on SQLite, whose nodes share a host).
func (s *Store) clockSkew(ctx context.Context, now time.Time) (time.Duration, error) {
	q := nowQuery[s.d.name]
	if q == "" {
		return 0, nil
	}
	t0 := time.Now()
	var us int64
	if err := s.w[0].QueryRowContext(ctx, q).Scan(&us); err != nil {
		return 0, err
	}
	half := time.Since(t0) / 2
	off := fromMicros(us).Sub(now.Add(half))
	if off < 0 {
		off = -off
	}
	if off-half <= MaxClockSkew {
		return 0, nil
	}
	return fromMicros(us).Sub(now.Add(half)), nil
}

// noteCopy records whether an expansion copies, as read at start.
func (s *Store) noteCopy(st TopologyState, start time.Duration) {
	from := int64(0)
	if st.Phase == PhaseCopy && st.From == len(s.w) {
		from = int64(st.From)
	}
	s.fence.copyFrom.Store(from)
	s.fence.seen.Store(int64(start))
}

// copyKnown is how recent a store's view of an expansion in copy must be
// for retention to delete: older, it deletes nothing until the next mark.
const copyKnown = 5 * time.Second

// retentionFilter is what retention adds to its deletes in database db:
// while an expansion copies, the rows that move are kept (a row deleted
// after its copy would come back on the twin; the next retention pass
// after the cutover deletes it there). ok is false when the store has not
// read the expansion's state recently enough to know.
func (s *Store) retentionFilter() (filter string, ok bool) {
	if time.Since(s.fence.born)-time.Duration(s.fence.seen.Load()) > copyKnown {
		return "", false
	}
	from := s.fence.copyFrom.Load()
	if from == 0 {
		return "", true
	}
	n := int64(s.cfg.Tables)
	return ` AND shard_hash % ` + strconv.FormatInt(2*from*n, 10) + ` < ` + strconv.FormatInt(from*n, 10), true
}

// goneFilter is the predicate of the rows a delete by ID or by filter
// (Purge, a bulk delete) must note in ontime_expand_gone as it deletes
// them: while an expansion copies, the rows that move (one copied before
// its delete would otherwise stay on the twin, and come back at the
// cutover). Empty when no copy runs. It reads the expansion's state when
// the marks have not recently.
func (s *Store) goneFilter(ctx context.Context) (string, error) {
	if err := s.refreshCopy(ctx); err != nil {
		return "", err
	}
	from := s.fence.copyFrom.Load()
	if from == 0 {
		return "", nil
	}
	n := int64(s.cfg.Tables)
	return `shard_hash % ` + strconv.FormatInt(2*from*n, 10) + ` >= ` + strconv.FormatInt(from*n, 10), nil
}

// refreshCopy reads the expansion's state for retention when the marks
// have not (a store without a node's mark: tests, embedded use).
func (s *Store) refreshCopy(ctx context.Context) error {
	if time.Since(s.fence.born)-time.Duration(s.fence.seen.Load()) <= copyKnown/2 {
		return nil
	}
	start := time.Since(s.fence.born)
	meta, err := readMeta(ctx, s.r[0])
	if err != nil {
		return err
	}
	s.noteCopy(parseTopologyState(meta), start)
	return nil
}

// Unmark removes node's mark (a node stopping): a cutover need not wait
// for it to go stale.
func (s *Store) Unmark(ctx context.Context, node string) (err error) {
	defer classify(&err)
	_, err = s.w[0].ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_store_users WHERE node_id = ?`), node)
	return err
}

// MarkFresh is how recent a node's mark keeps a cutover waiting: longer
// than FenceLease, so that a node whose mark is older writes no more
// (SQLite: liteMarkFresh).
const MarkFresh = 10 * time.Second

// usersSince lists the nodes marked in use since t.
func (s *Store) usersSince(ctx context.Context, t time.Time) ([]string, error) {
	return s.queryIDs(ctx, 0, `SELECT node_id FROM ontime_store_users WHERE at >= ? ORDER BY node_id`, micros(t))
}

// Watch reads the topology state of a store's first database while its
// node is stopped for a cutover (ontime serve waits with it).
type Watch struct {
	db *sql.DB
}

// OpenWatch connects to the first database of a store.
func OpenWatch(driver, dsn string) (*Watch, error) {
	opts := sqldb.Options{}
	if driver == sqldb.SQLite {
		opts.SQLite = "_pragma=busy_timeout(10000)&_pragma=query_only(1)"
	}
	db, err := sqldb.Open(driver, dsn, opts)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &Watch{db: db}, nil
}

// Read reads the first database's topology state.
func (w *Watch) Read(ctx context.Context) (_ TopologyState, err error) {
	defer classify(&err)
	meta, err := readMeta(ctx, w.db)
	if err != nil {
		return TopologyState{}, err
	}
	return parseTopologyState(meta), nil
}

// Close closes the connection.
func (w *Watch) Close() error { return w.db.Close() }

// Epoch is the topology epoch the store was opened at.
func (s *Store) Epoch() int64 { return s.epoch }
