package ontime

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// StoreStatus answers GET /v1/store: the store's recorded databases and the
// stored progress of an expansion (`ontime store expand`).
func (n *Node) StoreStatus(ctx context.Context) (*apiv1.StoreStatus, error) {
	st, err := n.store.ExpansionStatus(ctx)
	if err != nil {
		return nil, err
	}
	return storeStatusView(st, n.cfg.Store.Tables), nil
}

// storeStatusView is the API's view of a stored expansion status (the
// CLI's store status --config has its own copy: cmd/ontime/store.go).
func storeStatusView(st sqlstore.ExpandStatus, tables int) *apiv1.StoreStatus {
	v := &apiv1.StoreStatus{Databases: st.Databases, Tables: tables, Epoch: st.Epoch}
	if st.Phase != sqlstore.PhaseNone {
		v.Expansion = &apiv1.StoreExpansion{Phase: st.Phase, From: st.From, To: st.To, Since: st.Since, Tables: st.Tables,
			TablesCopied: st.Copied, TablesCleaned: st.Cleaned, RowsCopied: st.RowsCopy, RowsDeleted: st.RowsClean}
	}
	return v
}

// storeCollector exports the store's recorded topology and an expansion's
// progress, read from the first database at each scrape (one small meta
// read and one row per source table; bounded by a timeout).
type storeCollector struct {
	st                                    *sqlstore.Store
	databases, epoch, phase, tables, rows *prometheus.Desc
}

func newStoreCollector(st *sqlstore.Store) *storeCollector {
	return &storeCollector{st: st,
		databases: prometheus.NewDesc("ontime_store_databases", "Databases the store records.", nil, nil),
		epoch:     prometheus.NewDesc("ontime_store_topology_epoch", "Topology epoch: moves on with every change of the recorded databases.", nil, nil),
		phase:     prometheus.NewDesc("ontime_store_expansion_phase", "1 for the phase of the expansion under way (copy, cleanup); none when there is none.", []string{"phase"}, nil),
		tables:    prometheus.NewDesc("ontime_store_expansion_tables", "Tables of the old databases of the expansion under way, by state: total, copied (first pass done), cleaned.", []string{"state"}, nil),
		rows:      prometheus.NewDesc("ontime_store_expansion_rows", "Rows the expansion under way copied to the new databases and deleted from the old ones.", []string{"op"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.databases, c.epoch, c.phase, c.tables, c.rows} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.st.ExpansionStatus(ctx)
	if err != nil {
		return // the store's own errors are counted elsewhere
	}
	ch <- prometheus.MustNewConstMetric(c.databases, prometheus.GaugeValue, float64(st.Databases))
	ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(st.Epoch))
	for _, p := range []string{"none", sqlstore.PhaseCopy, sqlstore.PhaseCleanup} {
		v := 0.0
		if p == st.Phase || (p == "none" && st.Phase == sqlstore.PhaseNone) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, v, p)
	}
	ch <- prometheus.MustNewConstMetric(c.tables, prometheus.GaugeValue, float64(st.Tables), "total")
	ch <- prometheus.MustNewConstMetric(c.tables, prometheus.GaugeValue, float64(st.Copied), "copied")
	ch <- prometheus.MustNewConstMetric(c.tables, prometheus.GaugeValue, float64(st.Cleaned), "cleaned")
	ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(st.RowsCopy), "copied")
	ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(st.RowsClean), "deleted")
}
