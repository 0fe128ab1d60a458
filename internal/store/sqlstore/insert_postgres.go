package sqlstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
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
// that way on purpose (idempotency by key), so a batch with a key takes
// the statements of insertTx; an ID that exists (the same tasks inserted
// again, e.g. a flush of the hot tier retried after a crash) fails the
// COPY as a unique violation, which writes nothing, and insertTx then
// runs its statements, which skip it.

// copyColumns are the columns COPY writes, in the order copyRow encodes
// them: every column of insertCols but the one whose default a new row keeps.
const copyColumns = `id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, created_at, updated_at, owner, lease_until, token, first_due_at, traceparent, retry, priority`

// copyChunk is the most COPY data sent in one CopyData message; the
// messages of one query are written to the socket every copyFlush bytes,
// so that a large batch is not held twice in memory.
const (
	copyChunk = 64 << 10
	copyFlush = 1 << 20
)

// copyable reports whether the table groups of one database can go by
// COPY: PostgreSQL, and no task has a key.
func (s *Store) copyable(gs []group, tasks []store.NewTask) bool {
	return s.ins.copy && !anyKeyed(gs, tasks)
}

// copyInsert writes the tasks of gs (one database, no keys) in one query
// of one COPY per table and sets out. It reports a unique violation as
// such: insertTx then inserts with statements that skip existing IDs.
func (s *Store) copyInsert(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) error {
	c, err := s.w[gs[0].db].Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("copy insert: a PostgreSQL connection is a %T", dc)
		}
		return s.copyOn(ctx, sc.Conn().PgConn(), gs, tasks, out, now)
	})
}

func (s *Store) copyOn(ctx context.Context, pc *pgconn.PgConn, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) (err error) {
	if pc.IsBusy() || pc.TxStatus() != 'I' {
		return errors.New("copy insert: the connection is not idle")
	}
	// Any failure to write or read the protocol leaves the connection in
	// an unknown state: close it, and the pool drops it (stdlib checks
	// IsClosed before reusing a connection).
	broken := true
	defer func() {
		if broken {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = pc.Close(cctx)
			cancel()
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
	for _, g := range gs {
		q.WriteString("COPY " + s.names[g.table] + " (" + copyColumns + ") FROM STDIN (FORMAT binary);")
	}
	fe := pc.Frontend()
	fe.Send(&pgproto3.Query{String: q.String()})
	nowUs := now.UnixMicro()
	buf := make([]byte, 0, copyChunk+4096)
	pending := 0
	send := func(final bool) error {
		for len(buf) >= copyChunk || final && len(buf) > 0 {
			n := min(len(buf), copyChunk)
			// Send copies the data into the frontend's buffer.
			fe.Send(&pgproto3.CopyData{Data: buf[:n]})
			pending += n
			buf = append(buf[:0], buf[n:]...)
		}
		if pending >= copyFlush {
			pending = 0
			return fe.Flush()
		}
		return nil
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
			broken = m.TxStatus != 'I'
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
	b = null(b) // task_key: no key goes by COPY
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
