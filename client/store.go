package client

import (
	"context"
	"net/http"

	"github.com/ontimehq/ontime/apiv1"
)

// StoreStatus is GET /v1/store: the store's recorded databases and the
// progress of an expansion under way.
func (c *Client) StoreStatus(ctx context.Context) (*apiv1.StoreStatus, error) {
	return call[apiv1.StoreStatus](ctx, c, http.MethodGet, "/v1/store", nil)
}

// StoreExpand is POST /v1/store:expand (admin): the node records an
// expansion of the store and runs it; StoreStatus shows its progress.
func (c *Client) StoreExpand(ctx context.Context, req apiv1.StoreExpandRequest) (*apiv1.StoreStatus, error) {
	return call[apiv1.StoreStatus](ctx, c, http.MethodPost, "/v1/store:expand", req)
}
