package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/sqldb"
)

// Growing the store: M databases become 2M (the doubling of the two-level
// scheme). With N tables per database, a row of shard hash h sits in table
// h mod N of database (h mod M·N) / N; after doubling, in the same table of
// database (h mod 2M·N) / N, which is either the same database d or its
// twin d + M. So each table of each old database gives half its rows to
// the table of the same index in the twin, and nothing else moves.
//
// Phases, each one's progress stored in the first database (ontime_meta
// expand_* and one ontime_expansion row per source table), so that a
// killed expander resumes where it stopped:
//
//	copy     the rows whose slot moves are copied to the twin in keyset
//	         pages (id > last ORDER BY id), each replacing the rows of its
//	         IDs, so a page copied again after a crash changes nothing; the
//	         cursor is stored after each page; the nodes keep serving from
//	         the old databases and know nothing of the twins. Then catch-up
//	         passes copy the rows changed since the previous pass began
//	         (updated_at, less a margin for clocks and long transactions).
//	cutover  with the nodes running (fence.go): a pending cutover is
//	         recorded, every node stops writing and unmarks itself, a
//	         last catch-up pass runs with nothing writing, then the
//	         store's list becomes the 2M databases, the twins lose their
//	         "expanding" mark, and the topology epoch moves on; the nodes
//	         reopen the store with the 2M databases. Nodes started with
//	         the old config are refused from then on.
//	cleanup  the copies left behind in the old databases are deleted in
//	         small batches by their stored shard hash; meanwhile the nodes
//	         pass over them (ownedClause), so nothing is served twice.
//
// Before cutover, ExpandAbort returns the store to what it was: the twins'
// rows and identities are deleted and the record cleared.

// Meta keys of an expansion (in the first database).
const (
	metaExpandPhase = "expand_phase" // copy | cleanup
	metaExpandFrom  = "expand_from"  // M before the doubling
	metaExpandDSN   = "expand_dsn."  // the twins' DSNs, by index M…2M-1
	metaExpandPass  = "expand_pass"  // start of the last catch-up pass, µs
	metaExpandSince = "expand_since" // when the expansion began, µs
)

// Unit phases in ontime_expansion.
const (
	unitCopying = 0 // first pass under way (after_id is the cursor)
	unitCopied  = 1 // first pass done; catch-up passes follow
	unitCleaned = 2 // cleanup done for this source table
)

// Expansion phases as Status reports them.
const (
	PhaseNone    = ""
	PhaseCopy    = "copy"
	PhaseCleanup = "cleanup"
)

// ErrExpansion is wrapped by every refusal of an expansion step.
var ErrExpansion = errors.New("store expansion")

// catchUpMargin is how far before a pass began the next one looks: rows
// whose updated_at a node's clock set a little behind, or whose
// transaction committed a little after, are copied again rather than
// missed.
const catchUpMargin = 30 * time.Second

// ExpandOptions tunes an expansion.
type ExpandOptions struct {
	// Page is the rows per copy page (default 5,000 on PostgreSQL, 1,000
	// on the others) and per cleanup batch (default 500).
	Page int
	// OnProgress, when set, is called after every page.
	OnProgress func(ExpandStatus)
	// FenceWait is how long a cutover waits for the nodes to stop
	// writing (default 2 minutes).
	FenceWait time.Duration
	// Nice, from 0 to 100, makes the copy and the cleanup sleep after
	// each page that many times the page's own duration (1: half the
	// databases' time is left to the live load). 0: no sleep.
	Nice float64
	// Rate caps the rows copied or deleted per second (0: no cap).
	Rate int
	// Timings, when set, receives how a cutover's pause was spent.
	Timings *CutoverTimings
}

// CutoverTimings splits a cutover's pause: the nodes stop writing, the
// last catch-up pass copies what changed since the copy's, then the
// topology switches.
type CutoverTimings struct {
	Stopped time.Duration // announced → every node stopped writing
	CatchUp time.Duration // the last catch-up pass
}

// Validate names the option out of range.
func (o ExpandOptions) Validate() error {
	switch {
	case o.Page < 0 || o.Page > 10000:
		return fmt.Errorf("page: %d is out of range 0..10000", o.Page)
	case !(o.Nice >= 0 && o.Nice <= 100):
		return fmt.Errorf("nice: %g is out of range 0..100", o.Nice)
	case o.Rate < 0 || o.Rate > 10_000_000:
		return fmt.Errorf("rate: %d is out of range 0..10000000 rows per second", o.Rate)
	}
	return nil
}

// ExpandStatus is the stored state of an expansion.
type ExpandStatus struct {
	Phase     string    `json:"phase"`     // "", copy, cleanup
	From      int       `json:"from"`      // M
	To        int       `json:"to"`        // 2M
	Databases int       `json:"databases"` // the store's databases now
	Epoch     int64     `json:"epoch"`     // topology epoch
	Since     time.Time `json:"since"`     // when the expansion began
	Tables    int       `json:"tables"`    // source tables (M·N)
	Copied    int       `json:"copied"`    // tables whose first copy pass is done
	Cleaned   int       `json:"cleaned"`   // tables cleaned up
	RowsCopy  int64     `json:"rows_copied"`
	RowsClean int64     `json:"rows_deleted"`
}

