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
	out, err := c.TopicList(ctx)
	if err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// TopicList is GET /v1/topics whole: the topics and when their counts
// were taken (the server recounts in the background).
func (c *Client) TopicList(ctx context.Context) (*apiv1.TopicList, error) {
	out, err := call[apiv1.TopicList](ctx, c, http.MethodGet, "/v1/topics", nil)
	if err != nil {
		return nil, err
	}
	return out, nil
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
	return call[apiv1.Topic](ctx, c, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+":"+op, nil)
}

// RequeueTopic moves every dead task of topic back to pending and returns
// how many.
func (c *Client) RequeueTopic(ctx context.Context, topic string) (int64, error) {
	out, err := call[apiv1.TopicRequeue](ctx, c, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+":requeue", nil)
	if err != nil {
		return 0, err
	}
	return out.Requeued, nil
}

// Topic is GET /v1/topics/{topic}: the topic's view, counted now, with its
// settings.
func (c *Client) Topic(ctx context.Context, topic string) (*apiv1.Topic, error) {
	return call[apiv1.Topic](ctx, c, http.MethodGet, "/v1/topics/"+url.PathEscape(topic), nil)
}

// PutTopic is PUT /v1/topics/{topic}: s replaces the topic's dynamic
// settings (an empty s removes them), for every node; it returns the
// topic's view.
func (c *Client) PutTopic(ctx context.Context, topic string, s apiv1.TopicSettings) (*apiv1.Topic, error) {
	return call[apiv1.Topic](ctx, c, http.MethodPut, "/v1/topics/"+url.PathEscape(topic), s)
}
