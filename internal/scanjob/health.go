package scanjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A SQL job's state (Info.State); Go jobs are always StateOK.
const (
	// StateOK: the database took the job's statements when they were
	// last checked.
	StateOK = "ok"
	// StateBroken: the database refuses a statement of the job (a table
	// or column that does not exist, a typo in on_success.set, a value a
	// column refuses, a missing privilege): the job runs nothing until
	// the statements pass again (Info.Error says which and why).
	StateBroken = "broken"
	// StateUnchecked: the source did not answer when the statements were
	// to be checked (at registration, Info.Error says so): the job runs
	// nothing until a check passes, tried at a trigger at most every
	// brokenRecheck, for a statement never checked is not run.
	StateUnchecked = "unchecked"
)

// ErrBroken: the job's database refuses one of its statements.
var ErrBroken = errors.New("job broken")

const (
	// brokenRecheck: a broken or unchecked job checks its statements
	// again at a trigger at most this often (the first item of a trigger
	// checks, the others see its result), so that a table fixed or a
	// source back meanwhile brings the job back without a restart.
	brokenRecheck = 10 * time.Second
	// checkTimeout bounds one check of a job's statements.
	checkTimeout = 10 * time.Second
)

// health is a SQL job's standing with its database.
//
// Why a job breaks rather than retries: a run writes on_success.set after
// it delivered a page. If the database refuses that UPDATE (issue 25: a
// typo, `set: {stauts: 2}`, or a column dropped since), the rows keep
// matching the where filters, and every trigger would deliver the same
// page again, forever. So the statements are checked before anything is
// delivered — at registration, and again before the first run after a
// failure — and a write the database still refuses when tried a second
// time breaks the job: no item of it delivers a page until a check
// passes. The page in flight when it broke is delivered once more after
// the repair (at least once), never again and again.
type health struct {
	// checking lets one item of the job check at a time; the others wait
	// for its answer. mu guards the fields and is never held over a
	// database call (the job's view reads them).
	checking sync.Mutex
	mu       sync.Mutex
	// gen counts breaks: a check that started before one does not undo it.
	gen       int
	state     string
	err       string    // the database's refusal, naming the statement and table
	since     time.Time // when the job broke
	checkedAt time.Time
	// at is where the job broke (its first table when a check found it).
	at target
	// probe is the write the database refused at run time: a check runs
	// it again in a transaction it rolls back, since only running it may
	// find what refused it (a value the column does not take, a
	// constraint, a trigger).
	probe *stmt
	index *IndexCheck
}

// checkResult is what checking a job's statements found.
type checkResult struct {
	down   error       // a source database did not answer: nothing was checked
	broken error       // the database refused a statement (which, and on which table)
	at     target      // the table of the refused statement
	index  *IndexCheck // of the first table, when its fetch compiled
}

// check has the databases compile the job's statements on tables without
// changing a row: EXPLAIN of the fetch, of on_success's UPDATE and of the
// retry push-back. EXPLAIN plans a statement — its tables, columns, types
// and privileges — and runs nothing, on each of the three engines (MySQL
// and MariaDB since 5.6 and 10.0 for UPDATE; SQLite's EXPLAIN QUERY PLAN
// prepares it). The first table's fetch plan feeds the index check. Then
// probe, if any, runs in a transaction that is rolled back.
func (s *source) check(ctx context.Context, tables []target, probe *stmt, now time.Time) checkResult {
	var res checkResult
	seen := map[int]bool{}
	dbs := make([]int, 0, len(tables)+1)
	for _, tg := range tables {
		dbs = append(dbs, tg.db)
	}
	if probe != nil {
		dbs = append(dbs, probe.tg.db)
	}
	for _, db := range dbs {
		if seen[db] {
			continue
		}
		seen[db] = true
		if err := s.dbs[db].PingContext(ctx); err != nil {
			res.down = fmt.Errorf("source.databases[%d]: %w", db, err)
			return res
		}
	}
	for i, tg := range tables {
		// No cursor: a key > ? term would bind a number, which a text key
		// on PostgreSQL refuses.
		f := s.fetchStmt(tg, nil, now, s.spec.Page)
		plan, err := s.explain(ctx, tg.db, f.query, f.args)
		if err != nil {
			res.broken, res.at = fmt.Errorf("%s: %w", f, err), tg
			return res
		}
		if i == 0 {
			ic := s.indexCheck(ctx, tg, plan)
			res.index = &ic
		}
		writes := []stmt{s.doneStmt(tg, []any{nil})}
		if s.spec.RetryColumn != "" {
			writes = append(writes, s.failedStmt(tg, []any{nil}, 0, now))
		}
		for _, w := range writes {
			if _, err := s.explain(ctx, tg.db, w.query, w.args); err != nil {
				res.broken, res.at = fmt.Errorf("%s: %w", w, err), tg
				return res
			}
		}
	}
	if probe != nil {
		if err := s.rolledBack(ctx, *probe); err != nil {
			res.broken, res.at = fmt.Errorf("%s (run again, rolled back): %w", probe, err), probe.tg
		}
	}
	return res
}

// rolledBack runs a write in a transaction and rolls it back.
func (s *source) rolledBack(ctx context.Context, st stmt) error {
	tx, err := s.dbs[st.tg.db].BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, st.query, st.args...)
	return err
}

