package sqlstore

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// insertPlan is how Insert writes the rows of one table: how many go in
// one statement, and the statement's shape. Figures behind each choice:
// docs/performance-notes.md, "Batch insert per engine".
type insertPlan struct {
	// rows bounds the rows of one statement; bytes bounds the variable
	// bytes (payload, target, key) it carries, so that a batch of large
	// payloads stays within MariaDB's max_allowed_packet (16 MiB by
	// default; interpolated parameters are escaped, up to twice their
	// size). A row larger than bytes goes alone.
	rows, bytes int
	// arrays: PostgreSQL's one statement per table whatever the batch
	// size: each column is one array parameter, unnested into rows.
	arrays bool
	// mode is pgx's for the arrays statement: exec (parse, bind and
	// execute in one round trip) measured no slower than a statement
	// cache, which would hold a prepared statement per table and
	// connection.
	mode pgx.QueryExecMode
	// copy: PostgreSQL's batches without keys go by COPY
	// (insert_postgres.go).
	copy bool
	// keyedCopy: PostgreSQL's keyed batches of at least this many rows go
	// by COPY too, their keys checked before the commit
	// (copyInsertKeyed); 0: never.
	keyedCopy int
	// multi: MariaDB's batches without keys go in one multi-statement
	// query (insert_mysql.go).
	multi bool
	// keyed: PostgreSQL's batches with keys go in one statement over
	// every table (insert_keyed.go); false: the statements of insertTx.
	keyed bool
	// keyedAll: a keyed statement over more than one of a database's
	// tables names them all, the others with no rows, so that its text is
	// the same for every such batch and is prepared once per connection
	// (insert_keyed.go, allTables).
	keyedAll bool
	// hold: SQLite's keyed rows skip held keys in the INSERT itself
	// (insert_sqlite.go); false: a SELECT of the keys first.
	hold bool
}

func planFor(d *dialect) insertPlan {
	switch d.name {
	case "postgres":
		return insertPlan{rows: 5000, bytes: 32 << 20, arrays: true, mode: pgx.QueryExecModeExec, copy: true, keyedCopy: 100, keyed: true, keyedAll: true}
	case "mysql":
		// 65,535 placeholders per statement would allow 3,640 rows; with
		// interpolateParams there are none, and the packet is the limit.
		return insertPlan{rows: 2000, bytes: 4 << 20, multi: true}
	default:
		// SQLite allows 32,766 variables (19 per row: 1,724 rows).
		return insertPlan{rows: 1000, bytes: 32 << 20, hold: true}
	}
}

// legacyPlan is the plan before the dialect-specific ones: a VALUES list
// of up to 500 rows on every engine. Benchmarks compare against it.
var legacyPlan = insertPlan{rows: 500, bytes: 1 << 62}

// chunks splits the positions of one table's tasks into statements.
func (p insertPlan) chunks(idx []int, tasks []store.NewTask) [][]int {
	var out [][]int
	start, size := 0, 0
	for n, i := range idx {
		sz := len(tasks[i].Payload) + len(tasks[i].Target) + len(tasks[i].Key)
		if n > start && (n-start >= p.rows || size+sz > p.bytes) {
			out = append(out, idx[start:n])
			start, size = n, 0
		}
		size += sz
	}
	if start < len(idx) {
		out = append(out, idx[start:])
	}
	return out
}

// insertRow is one task as the columns store it.
type insertRow struct {
	key, owner          any // nil: NULL
	status              task.Status
	attempts            int // 1 for a row inserted running (store.NewTask.Running)
	lease, token, dueUs int64
}

func newInsertRow(nt store.NewTask) insertRow {
	r := insertRow{status: task.StatusPending, dueUs: micros(nt.DueAt)}
	if nt.Key != "" {
		r.key = nt.Key
	}
	if nt.Claim != nil {
		r.status, r.owner, r.lease, r.token = task.StatusClaimed, nt.Claim.Owner, micros(nt.Claim.Until), nt.Claim.Token
		if nt.Running {
			r.status, r.attempts = task.StatusRunning, 1
		}
	}
	return r
}

// storedTask is the row as a task, for the caller's answer.
func storedTask(nt store.NewTask, r insertRow, nowUs int64) *task.Task {
	st := &task.Task{ID: nt.ID, Topic: nt.Topic, Key: nt.Key, ShardHash: nt.ShardHash, Seg: nt.Seg, DueAt: fromMicros(r.dueUs),
		Payload: nt.Payload, Target: nt.Target, MaxAttempts: nt.MaxAttempts, Attempts: r.attempts, Status: r.status,
		CreatedAt: fromMicros(nowUs), UpdatedAt: fromMicros(nowUs), LeaseUntil: fromMicros(r.lease), Token: r.token, FirstDueAt: fromMicros(r.dueUs),
		Traceparent: nt.Traceparent, Retry: nt.Retry, Priority: nt.Priority}
	if r.owner != nil {
		st.Owner = r.owner.(string)
	}
	return st
}

