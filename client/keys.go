package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
)

// TaskPatch is a change to a pending or claimed task (PATCH).
type TaskPatch = apiv1.TaskPatch

// keyPath is /v1/topics/{topic}/keys/{key}, each part escaped (a key may
// hold slashes and any UTF-8).
func keyPath(topic, key string) string {
	return "/v1/topics/" + url.PathEscape(topic) + "/keys/" + url.PathEscape(key)
}

// Update changes a pending or claimed task.
func (c *Client) Update(ctx context.Context, id string, p TaskPatch) (*Task, error) {
	return call[Task](ctx, c, http.MethodPatch, "/v1/tasks/"+url.PathEscape(id), p)
}

// GetByKey returns the task a key names in a topic: its live task, else
// the one that ended last.
func (c *Client) GetByKey(ctx context.Context, topic, key string) (*Task, error) {
	return call[Task](ctx, c, http.MethodGet, keyPath(topic, key), nil)
}

// UpdateByKey changes the live task a key names.
func (c *Client) UpdateByKey(ctx context.Context, topic, key string, p TaskPatch) (*Task, error) {
	return call[Task](ctx, c, http.MethodPatch, keyPath(topic, key), p)
}

// CancelByKey cancels the live task a key names.
func (c *Client) CancelByKey(ctx context.Context, topic, key string) (*Task, error) {
	return call[Task](ctx, c, http.MethodDelete, keyPath(topic, key), nil)
}

// ListByKey is GET /v1/tasks?topic=&key=: a page holding the task the key
// names, or none.
func (c *Client) ListByKey(ctx context.Context, topic, key string) (*ListPage, error) {
	q := url.Values{"topic": {topic}, "key": {key}}
	return call[ListPage](ctx, c, http.MethodGet, "/v1/tasks?"+strings.ReplaceAll(q.Encode(), "+", "%20"), nil)
}
