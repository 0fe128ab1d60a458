package sqlstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ontimehq/ontime/internal/store"
)

// PostgreSQL's batch insert of tasks without keys: one binary COPY per
// table, every table's COPY in one simple-protocol query sent with all
// its data before reading any answer. That is one round trip per
// database and call, however many tables the batch spans, and the
// statements of one query string run in one implicit transaction: on any
// error the server rolls back every table's rows, drops the COPY data
// still coming and answers ReadyForQuery. COPY also writes rows to the heap
// in batches (one WAL record per page instead of per row) and takes
// binary columns that the server does not parse; measured against the
// unnest statements sent one after another in a transaction (18 round
// trips for 16 tables): docs/performance-notes.md, "Batch insert per
// engine".
//
// COPY cannot skip a row that exists. Only tasks with a key may meet one
// that way on purpose (idempotency by key), so a small batch with a key
// takes the keyed statement, and a large one a COPY in a transaction that
// checks its keys before committing (copyInsertKeyed); an ID that exists
// (the same tasks inserted again, e.g. a flush of the hot tier retried
// after a crash) fails the COPY as a unique violation, which writes
// nothing, and insertTx then runs its statements, which skip it.

// copyColumns are the columns COPY writes, in the order copyRow encodes
// them: every column of insertCols but the one whose default a new row keeps.
const copyColumns = `id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, created_at, updated_at, owner, lease_until, token, first_due_at, traceparent, retry, priority`

// copyChunk is how much COPY data is written to the socket at a time (a
// CopyData message; one row larger than it is a message of its own).
const copyChunk = 64 << 10

// copyable reports whether the table groups of one database can go by
// COPY: PostgreSQL, and no task has a key.
func (s *Store) copyable(gs []group, tasks []store.NewTask) bool {
	return s.ins.copy && !anyKeyed(gs, tasks)
}

// keyedCopyable reports whether a keyed batch of one database goes by
// COPY (copyInsertKeyed): PostgreSQL, at least keyedCopy rows. A smaller
// one (a group commit of single submits) is cheaper as the one keyed
// statement, which takes one round trip where this takes three.
func (s *Store) keyedCopyable(gs []group, tasks []store.NewTask) bool {
	if !s.ins.copy || s.ins.keyedCopy <= 0 || !anyKeyed(gs, tasks) {
		return false
	}
	n := 0
	for _, g := range gs {
		n += len(g.idx)
	}
	return n >= s.ins.keyedCopy
}

// errKeysHeld: a keyed COPY met a key that a stored task holds, and was
// rolled back.
var errKeysHeld = errors.New("a key of the batch is held")

// heldKeyQuery fails, with heldKeyMark in its error, when a final task of
// table t holds one of a batch's keys ($1 topics, $2 keys: the rows that
// do not replace final tasks; $3 the key hold's cutoff): one that ended
// after the cutoff. It fails rather than answering a row so that the
// COMMIT sent behind it, in the same round trip, is skipped by the server
// (copyInsertKeyed); the cast of a text that is not a number cannot be
// folded away by the planner, as it reads the row's topic. It runs after
// the batch's COPY went in, so no other live task has one of its keys
// (the live-key unique index refused the COPY, or waited for the other's
// transaction and then refused it), and the batch's own rows, all live,
// are not in the index of final keyed rows it probes (endedkeys.go). Two
// arrays, not the rows' IDs and flags as well: the check is a sixth of a
// keyed batch's time, much of it sending and reading its parameters.
func heldKeyQuery(t string) string {
	return `SELECT ('` + heldKeyMark + `' || r.topic)::int FROM unnest($1::text[], $2::text[]) AS r(topic, task_key)
		WHERE EXISTS (SELECT 1 FROM ` + t + ` x WHERE x.topic = r.topic AND x.task_key = r.task_key
			AND x.status >= 3 AND x.updated_at > $3) LIMIT 1`
}

// heldKeyMark begins the text whose cast fails heldKeyQuery.
const heldKeyMark = "ontime: a key of the batch is held: "

// heldKeyFailure reports whether err is heldKeyQuery's failure.
func heldKeyFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02" && strings.Contains(pe.Message, heldKeyMark)
}

