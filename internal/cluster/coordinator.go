package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Coordinator is what a node needs of a cluster backend (dbcoord,
// etcdcoord): the one lifecycle, and the view for GET /v1/cluster.
type Coordinator interface {
	startstop.Service
	Status(ctx context.Context) (Status, error)
	// AddItems adds scan jobs' items before Start.
	AddItems(items ...string)
	// Handlers is which live nodes handle which topic with a Go handler,
	// refreshed with the membership every round.
	Handlers() *Handlers
}

// ItemKey names a task store's sharding item in the coordinators' tables:
// "db.table.segment". Scan jobs' items share those tables under keys of
// their own ("job:NAME:ITEM", see scanjob.ItemKey).
func ItemKey(it store.Item) string { return fmt.Sprintf("%d.%d.%d", it.DB, it.Table, it.Segment) }

// ParseItemKey reads an ItemKey back; ok is false for any other key, such
// as a scan job's item.
func ParseItemKey(s string) (store.Item, bool) {
	p := strings.Split(s, ".")
	if len(p) != 3 {
		return store.Item{}, false
	}
	var v [3]int
	for i := range p {
		n, err := strconv.Atoi(p[i])
		if err != nil {
			return store.Item{}, false
		}
		v[i] = n
	}
	return store.Item{DB: v[0], Table: v[1], Segment: v[2]}, true
}
