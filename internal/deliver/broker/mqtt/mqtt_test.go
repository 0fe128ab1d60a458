package mqtt_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/ontimehq/ontime/internal/deliver/broker/brokertest"
	"github.com/ontimehq/ontime/internal/deliver/broker/mqtt"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestContract runs the publisher contract against the shared Mosquitto,
// each test on a topic of its own with a QoS 1 subscriber; the refusal is
// a topic nobody subscribes to (PUBACK 0x10).
func TestContract(t *testing.T) {
	raw := testdb.MQTTURL()
	brokertest.Run(t, brokertest.Harness{
		Kind: mqtt.Kind(),
		URL:  raw,
		Destination: func(t *testing.T, r *brokertest.Receiver) string {
			topic := testdb.Unique("ontime_t_") + "/due"
			subscribe(t, raw, topic, r)
			return topic
		},
		Refused: func(t *testing.T) []brokertest.Refusal {
			return []brokertest.Refusal{{Address: testdb.Unique("ontime_t_") + "/nobody", Reason: "no subscriber"}}
		},
	})
}

// subscribe subscribes to topic at QoS 1 and feeds r, until t ends.
func subscribe(t *testing.T, raw, topic string, r *brokertest.Receiver) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 20, CleanStartOnInitialConnection: true,
		ClientConfig: paho.ClientConfig{
			ClientID: testdb.Unique("ontime-t-"),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				h := map[string]string{}
				if pr.Packet.Properties != nil {
					for _, p := range pr.Packet.Properties.User {
						h[p.Key] = p.Value
					}
				}
				r.Add(brokertest.Received{Body: pr.Packet.Payload, Headers: h})
				return true, nil
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
		cancel()
	})
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if err := cm.AwaitConnection(sctx); err != nil {
		t.Fatalf("MQTT broker at %s is required: %v", raw, err)
	}
	if _, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
}
