package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ontimehq/ontime/apiv1"
)

// Topics lists every topic that has tasks or is paused: counts by status,
// the oldest pending due time, whether it is paused.
func (c *Client) Topics(ctx context.Context) ([]apiv1.Topic, error) {
	var out apiv1.TopicList
	if _, err := c.do(ctx, http.MethodGet, "/v1/topics", nil, &out); err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// PauseTopic pauses topic cluster wide and returns its view.
func (c *Client) PauseTopic(ctx context.Context, topic string) (*apiv1.Topic, error) {
	return c.topicOp(ctx, topic, "pause")
}

// ResumeTopic resumes topic and returns its view.
func (c *Client) ResumeTopic(ctx context.Context, topic string) (*apiv1.Topic, error) {
	return c.topicOp(ctx, topic, "resume")
}

func (c *Client) topicOp(ctx context.Context, topic, op string) (*apiv1.Topic, error) {
	var out apiv1.Topic
	if _, err := c.do(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+":"+op, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RequeueTopic moves every dead task of topic back to pending and returns
// how many.
func (c *Client) RequeueTopic(ctx context.Context, topic string) (int64, error) {
	var out apiv1.TopicRequeue
	if _, err := c.do(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+":requeue", nil, &out); err != nil {
		return 0, err
	}
	return out.Requeued, nil
}
