package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outbox are the outbox relay's series (internal/outboxrelay).
type Outbox struct {
	Messages *prometheus.CounterVec // outbox, result: relayed | delivered | dead | set_aside | retried
	Oldest   *prometheus.GaugeVec   // outbox: age in seconds of the oldest unfinished message of this node's items
}

// NewOutbox creates the series and registers them on reg (nil: not registered).
func NewOutbox(reg prometheus.Registerer) *Outbox {
	m := &Outbox{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_outbox_messages_total",
			Help: "Outbox messages handled by the relay, by result: relayed (became a task), delivered (its task ended done), dead (its task ended dead or cancelled), set_aside (malformed row), retried (could not be relayed yet)."},
			[]string{"outbox", "result"}),
		Oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_outbox_oldest_seconds",
			Help: "Per outbox, the age of the oldest message not yet delivered (waiting or in flight) among the items this node relays; 0 when none."},
			[]string{"outbox"}),
	}
	if reg != nil {
		reg.MustRegister(m.Messages, m.Oldest)
	}
	return m
}
