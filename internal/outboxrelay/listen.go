package outboxrelay

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/outbox"
)

// listener is one LISTEN connection to a PostgreSQL database of the
// outbox, shared by the runs of its items on this node: the first run
// starts it, the last one to end stops it and waits for it.
type listener struct {
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
	// up: LISTEN is in place, so a committed row wakes the items and
	// they need not poll for new rows.
	up atomic.Bool
}

// listen makes sure database db is listened to while the caller runs;
// release when done. Only PostgreSQL has it (the tables' trigger, see
// outbox.DDL); elsewhere polling alone finds new rows.
func (r *Relay) listen(db int) (release func()) {
	if r.d != outbox.Postgres {
		return func() {}
	}
	r.mu.Lock()
	l := r.listeners[db]
	if l == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l = &listener{cancel: cancel, done: make(chan struct{})}
		r.listeners[db] = l
		go func() {
			defer close(l.done)
			r.listenLoop(ctx, db, l)
		}()
	}
	l.refs++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		l.refs--
		last := l.refs == 0
		if last && r.listeners[db] == l {
			delete(r.listeners, db)
		}
		r.mu.Unlock()
		if last {
			l.cancel()
			<-l.done
		}
	}
}

// listenLoop holds a LISTEN connection until ctx ends, reconnecting with
// backoff; each notification naming one of the outbox's tables wakes the
// relay. Notifications missed while not listening cost only latency: the
// polls find the rows, and every (re)connection wakes the relay once.
func (r *Relay) listenLoop(ctx context.Context, db int, l *listener) {
	tables := map[string]bool{}
	for t := range r.cfg.Tables {
		name := r.item(t * r.cfg.Segments).name
		tables[name[strings.LastIndexByte(name, '.')+1:]] = true
	}
	wait := time.Second
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, db, tables, l)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("outbox LISTEN connection lost; polling alone until it is back", "outbox", r.cfg.Name, "database", db, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 30*time.Second)
	}
}

func (r *Relay) listenOnce(ctx context.Context, db int, tables map[string]bool, l *listener) error {
	conn, err := pgx.Connect(ctx, r.cfg.Databases[db])
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+outbox.NotifyChannel); err != nil {
		return err
	}
	l.up.Store(true)
	defer l.up.Store(false)
	r.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if tables[n.Payload] {
			r.m.Wakeups.WithLabelValues(r.cfg.Name, "notify").Inc()
			r.wakeAll()
		}
	}
}

// listening reports whether database db's LISTEN is in place.
func (r *Relay) listening(db int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.listeners[db]
	return l != nil && l.up.Load()
}
