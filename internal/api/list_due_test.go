package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// TestListDueRange: GET /v1/tasks?due_after=&due_before= keeps the tasks
// due in the range; a malformed or empty range is refused, field named.
func TestListDueRange(t *testing.T) {
	t.Parallel()
	base, _ := apitest.StartHandler(t, nil)
	at := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	for i := range 6 {
		body, _ := json.Marshal(apiv1.TaskRequest{Topic: "due", Key: fmt.Sprint(i), DueAt: at.Add(time.Duration(i) * time.Hour).Format(time.RFC3339), Target: "http://127.0.0.1:1/x"})
		resp, err := http.Post(base+"/v1/tasks", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get := func(q url.Values) (int, apiv1.ListPage, apiv1.ErrorBody) {
		resp, err := http.Get(base + "/v1/tasks?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var pg apiv1.ListPage
		var eb apiv1.ErrorBody
		_ = json.Unmarshal(raw, &pg)
		_ = json.Unmarshal(raw, &eb)
		return resp.StatusCode, pg, eb
	}
	code, pg, _ := get(url.Values{"topic": {"due"}, "due_after": {at.Add(time.Hour).Format(time.RFC3339)}, "due_before": {at.Add(3 * time.Hour).Format(time.RFC3339)}})
	if code != 200 || len(pg.Tasks) != 2 || pg.Tasks[0].Key == pg.Tasks[1].Key {
		t.Fatalf("range: %d %+v", code, pg)
	}
	for _, tk := range pg.Tasks {
		if tk.Key != "1" && tk.Key != "2" {
			t.Errorf("task %s due %v listed", tk.Key, tk.DueAt)
		}
	}
	for _, tc := range []struct {
		q     url.Values
		field string
	}{
		{url.Values{"due_after": {"tomorrow"}}, "due_after"},
		{url.Values{"due_before": {"2030-01-01"}}, "due_before"},
		{url.Values{"due_after": {"2030-01-02T00:00:00Z"}, "due_before": {"2030-01-01T00:00:00Z"}}, "due_before"},
		{url.Values{"topic": {"due"}, "key": {"1"}, "due_after": {"2030-01-01T00:00:00Z"}}, "due_after"},
	} {
		if code, _, eb := get(tc.q); code != 400 || eb.Error.Field != tc.field {
			t.Errorf("%v: %d %+v", tc.q, code, eb)
		}
	}
}