// firstTable is the table a job's statements are checked on.
func (s *source) firstTable() target { return target{db: 0, table: s.spec.TableName(0)} }

// applyCheck records what a check found; the caller holds h.mu.
func (s *Service) applyCheck(j *job, res checkResult, now time.Time) {
	h := j.health
	h.checkedAt = now
	switch {
	case res.down != nil:
		// Nothing known: a broken job stays broken, an unchecked one
		// unchecked.
		if h.state == StateUnchecked {
			h.err = "source unreachable " + res.down.Error()
			h.index = &IndexCheck{Table: j.src.firstTable().table, Warning: h.err}
		}
		s.log.Warn("job source unreachable: its statements are not checked", "job", j.name, "err", res.down)
	case res.broken != nil:
		if res.index != nil {
			h.index = res.index
		} else {
			h.index = &IndexCheck{Table: j.src.firstTable().table, Warning: "not checked: the job is broken (its fetch does not run)"}
		}
		s.breakJob(j, res.broken, res.at, nil, now)
	default:
		was := h.state
		h.state, h.err, h.since, h.probe = StateOK, "", time.Time{}, nil
		h.index = res.index
		s.m.Broken.WithLabelValues(j.name).Set(0)
		if was == StateBroken {
			s.log.Info("job repaired: the database takes its statements again", "job", j.name)
		}
		if ic := h.index; ic != nil && !ic.OK {
			s.log.Warn("job fetch has no index", "job", j.name, "table", ic.Table, "warning", ic.Warning, "plan", ic.Plan)
		}
	}
}

// breakJob marks the job broken; the caller holds h.mu. The ERROR is
// logged when the job breaks or its error changes, not at every trigger.
func (s *Service) breakJob(j *job, err error, at target, probe *stmt, now time.Time) {
	h := j.health
	msg := err.Error()
	if h.state != StateBroken || h.err != msg {
		s.log.Error("job broken: the database refuses its statement; no item runs until it passes", "job", j.name,
			"table", at.table, "err", err)
	}
	if h.state != StateBroken {
		h.since = now
	}
	h.gen++
	h.state, h.err, h.at, h.checkedAt = StateBroken, msg, at, now
	if probe != nil {
		h.probe = probe
	}
	s.m.Broken.WithLabelValues(j.name).Set(1)
}

// usable reports whether a SQL job may run an item now: an unchecked or
// broken job whose last check is brokenRecheck old is checked first (one
// item checks, the job's others wait for its answer).
func (s *Service) usable(ctx context.Context, j *job) bool {
	h := j.health
	h.mu.Lock()
	ok := h.state == StateOK
	h.mu.Unlock()
	if ok {
		return true
	}
	h.checking.Lock()
	defer h.checking.Unlock()
	h.mu.Lock()
	now := s.cfg.Clock.Now()
	switch {
	case h.state == StateOK:
		h.mu.Unlock()
		return true
	case now.Sub(h.checkedAt) < brokenRecheck:
		h.mu.Unlock()
		return false
	}
	tables := []target{j.src.firstTable()}
	if at := h.at; h.state == StateBroken && (at.db != tables[0].db || at.table != tables[0].table) {
		tables = append(tables, target{db: at.db, table: at.table})
	}
	probe, gen := h.probe, h.gen
	h.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	res := j.src.check(cctx, tables, probe, now)
	if res.down != nil {
		res.down = fmt.Errorf("when checked before a run: %w", res.down)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == gen {
		s.applyCheck(j, res, now)
	}
	return h.state == StateOK
}

// broken reports whether the job is broken now (a run stops before it
// delivers another page).
func (h *health) broken() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == StateBroken
}

// brokenErr is the error a run ends with when its job broke.
func (h *health) brokenErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Errorf("%w: %s", ErrBroken, h.err)
}

// statementFailed judges a statement of a run that the database refused
// with err: a source that does not answer is an outage (the run fails,
// the job stays as it is); one that answers and refuses it breaks the
// job. A write is tried once more first, for a refusal that does not last
// (a deadlock, a lock wait timeout, a connection cut); a fetch is checked
// with EXPLAIN, which tells a missing table or column from a query cut
// short. It returns the run's error, nil when the write passed again.
func (r *ItemRun) statementFailed(ctx context.Context, st stmt, err error) error {
	s, j := r.svc, r.job
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	refused, runErr := err, err
	var probe *stmt
	if st.what == "fetch" {
		_, xerr := j.src.explain(cctx, st.tg.db, st.query, st.args)
		if xerr == nil {
			return err
		}
		refused = xerr // the database's message, without the fetch's wrapping
	} else {
		_, err2 := j.src.exec(cctx, st)
		if err2 == nil {
			s.log.Warn("job statement failed once and passed again", "job", j.name, "item", r.item, "statement", st.String(), "err", err)
			return nil
		}
		refused, probe = err2, &st
		runErr = fmt.Errorf("%s: %w", st, refused)
	}
	if perr := j.src.dbs[st.tg.db].PingContext(cctx); perr != nil {
		return runErr
	}
	h := j.health
	h.mu.Lock()
	s.breakJob(j, fmt.Errorf("%s: %w", st, refused), st.tg, probe, s.cfg.Clock.Now())
	h.mu.Unlock()
	return h.brokenErr()
}
