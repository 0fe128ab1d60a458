package metrics

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// Failure classes of ontime_delivery_failures_total.
const (
	FailTimeout = "timeout" // the call's deadline passed
	FailRefused = "refused" // the connection was refused
	Fail4xx     = "4xx"
	Fail5xx     = "5xx"
	FailPolicy  = "policy" // the target policy denied the address
	FailOther   = "other"  // anything else: DNS, reset, TLS, a broker's or a handler's error
)

var failClasses = []string{FailTimeout, FailRefused, Fail4xx, Fail5xx, FailPolicy, FailOther}

// HTTPStatuser is an error that carries an HTTP answer's status
// (webhook.StatusError).
type HTTPStatuser interface{ HTTPStatus() int }

// PolicyDenier is an error saying the target policy refused the call
// (policy.DeniedError).
type PolicyDenier interface{ PolicyDenied() bool }

// Classify is the failure class of a delivery error (non-nil).
func Classify(err error) string {
	var st HTTPStatuser
	var pd PolicyDenier
	var ne net.Error
	switch {
	case errors.As(err, &pd) && pd.PolicyDenied():
		return FailPolicy
	case errors.As(err, &st):
		switch c := st.HTTPStatus(); {
		case c >= 500:
			return Fail5xx
		case c >= 400:
			return Fail4xx
		}
		return FailOther
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	}
	return FailOther
}

// Dests labels destinations with a bounded set of values: a webhook
// destination the config names (destinations:) by its key, a broker by
// mq://NAME (broker names come from the config too), Go handlers as
// "handler", and every other host as "_other" — submitters choose targets,
// so a host they name never becomes a label value of its own.
type Dests struct {
	named    map[string]bool
	fixed    []string
	failures *prometheus.CounterVec
}

// NewDests creates the destination series for the configured webhook
// destinations (lane keys, deliver.Destination's form) and broker names,
// and registers them on reg (nil: not registered). Every configured
// label's failure series exist at 0 from the start.
func NewDests(reg prometheus.Registerer, webhooks, brokers []string) *Dests {
	d := &Dests{named: map[string]bool{},
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_delivery_failures_total",
			Help: "Per node: delivery attempts that failed, per destination (configured destinations by name, mq://BROKER, handler, else _other) and class (timeout, refused, 4xx, 5xx, policy, other)."}, []string{"dest", "class"}),
	}
	labels := []string{Other, "handler"}
	for _, w := range webhooks {
		d.named[w] = true
		labels = append(labels, w)
	}
	for _, b := range brokers {
		labels = append(labels, "mq://"+b)
	}
	d.fixed = labels
	for _, l := range labels {
		for _, c := range failClasses {
			d.failures.WithLabelValues(l, c)
		}
	}
	if reg != nil {
		reg.MustRegister(d.failures)
	}
	return d
}

// Label is the label value of a lane key (deliver.Destination's form, or
// "handler:TOPIC").
func (d *Dests) Label(dest string) string {
	switch {
	case d == nil:
		return Other
	case d.named[dest]:
		return dest
	case strings.HasPrefix(dest, "handler:"):
		return "handler"
	case strings.HasPrefix(dest, "mq://"):
		name, _, _ := strings.Cut(strings.TrimPrefix(dest, "mq://"), "/")
		return "mq://" + name
	}
	return Other
}

// Failed counts a failed attempt at dest (a lane key).
func (d *Dests) Failed(dest string, err error) {
	if d == nil {
		return
	}
	d.failures.WithLabelValues(d.Label(dest), Classify(err)).Inc()
}

// labels are the label values every scrape reports, idle or not: the
// configured destinations, the brokers, "handler".
func (d *Dests) labels() []string {
	if d == nil {
		return nil
	}
	return d.fixed
}
