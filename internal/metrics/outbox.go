package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outbox are the outbox relay's series (internal/outboxrelay).
type Outbox struct {
	Messages *prometheus.CounterVec // outbox, result: relayed | delivered | dead | set_aside | retried
	Oldest   *prometheus.GaugeVec   // outbox: age in seconds of the oldest unfinished message of this node's items
	Rows     *prometheus.GaugeVec   // outbox, status: waiting | in_flight | set_aside rows of this node's items
	HeldKeys *prometheus.GaugeVec   // outbox: keys held back by a failing message, in this node's items
	Passes   *prometheus.CounterVec // outbox, cause: poll | wake | freed, found: true | false (waiting rows read)
	Wakeups  *prometheus.CounterVec // outbox, source: call (Node.WakeOutbox) | notify (PostgreSQL) | ended (a watched task ended here)
}

// NewOutbox creates the series and registers them on reg (nil: not registered).
func NewOutbox(reg prometheus.Registerer) *Outbox {
	m := &Outbox{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_outbox_messages_total",
			Help: "Per node: outbox messages handled by this node's relay, by result: relayed (became a task), delivered (its task ended done), dead (its task ended dead or cancelled), set_aside (malformed row), retried (could not be relayed yet)."},
			[]string{"outbox", "result"}),
		Oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_outbox_oldest_seconds",
			Help: "Per node: per outbox, the age of the oldest message not yet delivered (waiting or in flight) among the items this node relays; 0 when none."},
			[]string{"outbox"}),
		Rows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_outbox_rows",
			Help: "Per outbox, rows of the tables' items this node relays, by status: waiting (not relayed yet), in_flight (their task has not ended), set_aside (malformed; see ontime outbox status). Refreshed every 5s."},
			[]string{"outbox", "status"}),
		HeldKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_outbox_held_keys",
			Help: "Per outbox, keys whose first unfinished message is failing (its task failed an attempt, or it could not be relayed yet), holding back that key's later messages only; among the items this node relays. Refreshed every 5s."},
			[]string{"outbox"}),
		Passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_outbox_passes_total",
			Help: "Passes of the relay over its items (each a few queries), by cause: poll (the adaptive timer), wake (a PostgreSQL notification or Node.WakeOutbox) or freed (in-flight messages finished, their keys' next ones free to go), and whether it found waiting messages. Its rate when nothing is written is the relay's idle cost."},
			[]string{"outbox", "cause", "found"}),
		Wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_outbox_wakeups_total",
			Help: "Wake-ups of the relay, by source: call (Node.WakeOutbox after an embedded write), notify (the PostgreSQL table's trigger) or ended (this node wrote the end of a task an in-flight message waits on)."},
			[]string{"outbox", "source"}),
	}
	if reg != nil {
		reg.MustRegister(m.Messages, m.Oldest, m.Rows, m.HeldKeys, m.Passes, m.Wakeups)
	}
	return m
}
