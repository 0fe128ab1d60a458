package client

import (
	"context"
	"net/http"

	"github.com/ontimehq/ontime/apiv1"
)

// Outboxes lists every outbox of the node's config with each table's rows
// by status, oldest age, held keys and failing rows (GET /v1/outboxes).
func (c *Client) Outboxes(ctx context.Context) ([]apiv1.Outbox, error) {
	out, err := call[apiv1.OutboxList](ctx, c, http.MethodGet, "/v1/outboxes", nil)
	if err != nil {
		return nil, err
	}
	return out.Outboxes, nil
}
