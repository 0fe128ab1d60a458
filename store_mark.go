package ontime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// storeMark marks the node as using the store every markEvery (the store's
// ontime_store_users), whatever its coordinator, and unmarks it on stop:
// `ontime store expand --cutover` refuses while a node is marked, so no
// node writes by the old databases once the store has switched to new ones.
type storeMark struct {
	startstop.Base
	st   *sqlstore.Store
	node string
	log  *slog.Logger
}

// markEvery is the mark's period; sqlstore.MarkFresh is a few of them.
const markEvery = 2 * time.Second

func (m *storeMark) Start(ctx context.Context) error { return m.Go(ctx, m.run) }

func (m *storeMark) run(ctx context.Context) {
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.st.Unmark(uctx, m.node); err != nil {
			m.log.Warn("store: unmark", "err", err)
		}
	}()
	mark := func(ctx context.Context) {
		err := m.st.MarkInUse(ctx, m.node, time.Now())
		switch {
		case errors.Is(err, sqlstore.ErrTopology):
			m.log.Error("store: the databases changed under this node", "err", err)
		case err != nil && ctx.Err() == nil:
			m.log.Warn("store: mark in use", "err", err)
		}
	}
	mark(ctx)
	startstop.Every(ctx, markEvery, mark)
}
