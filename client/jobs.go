package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ontimehq/ontime/apiv1"
)

// Jobs lists the scan jobs (GET /v1/jobs).
func (c *Client) Jobs(ctx context.Context) ([]apiv1.JobView, error) {
	out, err := call[apiv1.JobList](ctx, c, http.MethodGet, "/v1/jobs", nil)
	if err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Job describes one job with each item's owner, unfinished run and cursor.
func (c *Client) Job(ctx context.Context, name string) (*apiv1.JobView, error) {
	return call[apiv1.JobView](ctx, c, http.MethodGet, "/v1/jobs/"+url.PathEscape(name), nil)
}

// JobRuns lists a job's latest runs, newest first; item "" for every item,
// limit 0 for the server's default (100).
func (c *Client) JobRuns(ctx context.Context, name, item string, limit int) ([]apiv1.JobRun, error) {
	q := url.Values{}
	if item != "" {
		q.Set("item", item)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	out, err := call[apiv1.JobRunList](ctx, c, http.MethodGet, withQuery("/v1/jobs/"+url.PathEscape(name)+"/runs", q), nil)
	if err != nil {
		return nil, err
	}
	return out.Runs, nil
}

// JobOp posts :trigger, :pause or :resume to a job and returns its view.
func (c *Client) JobOp(ctx context.Context, name, op string) (*apiv1.JobView, error) {
	return call[apiv1.JobView](ctx, c, http.MethodPost, "/v1/jobs/"+url.PathEscape(name)+":"+op, nil)
}
