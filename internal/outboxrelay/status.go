package outboxrelay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/outbox"
)

// SampleRows is how many failing rows a table's status lists.
const SampleRows = 5

// Wake makes every run of the relay on this node pass at once instead of
// waiting for its next poll: a message was just written (outbox.Put
// through the embedded node, or a PostgreSQL notification).
func (r *Relay) Wake() {
	r.m.Wakeups.WithLabelValues(r.cfg.Name, "call").Inc()
	r.wakeAll()
}

func (r *Relay) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.wake)
	r.wake = make(chan struct{})
}

// TasksEnded is told the outcomes a node's completer has just written
// for certain (complete.Config.Written): the ended ones (done, dead,
// cancelled) are kept a while, so that the finish loops finish their rows
// without reading the tasks back, and when one ends a task that an
// in-flight row of this node's items waits on, the items' finish loops
// run at once: the key's next message goes without waiting for a poll.
// Tasks ended by other nodes are found by the loops' periodic reads.
func (r *Relay) TasksEnded(batch []store.Outcome) {
	r.mu.Lock()
	hit := false
	for _, o := range batch {
		var e localEnd
		switch {
		case o.Done:
			e.status = task.StatusDone
		case o.Cancelled:
			e.status, e.err = task.StatusCancelled, o.Error
		case o.Dead:
			e.status, e.err = task.StatusDead, o.Error
		default:
			continue
		}
		if len(r.ends) >= endsMax {
			r.endsPrev, r.ends = r.ends, make(map[string]localEnd, endsMax)
		}
		r.ends[o.Ref.ID] = e
		if hit {
			continue
		}
		for _, ids := range r.watch {
			if _, ok := ids[o.Ref.ID]; ok {
				hit = true
				break
			}
		}
	}
	if hit {
		close(r.ended)
		r.ended = make(chan struct{})
	}
	r.mu.Unlock()
	if hit {
		r.m.Wakeups.WithLabelValues(r.cfg.Name, "ended").Inc()
	}
}

// localEnd is how a task this node's completer ended, ended.
type localEnd struct {
	status task.Status
	err    string // dead, cancelled: the outcome's error
}

// endsMax bounds each of the two generations of ended tasks a relay keeps
// (TasksEnded): a row whose task's end was dropped is finished by the
// next periodic read of its task.
const endsMax = 4096

// endedHere reports how a task ended if this node's completer ended it
// lately.
func (r *Relay) endedHere(id string) (localEnd, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.ends[id]; ok {
		return e, true
	}
	e, ok := r.endsPrev[id]
	return e, ok
}

func (r *Relay) endedCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// setWatch records the tasks item i's in-flight rows wait on (nil: none).
func (r *Relay) setWatch(i int, ids map[string]struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(ids) == 0 {
		delete(r.watch, i)
	} else {
		r.watch[i] = ids
	}
}

// addWatch adds to item i's watch the tasks of rows just put in flight.
func (r *Relay) addWatch(i int, ids map[string]struct{}) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.watch[i]
	if w == nil {
		w = make(map[string]struct{}, len(ids))
		r.watch[i] = w
	}
	for id := range ids {
		w[id] = struct{}{}
	}
}

func (r *Relay) wakeCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wake
}

// itemCounts is an item's rows as its table shows them.
type itemCounts struct {
	waiting, inFlight, setAside, heldKeys int64
}

// setCounts records item i's counts (nil: the item left the node) and
// publishes the sums over this node's items.
func (r *Relay) setCounts(i int, c *itemCounts) {
	r.mu.Lock()
	if c == nil {
		delete(r.counts, i)
	} else {
		r.counts[i] = *c
	}
	r.mu.Unlock()
	r.publishCounts()
}

func (r *Relay) publishCounts() {
	r.mu.Lock()
	var sum itemCounts
	for _, c := range r.counts {
		sum.waiting += c.waiting
		sum.inFlight += c.inFlight
		sum.setAside += c.setAside
		sum.heldKeys += c.heldKeys
	}
	r.mu.Unlock()
	r.m.Rows.WithLabelValues(r.cfg.Name, "waiting").Set(float64(sum.waiting))
	r.m.Rows.WithLabelValues(r.cfg.Name, "in_flight").Set(float64(sum.inFlight))
	r.m.Rows.WithLabelValues(r.cfg.Name, "set_aside").Set(float64(sum.setAside))
	r.m.HeldKeys.WithLabelValues(r.cfg.Name).Set(float64(sum.heldKeys))
}

// heldWhere selects the failing heads of keys: a waiting or in-flight
// keyed row with an error (the relay could not make it a task yet, or its
// task failed an attempt). Only a key's head is ever tried, so each such
// row holds back its key's later rows.
var heldWhere = fmt.Sprintf("status IN (%d, %d) AND msg_key <> '' AND last_error <> ''", outbox.StatusWaiting, outbox.StatusInFlight)

// countItem counts an item's rows by status and its held keys. It reads
// every unfinished row of the segment: the relay does it once every
// reportEvery, not every pass.
func (r *Relay) countItem(ctx context.Context, it item) (itemCounts, error) {
	return r.count(ctx, r.dbs[it.db], outbox.Quote(it.name, r.d), r.segWhere(it, ""))
}

