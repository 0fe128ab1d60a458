package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ontimehq/ontime/apiv1"
)

// The schedule wire types, shared with the server.
type (
	// ScheduleRequest is a schedule to create or put.
	ScheduleRequest = apiv1.ScheduleRequest
	// ScheduleTask is the task a schedule's fire times become.
	ScheduleTask = apiv1.ScheduleTask
	// Schedule is a stored schedule's view.
	Schedule = apiv1.Schedule
)

// CreateSchedule stores a new schedule; a name in use is a conflict
// (HasCode(err, apiv1.CodeConflict)).
func (c *Client) CreateSchedule(ctx context.Context, s ScheduleRequest) (*Schedule, error) {
	return call[Schedule](ctx, c, http.MethodPost, "/v1/schedules", s)
}

// PutSchedule creates the schedule name or replaces its definition;
// created says which.
func (c *Client) PutSchedule(ctx context.Context, name string, s ScheduleRequest) (sched *Schedule, created bool, err error) {
	var out Schedule
	code, err := c.do(ctx, http.MethodPut, "/v1/schedules/"+url.PathEscape(name), s, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, code == http.StatusCreated, nil
}

// GetSchedule returns a schedule.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	return call[Schedule](ctx, c, http.MethodGet, "/v1/schedules/"+url.PathEscape(name), nil)
}

// ListSchedules returns every schedule by name.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	out, err := call[apiv1.ScheduleList](ctx, c, http.MethodGet, "/v1/schedules", nil)
	if err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// DeleteSchedule removes a schedule and returns it as it was.
func (c *Client) DeleteSchedule(ctx context.Context, name string) (*Schedule, error) {
	return call[Schedule](ctx, c, http.MethodDelete, "/v1/schedules/"+url.PathEscape(name), nil)
}

// PauseSchedule stops a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleOp(ctx, name, "pause")
}

// ResumeSchedule restarts a paused schedule from its next fire time.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleOp(ctx, name, "resume")
}

func (c *Client) scheduleOp(ctx context.Context, name, op string) (*Schedule, error) {
	return call[Schedule](ctx, c, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+":"+op, nil)
}

// TriggerSchedule makes one task of the schedule now and returns it.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*Task, error) {
	return call[Task](ctx, c, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+":trigger", nil)
}