// loadExpansion reads the expansion record of the first database.
func (s *Store) loadExpansion(ctx context.Context) (phase string, from int, dsns []string, meta map[string]string, err error) {
	meta, err = readMeta(ctx, s.w[0])
	if err != nil {
		return "", 0, nil, nil, err
	}
	phase = meta[metaExpandPhase]
	if phase == PhaseNone {
		return phase, 0, nil, meta, nil
	}
	from, err = strconv.Atoi(meta[metaExpandFrom])
	if err != nil || from < 1 {
		return "", 0, nil, nil, fmt.Errorf("ontime_meta holds expand_from %q", meta[metaExpandFrom])
	}
	for i := from; i < 2*from; i++ {
		dsns = append(dsns, meta[metaExpandDSN+strconv.Itoa(i)])
	}
	return phase, from, dsns, meta, nil
}

// ExpansionStatus reports the stored expansion state.
func (s *Store) ExpansionStatus(ctx context.Context) (st ExpandStatus, err error) {
	defer classify(&err)
	phase, from, _, meta, err := s.loadExpansion(ctx)
	if err != nil {
		return st, err
	}
	id, err := parseIdentity(meta)
	if err != nil {
		return st, err
	}
	st = ExpandStatus{Phase: phase, From: from, Databases: len(id.list), Epoch: id.epoch}
	if phase == PhaseNone {
		return st, nil
	}
	st.To = 2 * from
	if v, err := strconv.ParseInt(meta[metaExpandSince], 10, 64); err == nil {
		st.Since = fromMicros(v)
	}
	rows, err := s.w[0].QueryContext(ctx, `SELECT phase, copied, deleted FROM ontime_expansion`)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var ph int
		var c, d int64
		if err := rows.Scan(&ph, &c, &d); err != nil {
			return st, err
		}
		st.Tables++
		if ph >= unitCopied {
			st.Copied++
		}
		if ph >= unitCleaned {
			st.Cleaned++
		}
		st.RowsCopy += c
		st.RowsClean += d
	}
	return st, rows.Err()
}

// twins is the open pools of an expansion's new databases.
type twins struct {
	dbs []*sql.DB
	s   *Store
}

func (tw *twins) close() {
	for _, db := range tw.dbs {
		db.Close()
	}
}

// openTwins connects to the new databases and migrates them; for SQLite
// the writer pool, which also serves the copy's reads of them.
func (s *Store) openTwins(ctx context.Context, field string, dsns []string, from int) (*twins, error) {
	tw := &twins{s: s}
	for i, dsn := range dsns {
		var db *sql.DB
		var err error
		if s.cfg.Driver == "sqlite" {
			db, err = openLiteWriter(ctx, dsn)
		} else {
			db, _, err = s.connect(ctx, dsn)
		}
		if err != nil {
			tw.close()
			return nil, fmt.Errorf("%s[%d] (store database %d): %w", field, i, from+i, err)
		}
		tw.dbs = append(tw.dbs, db)
		if err := withRetry(ctx, func() error { return s.migrate(ctx, db) }); err != nil {
			tw.close()
			return nil, fmt.Errorf("%s[%d] (store database %d): %w", field, i, from+i, err)
		}
	}
	return tw, nil
}

// ExpandBegin records an expansion of the store's M databases to 2M, dsns
// being the M new ones (in order: dsns[i] becomes database M+i, the twin
// of database i). Each must be an empty database of no store. Begun twice
// with the same DSNs, it does nothing the second time.
func (s *Store) ExpandBegin(ctx context.Context, dsns []string) error {
	return s.ExpandBeginAs(ctx, "--databases", dsns)
}

// recordedTwins names the new databases as an expansion recorded them.
const recordedTwins = "the expansion's new databases"