func (r *Relay) count(ctx context.Context, db *sql.DB, q, seg string) (itemCounts, error) {
	var c itemCounts
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT status, COUNT(*) FROM %s WHERE 1 = 1%s GROUP BY status`, q, seg))
	if err != nil {
		return c, fmt.Errorf("count messages: %w", err)
	}
	for rows.Next() {
		var st, n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return c, fmt.Errorf("count messages: %w", err)
		}
		switch st {
		case outbox.StatusWaiting:
			c.waiting = n
		case outbox.StatusInFlight:
			c.inFlight = n
		case outbox.StatusSetAside:
			c.setAside = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("count messages: %w", err)
	}
	if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(DISTINCT msg_key) FROM %s WHERE %s%s`, q, heldWhere, seg)).Scan(&c.heldKeys); err != nil {
		return c, fmt.Errorf("count held keys: %w", err)
	}
	return c, nil
}

// tableCounters is what this node relayed of one table: totals and
// per-second buckets of the last minute.
type tableCounters struct {
	relayed, failures int64
	bucket            [60]int64
	second            [60]int64 // the unix second each bucket holds
}

// record adds a pass's figures to table t.
func (r *Relay) record(t int, now time.Time, relayed, failures int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc := &r.tables[t]
	tc.relayed += int64(relayed)
	tc.failures += int64(failures)
	s := now.Unix()
	b := s % 60
	if tc.second[b] != s {
		tc.second[b], tc.bucket[b] = s, 0
	}
	tc.bucket[b] += int64(relayed)
}

// rate is table t's relayed messages per second over the last minute.
func (r *Relay) rate(t int, now time.Time) (relayed, failures int64, perSecond float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc := &r.tables[t]
	var sum int64
	s := now.Unix()
	for b := range tc.bucket {
		if tc.second[b] > s-60 && tc.second[b] <= s {
			sum += tc.bucket[b]
		}
	}
	return tc.relayed, tc.failures, float64(sum) / 60
}

// Status reads each of the outbox's tables: rows by status, the oldest
// unfinished row's age, held keys and a sample of the failing rows; and
// adds what this node relayed of it. A table that cannot be read has its
// error set; the others are still read.
func (r *Relay) Status(ctx context.Context) apiv1.Outbox {
	out := apiv1.Outbox{Name: r.cfg.Name, Driver: r.cfg.Driver, Tables: []apiv1.OutboxTable{}}
	now := time.Now()
	for db := range r.cfg.Databases {
		for t := range r.cfg.Tables {
			it := r.item((db*r.cfg.Tables + t) * r.cfg.Segments)
			v := apiv1.OutboxTable{Database: db, Table: it.name, HeldSample: []apiv1.OutboxRowError{}, SetAsideSample: []apiv1.OutboxRowError{}}
			v.Relayed, v.Failures, v.RelayedPerSecond = r.rate(db*r.cfg.Tables+t, now)
			if err := r.tableStatus(ctx, r.dbs[db], outbox.Quote(it.name, r.d), now, &v); err != nil {
				v.Error = err.Error()
			}
			out.Tables = append(out.Tables, v)
		}
	}
	return out
}

func (r *Relay) tableStatus(ctx context.Context, db *sql.DB, q string, now time.Time, v *apiv1.OutboxTable) error {
	c, err := r.count(ctx, db, q, "")
	if err != nil {
		return err
	}
	v.Waiting, v.InFlight, v.SetAside, v.HeldKeys = c.waiting, c.inFlight, c.setAside, c.heldKeys
	var oldest int64
	for _, s := range []int{outbox.StatusWaiting, outbox.StatusInFlight} {
		var ca sql.NullInt64
		err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT created_at FROM %s WHERE status = %d ORDER BY id LIMIT 1`, q, s)).Scan(&ca)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("oldest message: %w", err)
		}
		if ca.Valid && ca.Int64 > 0 && (oldest == 0 || ca.Int64 < oldest) {
			oldest = ca.Int64
		}
	}
	if oldest > 0 {
		v.OldestAgeSeconds = max(now.Sub(time.UnixMicro(oldest)).Seconds(), 0)
	}
	if v.HeldSample, err = r.sample(ctx, db, q, heldWhere); err != nil {
		return err
	}
	v.SetAsideSample, err = r.sample(ctx, db, q, fmt.Sprintf("status = %d", outbox.StatusSetAside))
	return err
}

func (r *Relay) sample(ctx context.Context, db *sql.DB, q, where string) ([]apiv1.OutboxRowError, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT id, topic, msg_key, created_at, retry_count, last_error, task_id FROM %s WHERE %s ORDER BY id LIMIT %d`,
		q, where, SampleRows))
	if err != nil {
		return nil, fmt.Errorf("failing messages: %w", err)
	}
	defer rows.Close()
	out := []apiv1.OutboxRowError{}
	for rows.Next() {
		var e apiv1.OutboxRowError
		var topic, key, lastErr, taskID sql.NullString
		var created, retries sql.NullInt64
		if err := rows.Scan(&e.ID, &topic, &key, &created, &retries, &lastErr, &taskID); err != nil {
			return nil, fmt.Errorf("failing messages: %w", err)
		}
		e.Topic, e.Key, e.Retries, e.Error, e.TaskID = topic.String, key.String, retries.Int64, lastErr.String, taskID.String
		if created.Int64 > 0 {
			e.CreatedAt = time.UnixMicro(created.Int64).UTC()
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failing messages: %w", err)
	}
	return out, nil
}
