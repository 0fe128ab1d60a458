// Package mqtt publishes to an MQTT 5 broker at QoS 1: success is the
// PUBACK. The ontime-* headers travel as MQTT 5 user properties.
//
// A PUBACK whose reason code is an error (≥ 0x80: not authorized, topic
// name invalid, quota exceeded…) is a failed attempt with that reason, and
// so is 0x10, "no matching subscribers": the broker accepted a message it
// then dropped, which for a task is as unroutable as an AMQP return.
//
// One connection per broker (autopaho keeps it up with backoff) carries
// every lane's publishes, as many in flight as the broker's Receive
// Maximum allows. The session does not outlive a connection, so a publish
// whose connection is lost before its PUBACK returns at once and is sent
// again on the next connection.
package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/ontimehq/ontime/internal/deliver/broker"
)

// CheckURL reports whether raw is an mqtt:// or mqtts:// URL with a host.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "mqtt" && u.Scheme != "mqtts" {
		return fmt.Errorf("scheme %q: want mqtt:// or mqtts://", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("no host")
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("path %q: an MQTT broker URL has none", u.Path)
	}
	return nil
}

// Kind registers mqtt:// and mqtts:// URLs with a broker.Registry.
func Kind() broker.Kind {
	return broker.Kind{Schemes: []string{"mqtt", "mqtts"}, CheckURL: CheckURL,
		New: func(o broker.Options) (broker.Publisher, error) { return New(o) }}
}

// Publisher publishes to one MQTT broker.
type Publisher struct {
	*broker.Base
	cfg broker.Options
	u   *url.URL

	mu sync.Mutex
	cm *autopaho.ConnectionManager // set once connected
}

// New builds a publisher of an mqtt:// or mqtts:// URL,
// [user:pass@]host:port; it connects once started.
func New(cfg broker.Options) (*Publisher, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.URL)
	if u.Port() == "" {
		port := "1883"
		if u.Scheme == "mqtts" {
			port = "8883"
		}
		u.Host = u.Hostname() + ":" + port
	}
	return &Publisher{Base: broker.NewBase(cfg.Name, cfg.Logger), cfg: cfg, u: u}, nil
}

// Kind implements broker.Publisher.
func (p *Publisher) Kind() string { return "mqtt" }

// CheckAddress judges a topic name to publish to.
func (p *Publisher) CheckAddress(address string) error { return CheckAddress(address) }

// CheckAddress is Publisher.CheckAddress without a publisher.
func CheckAddress(topic string) error {
	switch {
	case topic == "":
		return errors.New("the topic is empty")
	case len(topic) > 65535:
		return fmt.Errorf("topic is %d bytes; at most 65535", len(topic))
	case !utf8.ValidString(topic):
		return errors.New("topic is not valid UTF-8")
	case strings.ContainsAny(topic, "+#"):
		return errors.New("a topic to publish to has no wildcards (+ or #)")
	case strings.HasPrefix(topic, "$"):
		return errors.New("topics starting with $ belong to the broker")
	case strings.ContainsRune(topic, 0):
		return errors.New("topic contains NUL")
	}
	return nil
}

// Start connects in the background; autopaho keeps the connection up until
// Stop.
func (p *Publisher) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

func (p *Publisher) run(ctx context.Context) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	cc := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{p.u},
		KeepAlive:                     20,
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0, // a lost connection fails its publishes at once: Set sends them again
		ConnectTimeout:                5 * time.Second,
		ReconnectBackoff:              broker.ReconnectDelay,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			p.mu.Lock()
			p.cm = cm // may run before NewConnection returns
			p.mu.Unlock()
			p.Link.Up()
			p.Log.Info("broker connected")
		},
		OnConnectionDown: func() bool {
			p.Link.Down(errors.New("connection lost"))
			p.Log.Warn("broker connection lost; reconnecting")
			return true
		},
		OnConnectError: func(err error) { p.Link.Down(err) },
		ClientConfig:   paho.ClientConfig{ClientID: "ontime-" + p.cfg.Name + "-" + hex.EncodeToString(rnd[:])},
	}
	if ui := p.u.User; ui != nil {
		cc.ConnectUsername = ui.Username()
		if pw, ok := ui.Password(); ok {
			cc.ConnectPassword = []byte(pw)
		}
	}
	cm, err := autopaho.NewConnection(ctx, cc)
	if err != nil { // only for a config without a server, which CheckURL refuses
		p.Link.Down(err)
		p.Log.Error("broker connection failed", "err", err)
		<-ctx.Done()
		return
	}
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = cm.Disconnect(dctx)
	<-cm.Done()
}

// Publish implements broker.Publisher.
func (p *Publisher) Publish(ctx context.Context, topic string, m *broker.Message) error {
	conn, err := p.Link.Wait(ctx)
	if err != nil {
		return err
	}
	// The client fails a publish whose connection is lost only after its
	// PacketTimeout (10 s); the lost connection ends it now.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(conn, cancel)()
	p.mu.Lock()
	cm := p.cm
	p.mu.Unlock()
	props := &paho.PublishProperties{ContentType: "application/json", User: make(paho.UserProperties, 0, len(m.Headers))}
	for _, h := range m.Headers {
		props.User = append(props.User, paho.UserProperty{Key: h.Name, Value: h.Value})
	}
	if m.Traceparent != "" {
		props.User = append(props.User, paho.UserProperty{Key: broker.HeaderTraceparent, Value: m.Traceparent})
	}
	pr, err := cm.Publish(pctx, &paho.Publish{QoS: 1, Topic: topic, Payload: m.Body, Properties: props})
	switch {
	case pr != nil && pr.ReasonCode == 0x97:
		// Quota exceeded: the broker's back-pressure.
		return broker.BackPressure(fmt.Errorf("the broker refused the message: PUBACK reason 0x97 quota exceeded %s", reasonString(pr)))
	case pr != nil && pr.ReasonCode >= 0x80:
		return fmt.Errorf("the broker refused the message: PUBACK reason 0x%02x %s", pr.ReasonCode, reasonString(pr))
	case err == nil && pr != nil && pr.ReasonCode == 0x10:
		return fmt.Errorf("no subscriber matches topic %q: the broker dropped the message (PUBACK reason 0x10)", topic)
	case err == nil:
		return nil
	case errors.Is(err, paho.ErrInvalidArguments):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("no PUBACK: %w", ctx.Err())
	case conn.Err() != nil:
		return fmt.Errorf("%w: %v", broker.ErrConnLost, p.Link.Err())
	}
	return fmt.Errorf("%w: %v", broker.ErrConnLost, err)
}

func reasonString(pr *paho.PublishResponse) string {
	if pr.Properties != nil && pr.Properties.ReasonString != "" {
		return pr.Properties.ReasonString
	}
	return ""
}
