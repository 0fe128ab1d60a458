package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ontimehq/ontime/apiv1"
)

// CreateOperation starts a bulk operation (POST /v1/operations): it
// answers at once with the stored operation, which a node runs in the
// background; poll it with Operation.
func (c *Client) CreateOperation(ctx context.Context, req apiv1.OperationRequest) (*apiv1.Operation, error) {
	return call[apiv1.Operation](ctx, c, http.MethodPost, "/v1/operations", req)
}

// Operation returns a bulk operation and its progress.
func (c *Client) Operation(ctx context.Context, id string) (*apiv1.Operation, error) {
	return call[apiv1.Operation](ctx, c, http.MethodGet, "/v1/operations/"+url.PathEscape(id), nil)
}

// Operations lists bulk operations, newest first (limit 0: the server's
// default).
func (c *Client) Operations(ctx context.Context, limit int) ([]apiv1.Operation, error) {
	path := "/v1/operations"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	out, err := call[apiv1.OperationList](ctx, c, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return out.Operations, nil
}