// copyInsertKeyed writes a keyed batch of one database by COPY, as
// copyInsert does a keyless one, inside a transaction that then checks
// the batch's keys and commits only if no other task holds one: BEGIN and
// the COPYs in one query, the checks and COMMIT behind it in the same
// write, all answered in one round trip. COPY cannot skip a row whose
// key is held, so a batch that meets one is rolled back (errKeysHeld, or
// a unique violation when the holder is live or is another row of the
// batch) and insertTx writes it with the keyed statement, which answers
// each task. A keyed statement writes row by row; COPY writes the heap a
// page at a time (BenchmarkInsertBatch/postgres: keyed batches of 1,000
// 56 k/s by the statement, keyless ones by COPY 107 k/s). Concurrent
// batches with a key in common cannot both commit: the second's entry in
// the live-key unique index waits for the first and fails once it
// commits; a holder committed before the check is seen by it.
func (s *Store) copyInsertKeyed(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) error {
	cutoff := s.holdCutoff(now)
	sorted := make([]group, len(gs))
	for n, g := range gs {
		sorted[n] = group{db: g.db, table: g.table, idx: byKey(g.idx, tasks)}
	}
	gs = sorted
	return s.onPgConn(ctx, gs[0].db, func(conn *pgx.Conn) error {
		// The checks and the COMMIT go behind the COPYs, in the same round
		// trip (an extended-protocol pipeline ended by one Sync): a check
		// that finds a held key fails, and the server skips the rest.
		tail, err := s.heldKeyChecks(ctx, conn, gs, tasks, cutoff)
		if err != nil {
			return err
		}
		tail = append(tail, &pgproto3.Parse{Query: "COMMIT"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
		pc := conn.PgConn()
		copyErr := s.copyOn(ctx, pc, gs, tasks, out, now, true, tail)
		if pc.IsClosed() {
			return copyErr
		}
		return endKeyedPipeline(ctx, pc, copyErr)
	})
}

// heldKeyChecks are the Bind and Execute of heldKeyQuery for each table
// of gs with rows to check (keyed, not replacing final tasks), prepared on
// conn once.
func (s *Store) heldKeyChecks(ctx context.Context, conn *pgx.Conn, gs []group, tasks []store.NewTask, cutoff int64) ([]pgproto3.FrontendMessage, error) {
	var out []pgproto3.FrontendMessage
	for _, g := range gs {
		topics, keys := make([]string, 0, len(g.idx)), make([]string, 0, len(g.idx))
		for _, i := range g.idx {
			if nt := &tasks[i]; nt.Key != "" && !nt.ReplaceFinal {
				topics, keys = append(topics, nt.Topic), append(keys, nt.Key)
			}
		}
		if len(keys) == 0 {
			continue
		}
		t := s.names[g.table]
		sd, err := conn.Prepare(ctx, "ontime_held_"+t, heldKeyQuery(t))
		if err != nil {
			return nil, err
		}
		var args [3][]byte
		for n, v := range []any{topics, keys, cutoff} {
			if args[n], err = conn.TypeMap().Encode(sd.ParamOIDs[n], pgtype.BinaryFormatCode, v, nil); err != nil {
				return nil, fmt.Errorf("held keys' check: %w", err)
			}
		}
		out = append(out,
			&pgproto3.Bind{PreparedStatement: sd.Name, ParameterFormatCodes: []int16{pgtype.BinaryFormatCode}, Parameters: args[:]},
			&pgproto3.Execute{})
	}
	return out, nil
}

// endKeyedPipeline reads the answers of a keyed COPY's checks and COMMIT
// (the first error: a check's, or any statement's in a transaction the
// COPY failed; then ReadyForQuery) and rolls back a failed transaction.
// It returns nil once committed, copyErr when the COPY failed,
// errKeysHeld when a check found a held key.
func endKeyedPipeline(ctx context.Context, pc *pgconn.PgConn, copyErr error) error {
	var pipeErr error
	var txStatus byte
	for txStatus == 0 {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			closePg(ctx, pc)
			return errors.Join(copyErr, err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if pipeErr == nil {
				pipeErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			txStatus = m.TxStatus
		}
	}
	switch {
	case txStatus == 'I' && copyErr == nil && pipeErr == nil:
		return nil // committed
	case txStatus == 'I':
		// The COMMIT itself failed; nothing is left open.
		return errors.Join(copyErr, pipeErr)
	case txStatus != 'E':
		closePg(ctx, pc) // open and not failed: not a state this pipeline leaves
		return fmt.Errorf("keyed copy: transaction status %q after COMMIT", txStatus)
	}
	if _, err := pc.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		closePg(ctx, pc)
		return fmt.Errorf("%w (rollback: %w)", errors.Join(copyErr, pipeErr), err)
	}
	switch {
	case copyErr != nil:
		return copyErr // the checks failed only as statements of a failed transaction
	case heldKeyFailure(pipeErr):
		return errKeysHeld
	}
	return pipeErr
}

// closePg closes a connection whose protocol state is unknown (the pool
// drops it: stdlib checks IsClosed before reusing one), even once ctx is
// done.
func closePg(ctx context.Context, pc *pgconn.PgConn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	_ = pc.Close(cctx)
	cancel()
}

// copyInsert writes the tasks of gs (one database, no keys) in one query
// of one COPY per table and sets out. It reports a unique violation as
// such: insertTx then inserts with statements that skip existing IDs.
func (s *Store) copyInsert(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) error {
	return s.onPgConn(ctx, gs[0].db, func(conn *pgx.Conn) error {
		return s.copyOn(ctx, conn.PgConn(), gs, tasks, out, now, false, nil)
	})
}

// onPgConn runs f on a connection of database db's write pool, as pgx's
// own (the COPY protocol is below database/sql).
func (s *Store) onPgConn(ctx context.Context, db int, f func(*pgx.Conn) error) error {
	c, err := s.w[db].Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("copy insert: a PostgreSQL connection is a %T", dc)
		}
		return f(sc.Conn())
	})
}

