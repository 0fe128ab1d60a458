package outboxrelay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/outbox"
)

// ParseTaskKey reads the task key TaskKey made: the message's key, the
// outbox's name, the database and table indexes and the row's id. ok is
// false for any other key.
func ParseTaskKey(k string) (msgKey, name string, db, table int, id int64, ok bool) {
	// The message's key may hold '#' and '/'; what follows the last '#'
	// cannot (an outbox's name is A-Z a-z 0-9 _ -).
	h := strings.LastIndexByte(k, '#')
	if h < 0 {
		return "", "", 0, 0, 0, false
	}
	msgKey, rest := k[:h], k[h+1:]
	name, rest, ok1 := strings.Cut(rest, "/")
	where, idS, ok2 := strings.Cut(rest, "/")
	dbS, tS, ok3 := strings.Cut(where, ".")
	if !ok1 || !ok2 || !ok3 || validName(name) != nil {
		return "", "", 0, 0, 0, false
	}
	var err1, err2, err3 error
	db, err1 = strconv.Atoi(dbS)
	table, err2 = strconv.Atoi(tS)
	id, err3 = strconv.ParseInt(idS, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || db < 0 || table < 0 || id < 1 {
		return "", "", 0, 0, 0, false
	}
	return msgKey, name, db, table, id, true
}

// TaskOutbox says which message of this outbox t was relayed from and, while
// t has not ended, how many later messages of its key wait for it. nil when
// t is not one of this outbox's (its key says another outbox, or the row
// is gone or names another task: a task submitted with a key of the same
// shape is not taken for one). Two indexed reads of the message's table.
func (r *Relay) TaskOutbox(ctx context.Context, t *task.Task) (*apiv1.TaskOutbox, error) {
	msgKey, name, db, table, id, ok := ParseTaskKey(t.Key)
	if !ok || name != r.cfg.Name || db >= len(r.cfg.Databases) || table >= r.cfg.Tables {
		return nil, nil
	}
	it := r.item((db*r.cfg.Tables + table) * r.cfg.Segments)
	q := outbox.Quote(it.name, r.d)
	conn := r.dbs[db]
	var rowKey, taskID sql.NullString
	var status int
	err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT msg_key, status, task_id FROM %s WHERE id = %s`, q, r.ph(1)), id).Scan(&rowKey, &status, &taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox %s message %d: %w", r.cfg.Name, id, err)
	}
	if taskID.String != t.ID || rowKey.String != msgKey {
		return nil, nil
	}
	v := &apiv1.TaskOutbox{Outbox: r.cfg.Name, Database: db, Table: it.name, MessageID: id, Key: msgKey}
	final := t.Status == task.StatusDone || t.Status == task.StatusDead || t.Status == task.StatusCancelled
	if msgKey == "" || status != outbox.StatusInFlight || final {
		return v, nil
	}
	// The key's later rows not relayed yet: (msg_key, status, id) index.
	if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE msg_key = %s AND status = %d AND id > %s`,
		q, r.ph(1), outbox.StatusWaiting, r.ph(2)), msgKey, id).Scan(&v.HoldsBack); err != nil {
		return nil, fmt.Errorf("outbox %s messages held back by %d: %w", r.cfg.Name, id, err)
	}
	return v, nil
}
