package scanjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/task"
)

// MQSender hands batches to mq://BROKER/ADDRESS targets: one message per
// batch, its body the batch's JSON ({"job","item","batch_id","rows"}), success the
// broker's acknowledgement. A broker has no per-row answer, so a batch is
// processed whole or not at all.
//
// Headers are those of task messages, read for a batch: ontime-task-id is
// a batch ID derived from the job, the item and the rows' keys (the same
// batch sent again has the same ID, so a NATS stream's duplicate window
// or a consumer drops it), ontime-topic is "job:NAME", ontime-key the item.
type MQSender struct {
	Brokers *broker.Set
}

// Check judges an mq:// target when a job is registered: the broker must
// be configured and the address well formed for its kind.
func (m MQSender) Check(target string) error {
	name, address, isMQ, err := task.SplitMQTarget(target)
	if err != nil || !isMQ {
		return fmt.Errorf("%q is not mq://BROKER/ADDRESS", target)
	}
	return m.Brokers.CheckTarget(name, address)
}

// Send implements Sender.
func (m MQSender) Send(ctx context.Context, target string, b *Batch) ([]any, error) {
	if b.ID == "" {
		b.ID = batchID(b)
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	id := b.ID
	msg := &broker.Message{ID: id, Body: body, Headers: [5]broker.Header{
		{Name: broker.HeaderTaskID, Value: id},
		{Name: broker.HeaderAttempt, Value: "1"},
		{Name: broker.HeaderTopic, Value: "job:" + b.Job},
		{Name: broker.HeaderKey, Value: b.Item},
		{Name: broker.HeaderDueAt, Value: time.Now().UTC().Format(time.RFC3339Nano)},
	}}
	if err := m.Brokers.Publish(ctx, target, msg); err != nil {
		return nil, err
	}
	return nil, nil
}

// batchID names a batch by its job, item and keys.
func batchID(b *Batch) string {
	h := sha256.New()
	h.Write([]byte(b.Job + "\x00" + b.Item))
	for _, k := range b.Keys {
		h.Write([]byte{0})
		h.Write([]byte(keyString(k)))
	}
	return "job-" + hex.EncodeToString(h.Sum(nil)[:16]) + "-" + strconv.Itoa(len(b.Keys))
}