// copyOn sends the COPYs of gs in one query and reads its answer. inTx
// opens a transaction first, in the same query, and leaves it open (or
// failed) for the caller to end; otherwise the query commits by itself.
// tail is sent right behind the COPYs, in the same write, and its answers
// are left for the caller to read.
func (s *Store) copyOn(ctx context.Context, pc *pgconn.PgConn, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time, inTx bool, tail []pgproto3.FrontendMessage) (err error) {
	if pc.IsBusy() || pc.TxStatus() != 'I' {
		return errors.New("copy insert: the connection is not idle")
	}
	// Any failure to write or read the protocol leaves the connection in
	// an unknown state: close it.
	broken := true
	defer func() {
		if broken {
			closePg(ctx, pc)
		}
	}()
	// A write blocked on a server that reads nothing is cut by ctx (the
	// reads below watch ctx themselves).
	stop := context.AfterFunc(ctx, func() { _ = pc.Conn().SetWriteDeadline(time.Now()) })
	defer func() {
		if !stop() {
			broken = true // the deadline is set on the connection
			if err != nil {
				err = fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
		}
	}()

	var q strings.Builder
	if inTx {
		q.WriteString("BEGIN;")
	}
	for _, g := range gs {
		q.WriteString("COPY " + s.names[g.table] + " (" + copyColumns + ") FROM STDIN (FORMAT binary);")
	}
	fe := pc.Frontend()
	fe.Send(&pgproto3.Query{String: q.String()})
	nowUs := now.UnixMicro()
	// buf is one CopyData message being filled: its type and length
	// first, then the rows. Each is written to the socket as soon as it
	// holds copyChunk bytes, so that the server inserts the first rows
	// while the next are encoded, and one buffer serves the whole batch.
	const head = 5
	buf := make([]byte, head, head+copyChunk+4096)
	buf[0] = 'd'
	send := func(final bool) error {
		if len(buf) == head || !final && len(buf) < head+copyChunk {
			return nil
		}
		binary.BigEndian.PutUint32(buf[1:head], uint32(len(buf)-1))
		// The Query above is flushed first.
		err := fe.SendUnbufferedEncodedCopyData(buf)
		buf = buf[:head]
		return err
	}
	for _, g := range gs {
		buf = append(buf, "PGCOPY\n\377\r\n\000"...)
		buf = binary.BigEndian.AppendUint32(buf, 0) // flags
		buf = binary.BigEndian.AppendUint32(buf, 0) // header extension
		for _, i := range g.idx {
			nt := tasks[i]
			r := newInsertRow(nt)
			buf = copyRow(buf, nt, r, nowUs)
			out[i] = store.Inserted{Task: storedTask(nt, r, nowUs)}
			if err := send(false); err != nil {
				return err
			}
		}
		buf = binary.BigEndian.AppendUint16(buf, 0xffff) // end of data
		if err := send(true); err != nil {
			return err
		}
		fe.Send(&pgproto3.CopyDone{})
	}
	for _, m := range tail {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		return err
	}
	var pgErr error
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			// The first error aborts the query; there is no other.
			pgErr = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			if inTx {
				broken = m.TxStatus != 'T' && m.TxStatus != 'E'
			} else {
				broken = m.TxStatus != 'I'
			}
			return pgErr
		}
	}
}

// copyRow appends one task as a tuple of COPY's binary format: the
// columns of copyColumns, each as its length and its value in the
// column type's binary form (NULL: length -1).
func copyRow(b []byte, nt store.NewTask, r insertRow, nowUs int64) []byte {
	text := func(b []byte, s string) []byte {
		return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
	}
	i8 := func(b []byte, v int64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(v))
	}
	i4 := func(b []byte, v int) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 4), uint32(int32(v)))
	}
	i2 := func(b []byte, v int) []byte {
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint32(b, 2), uint16(int16(v)))
	}
	null := func(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xffffffff) }
	b = binary.BigEndian.AppendUint16(b, 20) // columns
	b = text(b, nt.ID)
	b = text(b, nt.Topic)
	if nt.Key != "" {
		b = text(b, nt.Key)
	} else {
		b = null(b)
	}
	b = i8(b, int64(nt.ShardHash))
	b = i2(b, nt.Seg)
	b = i8(b, r.dueUs)
	b = append(binary.BigEndian.AppendUint32(b, uint32(len(nt.Payload))), nt.Payload...)
	b = text(b, nt.Target)
	b = i4(b, nt.MaxAttempts)
	b = i4(b, r.attempts)
	b = i2(b, int(r.status))
	b = i8(b, nowUs)
	b = i8(b, nowUs)
	if r.owner != nil {
		b = text(b, r.owner.(string))
	} else {
		b = null(b)
	}
	b = i8(b, r.lease)
	b = i8(b, r.token)
	b = i8(b, r.dueUs)
	b = text(b, nt.Traceparent)
	b = text(b, nt.Retry)
	return i2(b, nt.Priority)
}
