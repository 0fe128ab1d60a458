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
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/startstop"
)

// Config configures a publisher.
type Config struct {
	Name   string // the broker's name in the config, for logs
	URL    string // mqtt:// or mqtts://, [user:pass@]host:port
	Logger *slog.Logger
}

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

// Publisher publishes to one MQTT broker.
type Publisher struct {
	startstop.Base
	cfg  Config
	log  *slog.Logger
	link *broker.Link
	u    *url.URL

	mu sync.Mutex
	cm *autopaho.ConnectionManager
}

// New builds a publisher; it connects once started.
func New(cfg Config) (*Publisher, error) {
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Publisher{cfg: cfg, log: cfg.Logger.With("broker", cfg.Name), link: broker.NewLink(), u: u}, nil
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
func (p *Publisher) Start(ctx context.Context) error {
	ctx, ok, started, stopped := p.StartInit(ctx)
	if !ok {
		return nil
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	cc := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{p.u},
		KeepAlive:                     20,
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0, // a lost connection fails its publishes at once: Set sends them again
		ConnectTimeout:                5 * time.Second,
		ReconnectBackoff:              broker.ReconnectDelay,
		OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
			p.link.Up()
			p.log.Info("broker connected")
		},
		OnConnectionDown: func() bool {
			p.link.Down(errors.New("connection lost"))
			p.log.Warn("broker connection lost; reconnecting")
			return true
		},
		OnConnectError: func(err error) { p.link.Down(err) },
		ClientConfig:   paho.ClientConfig{ClientID: "ontime-" + p.cfg.Name + "-" + hex.EncodeToString(rnd[:])},
	}
	if ui := p.u.User; ui != nil {
		cc.ConnectUsername = ui.Username()
		if pw, ok := ui.Password(); ok {
			cc.ConnectPassword = []byte(pw)
		}
	}
	cm, err := autopaho.NewConnection(ctx, cc)
	if err != nil {
		stopped()
		return fmt.Errorf("mqtt broker %s: %w", p.cfg.Name, err)
	}
	p.mu.Lock()
	p.cm = cm
	p.mu.Unlock()
	go func() {
		started()
		defer stopped()
		<-ctx.Done()
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cm.Disconnect(dctx)
		<-cm.Done()
	}()
	return nil
}

// Publish implements broker.Publisher.
func (p *Publisher) Publish(ctx context.Context, topic string, m *broker.Message) error {
	if _, err := p.link.Wait(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	cm := p.cm
	p.mu.Unlock()
	props := &paho.PublishProperties{ContentType: "application/json", User: make(paho.UserProperties, 0, len(m.Headers))}
	for _, h := range m.Headers {
		props.User = append(props.User, paho.UserProperty{Key: h.Name, Value: h.Value})
	}
	pr, err := cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: m.Body, Properties: props})
	switch {
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
	}
	return fmt.Errorf("%w: %v", broker.ErrConnLost, err)
}

func reasonString(pr *paho.PublishResponse) string {
	if pr.Properties != nil && pr.Properties.ReasonString != "" {
		return pr.Properties.ReasonString
	}
	return ""
}