// ExpandBeginAs is ExpandBegin with the new databases named field in its
// errors: where they came from (--databases, store.expand_databases, the
// API's databases).
func (s *Store) ExpandBeginAs(ctx context.Context, field string, dsns []string) (err error) {
	defer classify(&err)
	m := len(s.w)
	phase, from, recorded, _, err := s.loadExpansion(ctx)
	if err != nil {
		return err
	}
	switch phase {
	case PhaseCopy:
		if from == m && (len(dsns) == 0 || strings.Join(recorded, "\x00") == strings.Join(dsns, "\x00")) {
			return nil // resumed
		}
		return fmt.Errorf("%w: an expansion to %d databases is under way; finish it (ontime store expand) or abort it (ontime store abort)", ErrExpansion, 2*from)
	case PhaseCleanup:
		return fmt.Errorf("%w: the cleanup of the last expansion is under way; let it finish (ontime store expand)", ErrExpansion)
	}
	if len(dsns) != m {
		return fmt.Errorf("%w: %s: the store has %d databases; doubling it needs %d new ones, got %d", ErrExpansion, field, m, m, len(dsns))
	}
	if 2*m*s.cfg.Tables > router.MaxSlots {
		return fmt.Errorf("%w: %d databases × %d tables would exceed %d slots", ErrExpansion, 2*m, s.cfg.Tables, router.MaxSlots)
	}
	for i := range dsns {
		for j := range i {
			if dsns[j] == dsns[i] {
				return fmt.Errorf("%w: %s[%d] and %s[%d] are one database", ErrExpansion, field, j, field, i)
			}
		}
		for j, old := range s.cfg.DSNs {
			if old == dsns[i] {
				return fmt.Errorf("%w: %s[%d] is store.databases[%d]: the store has it already", ErrExpansion, field, i, j)
			}
		}
	}
	tw, err := s.openTwins(ctx, field, dsns, m)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExpansion, err) // a database given that does not answer
	}
	defer tw.close()
	first, err := readIdentity(ctx, s.w[0])
	if err != nil {
		return err
	}
	for i, db := range tw.dbs {
		id, err := readIdentity(ctx, db)
		if err != nil {
			return err
		}
		// A begin cut short (killed between marking the new databases
		// and recording the phase) left this one marked as the twin it
		// is to be, unused: it is taken again. Any other identity is
		// another store's, or a database in service.
		leftover := id.storeID == first.storeID && id.expanding && id.index == m+i
		if id.known() && !leftover {
			return fmt.Errorf("%w: %s[%d] already belongs to an ontime store (store ID %s): give an empty database", ErrExpansion, field, i, id.storeID)
		}
		for _, t := range s.names {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: %s[%d] has %d rows in %s: give an empty database", ErrExpansion, field, i, n, t)
			}
		}
		if err := s.setMeta(ctx, db, metaStoreID, first.storeID, metaDatabaseID, newRandomID(), metaDatabaseIndex, strconv.Itoa(m+i), metaExpanding, "1"); err != nil {
			return err
		}
	}
	now := time.Now().UnixMicro()
	kv := []string{metaExpandFrom, strconv.Itoa(m), metaExpandPass, strconv.FormatInt(now, 10), metaExpandSince, strconv.FormatInt(now, 10)}
	for i, dsn := range dsns {
		kv = append(kv, metaExpandDSN+strconv.Itoa(m+i), dsn)
	}
	// The phase last: a begin cut short leaves no expansion recorded.
	if _, err := s.w[0].ExecContext(ctx, `DELETE FROM ontime_expansion`); err != nil {
		return err
	}
	if err := s.clearGone(ctx); err != nil {
		return err
	}
	for d := range m {
		for t := range s.names {
			if _, err := s.w[0].ExecContext(ctx, s.d.rebind(`INSERT INTO ontime_expansion (src, tbl, phase) VALUES (?, ?, 0)`), d, t); err != nil {
				return err
			}
		}
	}
	if err := s.setMeta(ctx, s.w[0], append(kv, metaExpandPhase, PhaseCopy)...); err != nil {
		return err
	}
	s.log.Info("store expansion begun", "from", m, "to", 2*m)
	return nil
}

// moving is the predicate of the rows of a database of an M-database
// store that move to its twin when it doubles: h mod 2M·N ≥ M·N.
func (s *Store) moving(from int) (string, []any) {
	n := int64(s.cfg.Tables)
	return `shard_hash % ? >= ?`, []any{2 * int64(from) * n, int64(from) * n}
}