// insertStatement builds the statement that inserts the tasks of idx into
// table t, skipping rows whose ID or live key exists (and, when the dialect
// has RETURNING, naming the rows it inserted), and sets out[i] to each task
// as it will be stored.
func (s *Store) insertStatement(t string, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) (string, []any) {
	idx = byKey(idx, tasks)
	if s.ins.arrays {
		return s.insertArrays(t, idx, tasks, out, now)
	}
	var b strings.Builder
	row := "(" + placeholders(nInsertCols) + ")"
	b.Grow(len(t) + len(insertCols) + 64 + len(idx)*(len(row)+2))
	b.WriteString("INSERT INTO " + t + " (" + insertCols + ") VALUES ")
	args := make([]any, 0, len(idx)*nInsertCols)
	nowUs := now.UnixMicro()
	for n, i := range idx {
		nt := tasks[i]
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
		r := newInsertRow(nt)
		args = append(args, nt.ID, nt.Topic, r.key, int64(nt.ShardHash), nt.Seg, r.dueUs, nt.Payload, nt.Target,
			nt.MaxAttempts, r.attempts, int(r.status), "", nowUs, nowUs, r.owner, r.lease, r.token, r.dueUs, nt.Traceparent, nt.Retry, nt.Priority)
		out[i] = store.Inserted{Task: storedTask(nt, r, nowUs)}
	}
	b.WriteString(s.d.onConflict)
	if s.d.returning {
		b.WriteString(" RETURNING id")
	}
	return s.d.rebind(b.String()), args
}

// byKey is a copy of idx in the order of its tasks' keys: concurrent
// statements or transactions inserting the same keys then take them in one
// order and wait for each other instead of deadlocking. Stable: of one
// batch's tasks with the same key, the first still goes in.
func byKey(idx []int, tasks []store.NewTask) []int {
	idx = slices.Clone(idx)
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(tasks[a].Key, tasks[b].Key) })
	return idx
}

// arrayInsertQuery is PostgreSQL's insert of any number of rows: one
// array parameter per column that varies ($first … $first+12; $1 is the
// time of the insert). ON CONFLICT DO NOTHING skips a row whose ID or live
// key exists, also one that an earlier row of the same statement inserted.
func arrayInsertQuery(t string, first int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + t + ` (` + insertCols + `)
		SELECT id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, ` + attemptsOfStatus + `, status, '', $1, $1, owner, lease_until, token, due_at, traceparent, retry, priority
		FROM unnest(`)
	for j, typ := range arrayTypes {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(first+j) + "::" + typ + "[]")
	}
	b.WriteString(`) AS r(id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, status, owner, lease_until, token, traceparent, retry, priority)
		ON CONFLICT DO NOTHING RETURNING id`)
	return b.String()
}

// attemptsOfStatus is the attempts of a row inserted from arrays: its
// status says whether it was inserted running (store.NewTask.Running,
// its first attempt begun), which spares an array per statement.
var attemptsOfStatus = "CASE WHEN status = " + strconv.Itoa(int(task.StatusRunning)) + " THEN 1 ELSE 0 END"

// arrayTypes are the element types of arrayColumns' arrays, in order.
var arrayTypes = []string{"text", "text", "text", "int8", "int8", "int8", "bytea", "text", "int8", "int8", "text", "int8", "int8", "text", "text", "int2"}

func (s *Store) insertArrays(t string, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) (string, []any) {
	nowUs := now.UnixMicro()
	return arrayInsertQuery(t, 2), append([]any{s.ins.mode, nowUs}, arrayColumns(idx, tasks, out, nowUs)...)
}

// arrayColumns returns the array parameters of arrayInsertQuery for the
// tasks of idx and sets out[i] to each task as it will be stored.
func arrayColumns(idx []int, tasks []store.NewTask, out []store.Inserted, nowUs int64) []any {
	n := len(idx)
	var (
		ids, topics, targets                            = make([]string, n), make([]string, n), make([]string, n)
		keys, owners                                    = make([]*string, n), make([]*string, n)
		hashes, segs, dues, maxA, statuses, leases, tok = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		payloads                                        = make([][]byte, n)
		traces, retries                                 = make([]string, n), make([]string, n)
		prios                                           = make([]int16, n)
	)
	for j, i := range idx {
		nt := tasks[i]
		r := newInsertRow(nt)
		ids[j], topics[j], targets[j] = nt.ID, nt.Topic, nt.Target
		if nt.Key != "" {
			keys[j] = &tasks[i].Key
		}
		if nt.Claim != nil {
			owners[j] = &tasks[i].Claim.Owner
		}
		hashes[j], segs[j], dues[j], maxA[j] = int64(nt.ShardHash), int64(nt.Seg), r.dueUs, int64(nt.MaxAttempts)
		statuses[j], leases[j], tok[j], traces[j] = int64(r.status), r.lease, r.token, nt.Traceparent
		retries[j] = nt.Retry
		prios[j] = int16(nt.Priority)
		// A nil slice would be a NULL element; the column is NOT NULL.
		payloads[j] = nt.Payload
		if payloads[j] == nil {
			payloads[j] = []byte{}
		}
		out[i] = store.Inserted{Task: storedTask(nt, r, nowUs)}
	}
	return []any{ids, topics, keys, hashes, segs, dues, payloads, targets, maxA, statuses, owners, leases, tok, traces, retries, prios}
}
