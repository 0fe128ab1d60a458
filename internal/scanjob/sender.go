package scanjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/buildinfo"
	"github.com/ontimehq/ontime/internal/deliver/policy"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
)

// Batch is what a SQL job hands its target: up to process.batch rows of
// one item. Keys are the rows' keys, in order.
type Batch struct {
	Job  string `json:"job"`
	Item string `json:"item"`
	// ID names the batch by its job, item and rows' keys (batchID): the
	// same rows sent again — the call retried, the page read again after
	// a failure or a restart — carry the same ID, so a receiver that
	// remembers the IDs it processed can drop a repeated batch.
	ID   string           `json:"batch_id"`
	Rows []map[string]any `json:"rows"`
	Keys []any            `json:"-"`
}

// Sender hands a batch to a target. A nil error with no failed keys means
// every row was processed; failed lists the keys (as the receiver wrote
// them: compared by keyString) of rows that were not; an error means none
// was. Implementations: the webhook sender here; mq:// senders plug in by
// scheme (Config.Senders).
type Sender interface {
	Send(ctx context.Context, target string, b *Batch) (failed []any, err error)
}

// WebhookSender posts {"job","item","batch_id","rows":[…]} to an http(s)
// target, signed like task webhooks (the keyring's secrets for topic
// "job:NAME" and the target, which Ontime-Target carries) and dialled
// under the target policy. Ontime-Batch-Id repeats the batch ID. Any 2xx is success,
// save the rows the answer lists in {"failed": [key, …]}.
type WebhookSender struct {
	client    *http.Client
	keys      *webhook.Keyring
	timeout   time.Duration
	userAgent string
}

// NewWebhookSender builds the sender; keys and pol may be nil; timeout
// bounds one call.
func NewWebhookSender(keys *webhook.Keyring, pol *policy.Policy, timeout time.Duration) *WebhookSender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if pol != nil {
		// As the task webhook: the policy judges the address dialled.
		tr.Proxy = nil
		tr.DialContext = (&policy.Dialer{Policy: pol, Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
	}
	tr.MaxIdleConns = 512
	tr.MaxIdleConnsPerHost = 256
	return &WebhookSender{client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, keys: keys, timeout: timeout, userAgent: buildinfo.Read().UserAgent()}
}

// Send implements Sender.
func (w *WebhookSender) Send(ctx context.Context, target string, b *Batch) ([]any, error) {
	if b.ID == "" {
		b.ID = batchID(b)
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.userAgent)
	req.Header.Set("Ontime-Job", b.Job)
	req.Header.Set("Ontime-Item", b.Item)
	req.Header.Set("Ontime-Batch-Id", b.ID)
	req.Header.Set("Ontime-Target", target)
	if secrets := w.keys.For("job:"+b.Job, target); len(secrets) > 0 {
		req.Header.Set("Ontime-Signature", webhook.Sign(secrets, time.Now(), target, body, w.keys.V1))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		snippet := strings.ToValidUTF8(strings.TrimSpace(string(ans)), "\uFFFD")
		if len(snippet) > 256 {
			snippet = snippet[:256]
		}
		return nil, &webhook.StatusError{Code: resp.StatusCode, Body: snippet}
	}
	if len(bytes.TrimSpace(ans)) == 0 {
		return nil, nil
	}
	var out struct {
		Failed []any `json:"failed"`
	}
	dec := json.NewDecoder(bytes.NewReader(ans))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		// A 2xx with a body that is not ours: every row was processed.
		return nil, nil
	}
	return out.Failed, nil
}

// ErrNoSender: no sender handles the target's scheme.
var ErrNoSender = errors.New("no sender for this target's scheme")