// ExpandCopy runs the copy phase to its end: the first pass of every
// source table not yet copied, from its stored cursor, then one catch-up
// pass over everything changed since the last pass began.
func (s *Store) ExpandCopy(ctx context.Context, o ExpandOptions) (err error) {
	defer classify(&err)
	phase, from, dsns, meta, err := s.loadExpansion(ctx)
	if err != nil {
		return err
	}
	if phase != PhaseCopy {
		return fmt.Errorf("%w: no copy under way (phase %q)", ErrExpansion, phase)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrExpansion, err)
	}
	tw, err := s.openTwins(ctx, recordedTwins, dsns, from)
	if err != nil {
		return err
	}
	defer tw.close()
	page := o.Page
	if page <= 0 {
		page = s.copyPageSize()
	}
	pace := newPacer(o, page)
	var units []expandUnit
	rows, err := s.w[0].QueryContext(ctx, `SELECT src, tbl, phase, after_id FROM ontime_expansion ORDER BY src, tbl`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var u expandUnit
		if err := rows.Scan(&u.src, &u.tbl, &u.phase, &u.after); err != nil {
			rows.Close()
			return err
		}
		units = append(units, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Retention keeps the rows that move while a copy runs (fence.go);
	// a node learns of the expansion within copyKnown: the first page
	// waits that long after the expansion began.
	if began, err := strconv.ParseInt(meta[metaExpandSince], 10, 64); err == nil {
		if wait := copyKnown + time.Second - time.Since(fromMicros(began)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	pass, _ := strconv.ParseInt(meta[metaExpandPass], 10, 64)
	pred, pargs := s.moving(from)
	for _, u := range units {
		if u.phase != unitCopying {
			continue
		}
		if err := s.copyUnit(ctx, tw, o, pace, u, from, page); err != nil {
			return err
		}
	}
	// Catch-up: everything changed since the pass before began. Rows that
	// ended first, then live ones, so that a stale live copy of a key
	// ends before the key's new live row arrives. The next pass starts
	// from this one's start, not from the first pages' (a change before
	// it is copied by it): the cutover's pass, inside the nodes' pause,
	// then copies the seconds since the copy's last pass, not every row
	// changed during a copy of millions.
	passStart := time.Now().UnixMicro()
	since := pass - catchUpMargin.Microseconds()
	if s.changesIndexed() {
		for _, u := range units {
			if err := s.addChangesIndex(ctx, s.w[u.src], s.names[u.tbl]); err != nil {
				return fmt.Errorf("catch up, database %d: %w", u.src, err)
			}
		}
	}
	for _, u := range units {
		t := s.names[u.tbl]
		for _, status := range []string{`status >= 3`, `status < 3`} {
			upd, after := since, ""
			for {
				start := time.Now()
				where, order, args := s.catchUpWhere(status, pred, pargs, since, upd, after)
				p := s.readPage(ctx, s.w[u.src], t, where, order, args, min(page, stmtRows))
				if p.err == nil && p.n > 0 {
					p.err = s.writePage(ctx, tw.dbs[u.src], t, p, false)
				}
				if p.err != nil {
					return fmt.Errorf("catch up %s of database %d: %w", t, u.src, p.err)
				}
				if err := pace.page(ctx, start, p.n); err != nil {
					return err
				}
				if !p.more {
					break
				}
				upd, after = p.lastUpd, p.last
			}
		}
	}
	if err := s.dropGone(ctx, tw, from, page); err != nil {
		return err
	}
	return s.setMeta(ctx, s.w[0], metaExpandPass, strconv.FormatInt(passStart, 10))
}

// dropGone deletes from the twins the rows deleted in their source since
// they were copied (noted in ontime_expand_gone by Purge and bulk deletes,
// in the transaction of the delete), then the notes. It runs after the
// copy's pages: a row whose note it reads is gone from the source, so no
// later page copies it again, and the pages before have written it.
func (s *Store) dropGone(ctx context.Context, tw *twins, from, page int) error {
	topo := router.Topology{Databases: from, Tables: len(s.names)}
	for d := range from {
		for {
			// On the writer: the notes the deletes committed are all there.
			ids, err := readIDs(ctx, s.w[d], `SELECT id FROM ontime_expand_gone ORDER BY id LIMIT `+strconv.Itoa(page))
			if err != nil {
				return fmt.Errorf("deleted rows of database %d: %w", d, err)
			}
			if len(ids) == 0 {
				break
			}
			byTable := map[int][]any{}
			all := make([]any, 0, len(ids))
			for _, id := range ids {
				all = append(all, id)
				p, err := router.ParseID(id)
				if err != nil {
					continue
				}
				_, t := topo.Locate(p.ShardHash)
				byTable[t] = append(byTable[t], id)
			}
			for t, tids := range byTable {
				if err := withRetry(ctx, func() error {
					_, err := tw.dbs[d].ExecContext(ctx, s.d.rebind(`DELETE FROM `+s.names[t]+` WHERE id IN (`+placeholders(len(tids))+`)`), tids...)
					return err
				}); err != nil {
					return fmt.Errorf("delete from the twin of database %d: %w", d, err)
				}
			}
			if _, err := s.execRetried(ctx, d, s.d.rebind(`DELETE FROM ontime_expand_gone WHERE id IN (`+placeholders(len(all))+`)`), all...); err != nil {
				return err
			}
			if len(ids) < page {
				break
			}
		}
	}
	return nil
}

// readIDs runs q, whose one column is an ID, on db and returns the IDs.
func readIDs(ctx context.Context, db querier, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// clearGone deletes the notes of deleted rows of every database.
func (s *Store) clearGone(ctx context.Context) error {
	for d := range s.w {
		if _, err := s.execRetried(ctx, d, `DELETE FROM ontime_expand_gone`); err != nil {
			return err
		}
	}
	return nil
}

// expandUnit is a source table of an expansion as ontime_expansion
// records it.
type expandUnit struct {
	src, tbl, phase int
	after           string // the first pass's cursor
}

// copyUnit runs the first pass of a source table from its cursor to its
// end, storing the cursor after each page. On MariaDB and SQLite the next
// page is read while one is written (readAhead).
func (s *Store) copyUnit(ctx context.Context, tw *twins, o ExpandOptions, pace *pacer, u expandUnit, from, size int) error {
	t := s.names[u.tbl]
	pred, pargs := s.moving(from)
	var pages <-chan page
	if s.d.name != "postgres" {
		var stop func()
		pages, stop = s.readAhead(ctx, s.w[u.src], t, pred, pargs, u.after, size)
		defer stop()
	}
	for {
		start := time.Now()
		var got int
		var last string
		var more bool
		var err error
		if pages == nil {
			got, last, more, err = s.copyPagePG(ctx, s.w[u.src], tw.dbs[u.src], t, u.after, from, size)
		} else {
			p, ok := <-pages
			switch {
			case !ok:
				if err = ctx.Err(); err == nil {
					err = errors.New("the pages' reader ended")
				}
			case p.err != nil:
				err = p.err
			case p.n > 0:
				err = s.writePage(ctx, tw.dbs[u.src], t, p, true)
			}
			got, last, more = p.n, p.last, p.more
		}
		if err != nil {
			return fmt.Errorf("copy %s of database %d: %w", t, u.src, err)
		}
		ph := unitCopying
		if !more {
			ph = unitCopied
		}
		if got > 0 {
			u.after = last
		}
		if _, err := s.w[0].ExecContext(ctx, s.d.rebind(`UPDATE ontime_expansion SET after_id = ?, copied = copied + ?, phase = ? WHERE src = ? AND tbl = ?`),
			u.after, got, ph, u.src, u.tbl); err != nil {
			return err
		}
		if o.OnProgress != nil {
			if st, err := s.ExpansionStatus(ctx); err == nil {
				o.OnProgress(st)
			}
		}
		if err := pace.page(ctx, start, got); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// copyPage copies the rows of table t in src matching where, in ID order,
// at most limit (and pageBytes of payload), into the same table of dst,
// replacing the rows of their IDs (fresh: the rows are most likely new
// there, try a plain insert first). It returns how many it copied, the
// last ID, and whether more rows may match after it.
func (s *Store) copyPage(ctx context.Context, src, dst *sql.DB, t, where string, args []any, limit int, fresh bool) (int, string, bool, error) {
	p := s.readPage(ctx, src, t, where, `id`, args, limit)
	if p.err != nil || p.n == 0 {
		return 0, "", false, p.err
	}
	if err := s.writePage(ctx, dst, t, p, fresh); err != nil {
		return 0, "", false, err
	}
	return p.n, p.last, p.more, nil
}

// page is a page of rows read for a copy: n rows of cols in vals.
type page struct {
	vals []any
	n    int
	last string // the last row's ID
	// lastUpd is the last row's updated_at
	lastUpd int64
	more    bool // more rows may match after last
	err     error
}

// readPage reads the rows of table t in src matching where, in order (id,
// or updated_at, id), at most limit and pageBytes of payload.
func (s *Store) readPage(ctx context.Context, src *sql.DB, t, where, order string, args []any, limit int) page {
	rows, err := src.QueryContext(ctx, s.d.rebind(`SELECT `+cols+` FROM `+t+` WHERE `+where+` ORDER BY `+order+` LIMIT `+strconv.Itoa(limit)), args...)
	if err != nil {
		return page{err: err}
	}
	defer rows.Close()
	var p page
	bytes, cut := 0, false
	for rows.Next() {
		row := make([]any, nCols)
		ptrs := make([]any, nCols)
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return page{err: err}
		}
		switch id := row[0].(type) {
		case string:
			p.last = id
		case []byte:
			p.last = string(id)
		}
		p.lastUpd = toInt64(row[colUpdatedAt])
		p.vals = append(p.vals, row...)
		p.n++
		if bytes += rowBytes(row); bytes >= pageBytes {
			cut = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return page{err: err}
	}
	p.more = cut || p.n == limit
	return p
}

// writePage writes p into table t of dst in statements of at most
// stmtRows rows and stmtBytes of payload.
func (s *Store) writePage(ctx context.Context, dst *sql.DB, t string, p page, fresh bool) error {
	for lo := 0; lo < p.n; {
		hi, b := lo, 0
		for hi < p.n && hi-lo < stmtRows && (hi == lo || b < stmtBytes) {
			b += rowBytes(p.vals[hi*nCols : (hi+1)*nCols])
			hi++
		}
		if err := s.writeRows(ctx, dst, t, p.vals[lo*nCols:hi*nCols], hi-lo, fresh); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// readAhead reads the pages of the copy's first pass of table t in src
// after ID after, each while the one before is written: a goroutine that
// ends when the table does, on an error (sent), or when stop is called;
// stop waits for it.
func (s *Store) readAhead(ctx context.Context, src *sql.DB, t, pred string, pargs []any, after string, limit int) (<-chan page, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan page, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for {
			p := s.readPage(ctx, src, t, `id > ? AND `+pred, `id`, append([]any{after}, pargs...), limit)
			select {
			case out <- p:
			case <-ctx.Done():
				return
			}
			if p.err != nil || !p.more {
				return
			}
			after = p.last
		}
	}()
	return out, func() { cancel(); <-done }
}

// rowBytes is the size of a row's variable columns, roughly.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch x := v.(type) {
		case []byte:
			n += len(x)
		case string:
			n += len(x)
		}
	}
	return n
}

// writeRows writes n rows of cols (vals) into table t of dst, replacing
// the rows of their IDs.
func (s *Store) writeRows(ctx context.Context, dst *sql.DB, t string, vals []any, n int, fresh bool) error {
	// Delete then insert, in one transaction: a row copied before is
	// replaced whole. Not INSERT … ON DUPLICATE KEY UPDATE: on MariaDB a
	// clash on the live key index would update another row.
	ids := make([]any, n)
	for i := range n {
		ids[i] = vals[i*nCols]
	}
	upsert := func() error {
		return withRetry(ctx, func() error {
			if fresh {
				// The first pass: the rows are new to the twin unless a
				// killed copy wrote this page before (then: replace).
				_, err := dst.ExecContext(ctx, s.insertRows(t, n), vals...)
				if err == nil || !uniqueViolation(err) {
					return err
				}
			}
			tx, err := dst.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM `+t+` WHERE id IN (`+placeholders(n)+`)`), ids...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.insertRows(t, n), vals...); err != nil {
				return err
			}
			return tx.Commit()
		})
	}
	err := upsert()
	if err != nil && uniqueViolation(err) {
		// A live row of the page has a key whose earlier task the twin
		// holds as live still: that task ended after it was copied, and
		// the catch-up pass copies it again (its updated_at is past the
		// pass's start). Its stale copy goes; the key is the page's row's.
		for i := 0; i < n; i++ {
			row := vals[i*nCols : (i+1)*nCols]
			if row[colKey] == nil || toInt64(row[colStatus]) >= 3 {
				continue
			}
			if _, err := dst.ExecContext(ctx, s.d.rebind(`DELETE FROM `+t+` WHERE topic = ? AND task_key = ? AND status < 3 AND id <> ?`), row[colTopic], row[colKey], row[0]); err != nil {
				return err
			}
		}
		err = upsert()
	}
	return err
}

// Positions in cols of the columns copyPage looks at.
var (
	colTopic     = slices.Index(colNames, "topic")
	colKey       = slices.Index(colNames, "task_key")
	colStatus    = slices.Index(colNames, "status")
	colUpdatedAt = slices.Index(colNames, "updated_at")
)

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case []byte:
		n, _ := strconv.ParseInt(string(x), 10, 64)
		return n
	}
	return 0
}

// colNames are the columns of cols, which a copy reads and writes whole:
// a column added to the task tables (and to cols) is copied with the rest.
var colNames = strings.Split(cols, ", ")

// nCols is the number of columns in cols.
var nCols = len(colNames)

// insertRows is the statement that writes n rows of cols into t.
func (s *Store) insertRows(t string, n int) string {
	row := "(" + placeholders(nCols) + ")"
	return s.d.rebind(`INSERT INTO ` + t + ` (` + cols + `) VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", "))
}

// ExpandCutover switches the store to its 2M databases while the nodes
// run (fence.go): it records a pending cutover, waits until no node is
// marked in use (each stops its pipeline and unmarks itself; a node that
// cannot is fenced by its mark going stale), runs a last catch-up pass
// with nothing writing, then records the new list in every database with
// the next epoch and clears the fence; the nodes then reopen the store
// with the 2M databases. Nodes still marked after o.FenceWait: the fence
// is lifted, the nodes serve the old databases again, and it fails.
func (s *Store) ExpandCutover(ctx context.Context, o ExpandOptions) (err error) {
	defer classify(&err)
	phase, from, dsns, _, err := s.loadExpansion(ctx)
	if err != nil {
		return err
	}
	if phase != PhaseCopy {
		return fmt.Errorf("%w: no copy under way to cut over (phase %q)", ErrExpansion, phase)
	}
	st, err := s.ExpansionStatus(ctx)
	if err != nil {
		return err
	}
	if st.Copied < st.Tables {
		return fmt.Errorf("%w: %d of %d tables copied; run the copy to its end first", ErrExpansion, st.Copied, st.Tables)
	}
	if skew, err := s.clockSkew(ctx, time.Now()); err != nil {
		return err
	} else if skew != 0 {
		return fmt.Errorf("%w: %w", ErrExpansion, skewError("this host", skew))
	}
	wait := o.FenceWait
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	// The deadline covers the wait, then MarkFresh for stale marks, then
	// the last catch-up: past it, the waiting nodes go back to serving.
	deadline := time.Now().Add(wait + s.markFresh() + time.Minute)
	if err := s.setMeta(ctx, s.w[0], metaExpandFence, strconv.FormatInt(st.Epoch+1, 10)+" "+strconv.FormatInt(micros(deadline), 10)); err != nil {
		return err
	}
	fenced := false
	defer func() {
		if !fenced {
			// Lifted with a context of its own: a cancelled cutover
			// must not leave the nodes waiting until the deadline.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := s.w[0].ExecContext(lctx, s.d.rebind(`DELETE FROM ontime_meta WHERE k = ?`), metaExpandFence); err != nil {
				s.log.Warn("store expansion: lift the fence", "err", err)
			}
		}
	}()
	s.log.Info("store expansion: cutover pending, waiting for the nodes to stop writing", "epoch", st.Epoch+1)
	announced := time.Now()
	giveUp := time.Now().Add(wait)
	for {
		users, err := s.usersSince(ctx, time.Now().Add(-s.markFresh()))
		if err != nil {
			return err
		}
		if len(users) == 0 {
			break
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("%w: nodes %s kept writing for %s after the cutover was announced (a node of a version without the online cutover, or an embedded node that does not watch TopologyChanged); the copy stands, nothing changed: stop them or upgrade them and run it again", ErrExpansion, strings.Join(users, ", "), wait)
		}
		if o.OnProgress != nil {
			st.Phase = "cutover"
			o.OnProgress(st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopped := time.Now()
	if o.Timings != nil {
		o.Timings.Stopped = stopped.Sub(announced)
	}
	// Unpaced: the nodes wait for this pass, so pacing it would only
	// lengthen their pause.
	last := o
	last.Nice, last.Rate = 0, 0
	if err := s.ExpandCopy(ctx, last); err != nil {
		return err
	}
	if o.Timings != nil {
		o.Timings.CatchUp = time.Since(stopped)
	}
	tw, err := s.openTwins(ctx, recordedTwins, dsns, from)
	if err != nil {
		return err
	}
	defer tw.close()
	first, err := readIdentity(ctx, s.w[0])
	if err != nil {
		return err
	}
	list := append([]string(nil), first.list...)
	for _, db := range tw.dbs {
		id, err := readIdentity(ctx, db)
		if err != nil {
			return err
		}
		list = append(list, id.dbID)
	}
	epoch := first.epoch + 1
	if time.Until(deadline) < 5*time.Second {
		return fmt.Errorf("%w: the last catch-up outlasted the cutover's deadline; the nodes go back to the old databases: run it again", ErrExpansion)
	}
	if err := s.copyOpProgress(ctx, tw); err != nil {
		return err
	}
	fenced = true // the flip below clears the fence with the phase
	kv := listMeta(list, epoch)
	// The twins first (no longer expanding), then the old databases, the
	// first one last with the phase: a cutover cut short is run again.
	for _, db := range tw.dbs {
		if err := s.setMeta(ctx, db, append(kv, metaExpanding, "0")...); err != nil {
			return err
		}
	}
	for i := len(s.w) - 1; i >= 0; i-- {
		extra := []string{}
		if i == 0 {
			extra = []string{metaExpandPhase, PhaseCleanup, metaExpandFence, ""}
		}
		if err := s.setMeta(ctx, s.w[i], append(kv, extra...)...); err != nil {
			return err
		}
	}
	s.log.Info("store expansion cut over", "from", from, "to", 2*from, "epoch", epoch)
	return nil
}

// copyOpProgress gives each twin the progress of the bulk operations on
// its source's tables: a progress row is keyed by database index, and a
// twin without one would walk the moved rows again (a reschedule by a
// shift applied twice). The twin's table holds only rows of its source's
// table and rows created after the cutover, which no operation created
// before matches, so the source's cursor and done hold for it; the counts
// start at 0, the source's row having counted the moved rows.
func (s *Store) copyOpProgress(ctx context.Context, tw *twins) error {
	for d, dst := range tw.dbs {
		rows, err := s.w[d].QueryContext(ctx, `SELECT op_id, tbl, pos, done FROM ontime_operation_progress`)
		if err != nil {
			return fmt.Errorf("operations' progress of database %d: %w", d, err)
		}
		var vals [][]any
		for rows.Next() {
			var op, pos string
			var tbl, done int
			if err := rows.Scan(&op, &tbl, &pos, &done); err != nil {
				rows.Close()
				return err
			}
			vals = append(vals, []any{op, tbl, pos, done})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		err = withRetry(ctx, func() error {
			tx, err := dst.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `DELETE FROM ontime_operation_progress`); err != nil {
				return err
			}
			for _, v := range vals {
				if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO ontime_operation_progress (op_id, tbl, pos, matched, changed, pages, done) VALUES (?, ?, ?, 0, 0, 0, ?)`), v...); err != nil {
					return err
				}
			}
			return tx.Commit()
		})
		if err != nil {
			return fmt.Errorf("operations' progress of database %d: %w", d+len(tw.dbs), err)
		}
	}
	return nil
}

// ExpandAbort undoes an expansion before its cutover: the twins' copies
// and identities are deleted and the record cleared.
func (s *Store) ExpandAbort(ctx context.Context) (err error) {
	defer classify(&err)
	phase, from, dsns, _, err := s.loadExpansion(ctx)
	if err != nil {
		return err
	}
	switch phase {
	case PhaseNone:
		return fmt.Errorf("%w: no expansion to abort", ErrExpansion)
	case PhaseCleanup:
		return fmt.Errorf("%w: the expansion has cut over; it can only finish (ontime store expand)", ErrExpansion)
	}
	tw, err := s.openTwins(ctx, recordedTwins, dsns, from)
	if err != nil {
		return err
	}
	defer tw.close()
	for _, db := range tw.dbs {
		for _, t := range s.names {
			if _, err := db.ExecContext(ctx, `DELETE FROM `+t); err != nil {
				return err
			}
		}
		for _, k := range []string{metaStoreID, metaDatabaseID, metaDatabaseIndex, metaExpanding} {
			if _, err := db.ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_meta WHERE k = ?`), k); err != nil {
				return err
			}
		}
	}
	if err := s.dropChangesIndexes(ctx, from); err != nil {
		return err
	}
	return s.clearExpansion(ctx, from, false)
}

// clearExpansion deletes the record of an expansion; done (the cleanup
// finished) keeps expand_from and the new databases' DSNs, by which a node
// that was stopped for the cutover and reads the state only now still
// learns the grown list (WaitTopology). The next expansion replaces them.
func (s *Store) clearExpansion(ctx context.Context, from int, done bool) error {
	keys := []string{metaExpandPhase, metaExpandPass, metaExpandSince, metaExpandFence}
	if !done {
		keys = append(keys, metaExpandFrom)
		for i := from; i < 2*from; i++ {
			keys = append(keys, metaExpandDSN+strconv.Itoa(i))
		}
	}
	for _, k := range keys {
		if _, err := s.w[0].ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_meta WHERE k = ?`), k); err != nil {
			return err
		}
	}
	if _, err := s.w[0].ExecContext(ctx, `DELETE FROM ontime_expansion`); err != nil {
		return err
	}
	return s.clearGone(ctx)
}

// ExpandCleanup deletes, in every old database, the rows that moved to its
// twin: pages of IDs by the stored shard hash, each deleted by ID, so no
// statement holds many locks. Progress is stored per table; when every
// table is clean the expansion record is cleared. The store must be open
// with the 2M databases.
func (s *Store) ExpandCleanup(ctx context.Context, o ExpandOptions) (err error) {
	defer classify(&err)
	phase, from, _, _, err := s.loadExpansion(ctx)
	if err != nil {
		return err
	}
	if phase != PhaseCleanup {
		return fmt.Errorf("%w: no cleanup under way (phase %q)", ErrExpansion, phase)
	}
	if len(s.w) != 2*from {
		return fmt.Errorf("%w: the cleanup runs with the store's %d databases in store.databases, not %d", ErrExpansion, 2*from, len(s.w))
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrExpansion, err)
	}
	page := o.Page
	if page <= 0 {
		page = 500
	}
	// The catch-up's index is of no use from here: its upkeep would slow
	// every write of the cleanup and of the nodes.
	if err := s.dropChangesIndexes(ctx, from); err != nil {
		return err
	}
	pace := newPacer(o, page)
	pred, pargs := s.moving(from)
	for d := range from {
		for ti, t := range s.names {
			var ph int
			if err := s.w[0].QueryRowContext(ctx, s.d.rebind(`SELECT phase FROM ontime_expansion WHERE src = ? AND tbl = ?`), d, ti).Scan(&ph); err != nil {
				return err
			}
			if ph >= unitCleaned {
				continue
			}
			// Keyset pages: each page starts after the last ID of the one
			// before, so a page reads its own rows and not again every row
			// the database keeps below them (a restarted cleanup begins
			// from the start once, which finds only what is left).
			after := ""
			for {
				start := time.Now()
				ids, err := s.queryIDs(ctx, d, `SELECT id FROM `+t+` WHERE `+pred+` AND id > ? ORDER BY id LIMIT `+strconv.Itoa(page), append(append([]any(nil), pargs...), after)...)
				if err != nil {
					return err
				}
				if len(ids) > 0 {
					after = ids[len(ids)-1]
					args := make([]any, 0, len(ids)+2)
					for _, id := range ids {
						args = append(args, id)
					}
					n, err := s.execRetried(ctx, d, s.d.rebind(`DELETE FROM `+t+` WHERE id IN (`+placeholders(len(ids))+`) AND `+pred), append(args, pargs...)...)
					if err != nil {
						return err
					}
					if _, err := s.w[0].ExecContext(ctx, s.d.rebind(`UPDATE ontime_expansion SET deleted = deleted + ? WHERE src = ? AND tbl = ?`), n, d, ti); err != nil {
						return err
					}
					if err := pace.page(ctx, start, int(n)); err != nil {
						return err
					}
				}
				if len(ids) < page {
					break
				}
				if o.OnProgress != nil {
					if st, err := s.ExpansionStatus(ctx); err == nil {
						o.OnProgress(st)
					}
				}
			}
			if _, err := s.w[0].ExecContext(ctx, s.d.rebind(`UPDATE ontime_expansion SET phase = ? WHERE src = ? AND tbl = ?`), unitCleaned, d, ti); err != nil {
				return err
			}
		}
	}
	if err := s.clearExpansion(ctx, from, true); err != nil {
		return err
	}
	s.log.Info("store expansion cleaned up", "databases", 2*from)
	return nil
}

// owned is the filter a query of database db adds while the copies that
// moved to the twins are still being deleted (phase cleanup): the rows the
// database keeps, h mod 2M·N < M·N. Literal numbers from the config, so
// it joins any statement without moving its arguments. Empty otherwise.
func (s *Store) owned(db int) string {
	if s.cleanupFrom == 0 || db >= s.cleanupFrom {
		return ""
	}
	n := int64(s.cfg.Tables)
	return ` AND shard_hash % ` + strconv.FormatInt(2*int64(s.cleanupFrom)*n, 10) + ` < ` + strconv.FormatInt(int64(s.cleanupFrom)*n, 10)
}

// from is table t of database db as a FROM term: t itself, or while a
// cleanup runs, the rows of t the database keeps, under t's name.
func (s *Store) from(db int, t string) string {
	if o := s.owned(db); o != "" {
		return `(SELECT * FROM ` + t + ` WHERE 1 = 1` + o + `) ` + t
	}
	return t
}

// openLiteWriter opens a SQLite database of an expansion's twins: one
// writer connection, as the store's own.
func openLiteWriter(ctx context.Context, dsn string) (*sql.DB, error) {
	if err := liteCreate(ctx, dsn); err != nil {
		return nil, err
	}
	db, err := sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"})
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
