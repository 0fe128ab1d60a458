package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/cronspec"
)

type route struct {
	pattern string
	h       http.Handler
}

// routes is every console route. Pages are GETs whose filters are in the
// query string (bookmarkable); actions are POSTs carrying the CSRF token,
// answered by a redirect back to their page (its flash says what was done)
// or by that page with the API's error in it and the API's status.
func (c *Console) routes() []route {
	sub, _ := fs.Sub(files, "assets")
	assets := http.StripPrefix("/ui/assets/", http.FileServerFS(sub))
	on := c.signedIn
	return []route{
		{"GET /ui/assets/", cacheAssets(assets)},
		{"GET /ui/login", http.HandlerFunc(c.login)},
		{"POST /ui/login", http.HandlerFunc(c.login)},
		{"POST /ui/logout", http.HandlerFunc(c.logout)},
		{"GET /ui", http.RedirectHandler("/ui/", http.StatusFound)},

		{"GET /ui/{$}", on(c.overview)},
		{"GET /ui/overview/series", on(c.series)},

		{"GET /ui/upcoming", on(c.upcoming)},

		{"GET /ui/tasks", on(c.tasks)},
		{"GET /ui/tasks/{id}", on(c.taskDetail)},
		{"POST /ui/tasks/{id}/{op}", on(c.taskAction)}, // cancel, reschedule, payload, requeue, purge

		{"GET /ui/dead", on(c.dead)},
		{"POST /ui/dead/{op}", on(c.deadAction)}, // requeue, purge

		{"GET /ui/topics", on(c.topics)},
		{"POST /ui/topics/{topic}/{op}", on(c.topicAction)}, // pause, resume, requeue

		{"GET /ui/schedules", on(c.schedules)},
		{"GET /ui/schedules/new", on(c.scheduleForm)},
		{"GET /ui/schedules/{name}/edit", on(c.scheduleForm)},
		{"POST /ui/schedules/preview", on(c.schedulePreview)},
		{"POST /ui/schedules", on(c.scheduleSave)},
		{"POST /ui/schedules/{name}/{op}", on(c.scheduleAction)}, // pause, resume, trigger, delete

		{"GET /ui/jobs", on(c.jobs)},
		{"GET /ui/jobs/{name}", on(c.jobDetail)},
		{"POST /ui/jobs/{name}/{op}", on(c.jobAction)}, // pause, resume, trigger

		{"GET /ui/cluster", on(c.cluster)},
		{"/ui/", http.HandlerFunc(c.notFound)},
	}
}

func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The files change only with the binary; an hour is a fair bet.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.renderError(w, r, c.viewerOf(r), http.StatusNotFound, "", "no console page at "+r.URL.Path)
}

// done ends a successful action: back to its page, with a flash.
func done(w http.ResponseWriter, r *http.Request, back, msg string) {
	setFlash(w, r, msg)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// ---- Overview ----

type overviewData struct {
	Topics     []apiv1.Topic
	Rows       template.HTML // the rows of Topics (overviewRows)
	TopicsErr  *pageError
	Totals     map[string]int64
	Cluster    *apiv1.ClusterView
	ClusterErr *pageError
	LiveNodes  int
	Breakers   []breakerRow
	Overdue    *overdue
	Charts     bool
	CountedAt  time.Time // when the server counted the topics (its count cache)
}

type breakerRow struct{ Dest, State string }

type overdue struct {
	Topic string
	DueAt time.Time
	Late  time.Duration
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Overview", "overview")
	d := &overviewData{Totals: map[string]int64{}, Charts: c.opts.Samples != nil}
	ctx := r.Context()
	if tl, err := v.client.TopicList(ctx); err != nil {
		d.TopicsErr = asPageError(err)
	} else {
		d.Topics, d.CountedAt = tl.Topics, tl.CountedAt
		d.Rows = overviewRows(tl.Topics, time.Now())
		for _, t := range tl.Topics {
			for s, n := range t.Counts {
				d.Totals[s] += n
			}
			if t.OldestDueAt != nil && t.OldestDueAt.Before(p.Now) && !t.Paused && (d.Overdue == nil || t.OldestDueAt.Before(d.Overdue.DueAt)) {
				d.Overdue = &overdue{Topic: t.Topic, DueAt: *t.OldestDueAt, Late: p.Now.Sub(*t.OldestDueAt).Round(time.Millisecond)}
			}
		}
	}
	if v.Can(http.MethodGet, "/v1/cluster") {
		if cv, err := c.clusterSummary(ctx, v); err != nil {
			d.ClusterErr = asPageError(err)
		} else {
			d.Cluster = cv
			for _, n := range cv.Nodes {
				if n.Live {
					d.LiveNodes++
				}
			}
		}
	}
	if c.opts.Breakers != nil {
		for dest, st := range c.opts.Breakers() {
			d.Breakers = append(d.Breakers, breakerRow{dest, st})
		}
		sort.Slice(d.Breakers, func(i, j int) bool { return d.Breakers[i].Dest < d.Breakers[j].Dest })
	}
	p.Data = d
	c.render(w, r, "overview", p, http.StatusOK)
}

// overviewStatuses are the overview table's columns.
var overviewStatuses = [...]string{"pending", "claimed", "running", "done", "dead", "cancelled"}

// overviewRows writes the overview's table rows, a topic a row with a
// link per status. Built here rather than in the template: the template's
// calls per cell (index, q, eq through reflection) made a 200-topic
// refresh cost 13 ms of CPU, most of what one open overview cost the node
// every 2 s; this costs a tenth. Every value is escaped for its place.
func overviewRows(topics []apiv1.Topic, now time.Time) template.HTML {
	var b strings.Builder
	b.Grow(len(topics) * 600)
	for _, t := range topics {
		name := template.HTMLEscapeString(t.Topic)
		tq := template.HTMLEscapeString(url.QueryEscape(t.Topic))
		b.WriteString(`<tr><td><a href="/ui/tasks?topic=`)
		b.WriteString(tq)
		b.WriteString(`">`)
		b.WriteString(name)
		b.WriteString(`</a>`)
		if t.Paused {
			b.WriteString(` <span class="badge warn">paused</span>`)
		}
		b.WriteString("</td>\n")
		for _, st := range overviewStatuses {
			n := strconv.FormatInt(t.Counts[st], 10)
			b.WriteString(`<td class="num">`)
			switch {
			case st == "dead" && t.Counts[st] != 0:
				b.WriteString(`<a class="bad" href="/ui/dead?topic=` + tq + `">` + n + `</a>`)
			case st == "dead":
				b.WriteString(`0`)
			default:
				b.WriteString(`<a href="/ui/tasks?topic=` + tq + `&amp;status=` + st + `">` + n + `</a>`)
			}
			b.WriteString(`</td>`)
		}
		b.WriteString("\n<td>")
		if t.OldestDueAt != nil {
			b.WriteString(template.HTMLEscapeString(ago(*t.OldestDueAt, now)))
		} else {
			b.WriteString("—")
		}
		b.WriteString("</td></tr>\n")
	}
	return template.HTML(b.String()) //nolint:gosec // every value above is escaped
}

// clusterSummary is the cluster view for the overview, read at most
// every clusterTTL (the cluster page reads it fresh).
func (c *Console) clusterSummary(ctx context.Context, v *viewer) (*apiv1.ClusterView, error) {
	c.clusterMu.Lock()
	defer c.clusterMu.Unlock()
	if c.clusterV != nil && time.Since(c.clusterAt) < clusterTTL {
		return c.clusterV, nil
	}
	cv, err := v.client.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	c.clusterV, c.clusterAt = cv, time.Now()
	return cv, nil
}

// series answers the charts' data, uPlot's columnar form: unix seconds,
// deliveries/s, failures/s, lateness p50 and p99 in milliseconds (null
// for a second with no delivery).
func (c *Console) series(w http.ResponseWriter, r *http.Request, _ *viewer) {
	var samples []Sample
	if c.opts.Samples != nil {
		samples = c.opts.Samples.Samples()
	}
	cols := make([][]*float64, 5)
	for i := range cols {
		cols[i] = make([]*float64, 0, len(samples))
	}
	f := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	for _, s := range samples {
		cols[0] = append(cols[0], f(float64(s.At.Unix())))
		cols[1] = append(cols[1], f(s.Deliveries))
		cols[2] = append(cols[2], f(s.Failures))
		cols[3] = append(cols[3], f(s.P50*1000))
		cols[4] = append(cols[4], f(s.P99*1000))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(cols)
}

// ---- Coming up ----

// upcomingRanges are the Coming up page's spans: each cut into at most 60
// buckets, so the page (and the query behind it) stays small. The day and
// the week are cut in whole hours: the store sums its maintained counters
// for those (sqlstore duecounts.go) instead of counting every pending task
// in range; the hour and six hours hold few enough to count.
var upcomingRanges = []struct {
	Name  string
	Span  time.Duration
	Step  time.Duration
	Label string // time layout of a bucket's start
}{
	{"1h", time.Hour, time.Minute, "15:04"},
	{"6h", 6 * time.Hour, 10 * time.Minute, "15:04"},
	{"24h", 24 * time.Hour, time.Hour, "Mon 15:04"},
	{"7d", 7 * 24 * time.Hour, 4 * time.Hour, "Mon 02 15:04"},
}

type upcomingData struct {
	Range  string
	Ranges []string
	Topic  string
	Topics []upcomingTopic
	Rows   []upcomingRow
	Total  int64
	Step   time.Duration
	// CountedAt is when the histogram was counted (console.dueCache):
	// counting is not per view.
	CountedAt time.Time
	// Counting: no histogram yet, its count runs (the next poll shows it).
	Counting bool
}

type upcomingTopic struct {
	Topic string
	Total int64
	Color int // the palette class of its bars
}

// barsTopics is how many topics the Coming up bars colour one by one.
const barsTopics = 8

type upcomingRow struct {
	At    time.Time
	Label string
	Total int64
	Parts []upcomingPart
}

type upcomingPart struct {
	Topic string
	Count int64
	Color int
	Pct   float64 // of the fullest bucket's width
}

// upcoming shows what falls due over the next hour, 6 hours, day or week,
// per topic, as a histogram: tomorrow's 09:00 spike is visible today.
func (c *Console) upcoming(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Coming up", "upcoming")
	q := r.URL.Query()
	d := &upcomingData{Range: q.Get("range"), Topic: strings.TrimSpace(q.Get("topic"))}
	p.Data = d
	rg := upcomingRanges[2]
	for _, x := range upcomingRanges {
		d.Ranges = append(d.Ranges, x.Name)
		if x.Name == d.Range {
			rg = x
		}
	}
	d.Range, d.Step = rg.Name, rg.Step
	switch {
	case c.opts.Upcoming == nil:
		p.Err = &pageError{Status: http.StatusNotFound, Message: "this node has no store to ask"}
	case !v.Can(http.MethodGet, "/v1/topics") || (v.tok != nil && v.tok.Topics != ""):
		// The counts span topics, like GET /v1/topics.
		p.Err = &pageError{Status: http.StatusForbidden, Code: "forbidden", Message: "this token may not read counts across topics (GET /v1/topics)"}
	}
	if p.Err != nil {
		c.render(w, r, "upcoming", p, http.StatusOK)
		return
	}
	n := int((rg.Span + rg.Step - 1) / rg.Step)
	from, counts, at, err := c.due.get(r.Context(), p.Now.Truncate(rg.Step), rg.Step, n+1)
	d.CountedAt = at
	if err == nil && at.IsZero() {
		d.Counting = true
		c.render(w, r, "upcoming", p, http.StatusOK)
		return
	}
	if err != nil {
		c.log.Warn("console: upcoming", "err", err)
		p.Err = &pageError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the task store did not answer; retry later"}
		c.render(w, r, "upcoming", p, http.StatusOK)
		return
	}
	d.Rows = make([]upcomingRow, n+1)
	for i := range d.Rows {
		at := from.Add(time.Duration(i) * rg.Step)
		d.Rows[i] = upcomingRow{At: at, Label: at.Format(rg.Label)}
	}
	// The barsTopics topics with most tasks get a colour each; the others
	// share one part per bar ("other topics"), so 200 topics make 61 bars
	// of at most barsTopics+1 parts, not 12,000 (the page stayed 1 MB).
	var shown []DueCounts
	totals := map[string]int64{}
	for _, tc := range counts {
		if d.Topic != "" && tc.Topic != d.Topic {
			continue
		}
		for _, n := range tc.Counts {
			totals[tc.Topic] += n
		}
		if totals[tc.Topic] > 0 {
			shown = append(shown, tc)
		}
	}
	sort.SliceStable(shown, func(i, j int) bool { return totals[shown[i].Topic] > totals[shown[j].Topic] })
	others := make([]int64, n+1)
	for i, tc := range shown {
		ut := upcomingTopic{Topic: tc.Topic, Total: totals[tc.Topic], Color: min(i, barsTopics)}
		for b, n := range tc.Counts {
			if n == 0 {
				continue
			}
			d.Rows[b].Total += n
			if i < barsTopics {
				d.Rows[b].Parts = append(d.Rows[b].Parts, upcomingPart{Topic: tc.Topic, Count: n, Color: ut.Color})
			} else {
				others[b] += n
			}
		}
		d.Total += ut.Total
		d.Topics = append(d.Topics, ut)
	}
	for b, n := range others {
		if n > 0 {
			d.Rows[b].Parts = append(d.Rows[b].Parts, upcomingPart{Topic: "other topics", Count: n, Color: barsTopics})
		}
	}
	var most int64
	for _, row := range d.Rows {
		most = max(most, row.Total)
	}
	for i := range d.Rows {
		for j := range d.Rows[i].Parts {
			d.Rows[i].Parts[j].Pct = 100 * float64(d.Rows[i].Parts[j].Count) / float64(max(most, 1))
		}
	}
	c.render(w, r, "upcoming", p, http.StatusOK)
}

// ---- Tasks ----

type tasksData struct {
	Tasks []apiv1.Task
	Next  string // the next page's URL, "" on the last
	// Searched: a search ran (a filter was given).
	Searched bool
}

const pageSize = 50

func (c *Console) tasks(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Tasks", "tasks")
	q := r.URL.Query()
	d := &tasksData{}
	p.Data = d
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, "/ui/tasks/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	topic, key, status, cursor := strings.TrimSpace(q.Get("topic")), q.Get("key"), q.Get("status"), q.Get("cursor")
	ctx := r.Context()
	var pg *apiv1.ListPage
	var err error
	switch {
	case key != "" && topic == "":
		p.Err = &pageError{Status: http.StatusBadRequest, Field: "topic", Message: "a key is searched within a topic: give the topic too"}
	case key != "":
		d.Searched = true
		pg, err = v.client.ListByKey(ctx, topic, key)
	default:
		o := client.ListOptions{Topic: topic, Status: status, Limit: pageSize, Cursor: cursor}
		for _, f := range []struct {
			name string
			to   *time.Time
		}{{"due_after", &o.DueAfter}, {"due_before", &o.DueBefore}} {
			if s := strings.TrimSpace(q.Get(f.name)); s != "" {
				t, perr := parseLocalTime(s, q.Get("tz_offset"))
				if perr != nil {
					p.Err = &pageError{Status: http.StatusBadRequest, Field: f.name, Message: fmt.Sprintf("%q is not a date and time", s)}
					c.render(w, r, "tasks", p, http.StatusOK)
					return
				}
				*f.to = t
			}
		}
		d.Searched = topic != "" || status != "" || !o.DueAfter.IsZero() || !o.DueBefore.IsZero()
		pg, err = v.client.List(ctx, o)
	}
	if err != nil {
		p.Err = asPageError(err)
	}
	if pg != nil {
		d.Tasks = pg.Tasks
		if pg.NextCursor != "" {
			nq := url.Values{}
			for k, vs := range q {
				nq[k] = vs
			}
			nq.Set("cursor", pg.NextCursor)
			d.Next = "/ui/tasks?" + nq.Encode()
		}
	}
	c.render(w, r, "tasks", p, http.StatusOK)
}

type taskData struct {
	Task *apiv1.Task
	// Payload is the payload field's text: the form's value after a
	// refused edit, else the task's, pretty-printed.
	Payload string
}

func (c *Console) taskDetail(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.showTask(w, r, v, nil, "")
}

// showTask renders a task's page, with the error of a refused action.
func (c *Console) showTask(w http.ResponseWriter, r *http.Request, v *viewer, actionErr *pageError, payload string) {
	id := r.PathValue("id")
	p := c.newPage(w, r, v, "Task "+id, "tasks")
	p.Self = "/ui/tasks/" + url.PathEscape(id)
	d := &taskData{Payload: payload}
	p.Data = d
	t, err := v.client.Get(r.Context(), id)
	if err != nil {
		p.Err = asPageError(err)
	} else {
		d.Task = t
		if payload == "" {
			d.Payload = funcs["pretty"].(func(json.RawMessage) string)(t.Payload)
		}
	}
	if actionErr != nil {
		p.Err = actionErr
	}
	c.render(w, r, "task", p, http.StatusOK)
}

func (c *Console) taskAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, op := r.PathValue("id"), r.PathValue("op")
	ctx := r.Context()
	back := "/ui/tasks/" + url.PathEscape(id)
	var err error
	var msg string
	switch op {
	case "cancel":
		_, err = v.client.Cancel(ctx, id)
		msg = "Task cancelled."
	case "requeue":
		_, err = v.client.Requeue(ctx, id)
		msg = "Task requeued: pending, due now."
	case "purge":
		// The task is gone afterwards: back to its topic's list (its dead
		// letters for a dead one) unless the form says where.
		var t *apiv1.Task
		if t, err = v.client.Purge(ctx, id); err == nil {
			back = "/ui/tasks?topic=" + url.QueryEscape(t.Topic)
			if t.Status == "dead" {
				back = "/ui/dead?topic=" + url.QueryEscape(t.Topic)
			}
		}
		msg = "Task " + id + " purged."
	case "reschedule":
		var patch client.TaskPatch
		due, delay := strings.TrimSpace(r.PostFormValue("due_at")), strings.TrimSpace(r.PostFormValue("delay"))
		switch {
		case due != "" && delay != "":
			c.showTask(w, r, v, &pageError{Status: http.StatusBadRequest, Field: "delay", Message: "give a time or a delay, not both"}, "")
			return
		case due != "":
			if t, perr := parseLocalTime(due, r.PostFormValue("tz_offset")); perr == nil {
				due = t.Format(time.RFC3339Nano)
			}
			patch.DueAt = &due
		case delay != "":
			patch.Delay = &delay
		default:
			c.showTask(w, r, v, &pageError{Status: http.StatusBadRequest, Field: "due_at", Message: "give a time or a delay"}, "")
			return
		}
		_, err = v.client.Update(ctx, id, patch)
		msg = "Task rescheduled."
	case "payload":
		raw := strings.TrimSpace(r.PostFormValue("payload"))
		if !json.Valid([]byte(raw)) {
			c.showTask(w, r, v, &pageError{Status: http.StatusBadRequest, Field: "payload", Message: "not valid JSON"}, raw)
			return
		}
		_, err = v.client.Update(ctx, id, client.TaskPatch{Payload: json.RawMessage(raw)})
		if err != nil {
			c.showTask(w, r, v, asPageError(err), raw)
			return
		}
		msg = "Payload saved."
	default:
		c.renderError(w, r, v, http.StatusNotFound, "op", fmt.Sprintf("%q is not an action on a task (cancel, reschedule, payload, requeue, purge)", op))
		return
	}
	if err != nil {
		c.showTask(w, r, v, asPageError(err), "")
		return
	}
	done(w, r, safeBack(r.PostFormValue("back"), back), msg)
}

// parseLocalTime reads an <input type=datetime-local> value, which has no
// zone: the browser's offset from UTC in minutes (tz_offset, as
// Date.getTimezoneOffset gives it, set by console.js) says which; without
// it the time is UTC. A value that is already RFC 3339 is kept.
func parseLocalTime(s, offset string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var t time.Time
	var err error
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err = time.Parse(layout, s); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, err
	}
	if m, err := strconv.Atoi(offset); err == nil && m > -24*60 && m < 24*60 {
		t = t.Add(time.Duration(m) * time.Minute)
	}
	return t, nil
}

// ---- Dead letters ----

type deadData struct {
	Topic  string
	Match  string // last_error contains
	Tasks  []apiv1.Task
	Groups []errGroup
	Next   string
	Topics []apiv1.Topic // those with dead tasks
	// Rows, Options, Chips: the rows of Tasks, and Topics as the filter's
	// choices and as links (deadRows).
	Rows, Options, Chips template.HTML
}

type errGroup struct {
	Message string
	Count   int
	Sample  string // a task ID
}

// deadPage is how many dead tasks the page lists and groups at once.
const deadPage = 200

func (c *Console) dead(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.showDead(w, r, v, nil)
}

// showDead renders the dead letters of r's filter, with the error of a
// refused action.
func (c *Console) showDead(w http.ResponseWriter, r *http.Request, v *viewer, actionErr *pageError) {
	p := c.newPage(w, r, v, "Dead letters", "dead")

	q := r.URL.Query()
	d := &deadData{Topic: strings.TrimSpace(q.Get("topic")), Match: q.Get("error")}
	p.Data = d
	ctx := r.Context()
	if v.tok == nil || v.tok.Topics == "" {
		if ts, err := v.client.Topics(ctx); err == nil {
			for _, t := range ts {
				if t.Counts["dead"] > 0 {
					d.Topics = append(d.Topics, t)
				}
			}
		}
	}
	pg, err := v.client.List(ctx, client.ListOptions{Topic: d.Topic, Status: "dead", Limit: deadPage, Cursor: q.Get("cursor")})
	if err != nil {
		p.Err = asPageError(err)
		c.renderDead(w, r, p, actionErr)
		return
	}
	groups := map[string]*errGroup{}
	for _, t := range pg.Tasks {
		if d.Match != "" && !strings.Contains(t.LastError, d.Match) {
			continue
		}
		d.Tasks = append(d.Tasks, t)
		g := groups[t.LastError]
		if g == nil {
			g = &errGroup{Message: t.LastError, Sample: t.ID}
			groups[t.LastError] = g
		}
		g.Count++
	}
	for _, g := range groups {
		d.Groups = append(d.Groups, *g)
	}
	sort.Slice(d.Groups, func(i, j int) bool {
		if d.Groups[i].Count != d.Groups[j].Count {
			return d.Groups[i].Count > d.Groups[j].Count
		}
		return d.Groups[i].Message < d.Groups[j].Message
	})
	d.Rows = deadRows(d.Tasks, p.Can("POST", "/v1/tasks/x:requeue"), time.Now())
	d.Options, d.Chips = deadTopics(d.Topics)
	if pg.NextCursor != "" {
		nq := url.Values{"cursor": {pg.NextCursor}}
		if d.Topic != "" {
			nq.Set("topic", d.Topic)
		}
		if d.Match != "" {
			nq.Set("error", d.Match)
		}
		d.Next = "/ui/dead?" + nq.Encode()
	}
	c.renderDead(w, r, p, actionErr)
}

// deadRows renders the dead tasks' rows, with a checkbox each when the
// viewer may act on them. Built here, as overviewRows: the template's
// calls per cell made a page of 200 dead tasks cost 10 ms of CPU. Every
// value is escaped for its place.
func deadRows(tasks []apiv1.Task, can bool, now time.Time) template.HTML {
	var b strings.Builder
	b.Grow(len(tasks) * 400)
	for _, t := range tasks {
		id := template.HTMLEscapeString(t.ID)
		b.WriteString(`<tr>`)
		if can {
			b.WriteString(`<td><input type="checkbox" name="id" value="` + id + `" aria-label="select ` + id + `"></td>`)
		}
		b.WriteString("\n" + `<td><a class="mono" href="/ui/tasks/` + template.HTMLEscapeString(url.PathEscape(t.ID)) + `">` + id + `</a></td><td>` +
			template.HTMLEscapeString(t.Topic) + `</td><td class="mono">` + template.HTMLEscapeString(t.Key) + `</td><td class="num">` +
			strconv.Itoa(t.Attempts) + `</td><td>` + template.HTMLEscapeString(ago(t.UpdatedAt, now)) + `</td><td class="bad">` +
			template.HTMLEscapeString(trunc(t.LastError, 120)) + "</td></tr>\n")
	}
	return template.HTML(b.String()) //nolint:gosec // every value above is escaped
}

// deadTopics renders the topics with dead tasks as the filter's choices
// and as links to their dead letters.
func deadTopics(topics []apiv1.Topic) (options, chips template.HTML) {
	var o, c strings.Builder
	for _, t := range topics {
		name := template.HTMLEscapeString(t.Topic)
		n := strconv.FormatInt(t.Counts["dead"], 10)
		o.WriteString(`<option value="` + name + `">` + n + ` dead</option>`)
		c.WriteString(`<a class="chip" href="/ui/dead?topic=` + template.HTMLEscapeString(url.QueryEscape(t.Topic)) + `">` + name + ` <b>` + n + `</b></a>`)
	}
	return template.HTML(o.String()), template.HTML(c.String()) //nolint:gosec // every value above is escaped
}

func (c *Console) renderDead(w http.ResponseWriter, r *http.Request, p *page, actionErr *pageError) {
	if actionErr != nil {
		p.Err = actionErr
	}
	c.render(w, r, "dead", p, http.StatusOK)
}

// deadOps are the dead letters' actions: what each does to one task
// through the API, the bulk operation that does it to all matching, and
// its words.
var deadOps = map[string]struct {
	call   func(ctx context.Context, c *client.Client, id string) (*apiv1.Task, error)
	action string // the bulk operation's action (POST /v1/operations)
	done   string // past participle for the flash
}{
	"requeue": {func(ctx context.Context, c *client.Client, id string) (*apiv1.Task, error) { return c.Requeue(ctx, id) }, "requeue", "requeued"},
	// Dead tasks are final: the API refuses to cancel them (409). What
	// an operator means by "cancel" here is to be rid of them: purge.
	"purge": {func(ctx context.Context, c *client.Client, id string) (*apiv1.Task, error) { return c.Purge(ctx, id) }, "delete", "purged"},
}

// deadAction requeues or purges the dead tasks selected (ids) through the
// per-task routes, or all matching the filter (all=1) by one bulk
// operation, which the node runs in small transactions whatever the
// number of tasks.
func (c *Console) deadAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	ctx := r.Context()
	opName := r.PathValue("op")
	op, ok := deadOps[opName]
	if !ok {
		c.renderError(w, r, v, http.StatusNotFound, "op", fmt.Sprintf("%q is not an action on dead letters (requeue, purge)", opName))
		return
	}
	topic, match := strings.TrimSpace(r.PostFormValue("topic")), r.PostFormValue("error")
	back := safeBack(r.PostFormValue("back"), "/ui/dead")
	fail := func(err *pageError) {
		rr := r.Clone(ctx)
		rr.Method = http.MethodGet
		u, _ := url.Parse(back)
		rr.URL = u
		c.showDead(w, rr, v, err)
	}
	if r.PostFormValue("all") == "" {
		ids := r.PostForm["id"]
		if len(ids) == 0 {
			fail(&pageError{Status: http.StatusBadRequest, Field: "id", Message: "select at least one task"})
			return
		}
		n := 0
		for _, id := range ids {
			if _, err := op.call(ctx, v.client, id); err != nil {
				pe := asPageError(err)
				pe.Message = fmt.Sprintf("task %s: %s (%d %s before it)", id, pe.Message, n, op.done)
				fail(pe)
				return
			}
			n++
		}
		done(w, r, back, fmt.Sprintf("%d dead tasks %s.", n, op.done))
		return
	}
	if topic == "" && match == "" {
		fail(&pageError{Status: http.StatusBadRequest, Field: "topic", Message: opName + " all needs a topic (or an error filter)"})
		return
	}
	// All matching: one bulk operation (POST /v1/operations), which the
	// node runs in small transactions whatever the number of tasks.
	what := "dead tasks of " + topic
	if topic == "" {
		what = "dead tasks"
	}
	if match != "" {
		what += fmt.Sprintf(" whose error contains %q", match)
	}
	msg, err := c.runOperation(ctx, v, apiv1.OperationRequest{Action: op.action,
		Filter: apiv1.OperationFilter{Topic: topic, Status: []string{"dead"}, ErrorContains: match}}, what, op.done)
	if err != nil {
		fail(asPageError(err))
		return
	}
	done(w, r, back, msg)
}

// opWait is how long an action on "all matching" waits for its bulk
// operation before the page says it goes on in the background.
const opWait = 5 * time.Second

// runOperation starts a bulk operation and waits up to opWait for its end;
// the message says what it changed, or that it runs on and how to follow
// it.
func (c *Console) runOperation(ctx context.Context, v *viewer, req apiv1.OperationRequest, what, verb string) (string, error) {
	op, err := v.client.CreateOperation(ctx, req)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(opWait)
	for op.Status != "done" && op.Status != "failed" && time.Now().Before(deadline) {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		if op, err = v.client.Operation(ctx, op.ID); err != nil {
			return "", err
		}
	}
	switch op.Status {
	case "done":
		return fmt.Sprintf("%d %s %s.", op.Changed, what, verb), nil
	case "failed":
		return "", fmt.Errorf("operation %s failed after %d %s: %s", op.ID, op.Changed, verb, op.Error)
	}
	return fmt.Sprintf("%d %s %s so far; the rest goes on in the background as operation %s (ontime bulk status %s).", op.Changed, what, verb, op.ID, op.ID), nil
}

// ---- Topics ----

type topicsData struct {
	Topics    []apiv1.Topic
	Rows      template.HTML // the rows of Topics (topicsRows)
	CountedAt time.Time     // when the server counted them (its count cache)
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.showTopics(w, r, v, nil)
}

func (c *Console) showTopics(w http.ResponseWriter, r *http.Request, v *viewer, actionErr *pageError) {
	p := c.newPage(w, r, v, "Topics", "topics")
	p.Self = "/ui/topics"
	d := &topicsData{}
	p.Data = d
	tl, err := v.client.TopicList(r.Context())
	if err != nil {
		p.Err = asPageError(err)
	} else {
		d.Topics, d.CountedAt = tl.Topics, tl.CountedAt
		d.Rows = topicsRows(p, tl.Topics, time.Now())
	}
	if actionErr != nil {
		p.Err = actionErr
	}
	c.render(w, r, "topics", p, http.StatusOK)
}

// topicsRows writes the topics page's rows, with the actions the viewer
// may take; built in Go like overviewRows, for the same reason (the page
// refreshes every 2 s). Every value is escaped for its place.
func topicsRows(p *page, topics []apiv1.Topic, now time.Time) template.HTML {
	var b strings.Builder
	b.Grow(len(topics) * 900)
	csrf := `<input type="hidden" name="csrf" value="` + template.HTMLEscapeString(p.CSRF()) + `">`
	for _, t := range topics {
		name := template.HTMLEscapeString(t.Topic)
		action := `/ui/topics/` + template.HTMLEscapeString(url.PathEscape(t.Topic))
		b.WriteString(`<tr><td><a href="/ui/tasks?topic=` + template.HTMLEscapeString(url.QueryEscape(t.Topic)) + `">` + name + `</a>`)
		if t.Paused {
			b.WriteString(` <span class="badge warn">paused</span>`)
		}
		b.WriteString("</td>\n")
		for _, st := range overviewStatuses {
			b.WriteString(`<td class="num">` + strconv.FormatInt(t.Counts[st], 10) + `</td>`)
		}
		b.WriteString("\n<td>")
		if t.OldestDueAt != nil {
			b.WriteString(template.HTMLEscapeString(ago(*t.OldestDueAt, now)))
		} else {
			b.WriteString("—")
		}
		b.WriteString("</td>\n<td><div class=\"row-actions\">\n")
		if t.Paused {
			if p.Can(http.MethodPost, "/v1/topics/"+t.Topic+":resume") {
				b.WriteString(`<form method="post" action="` + action + `/resume">` + csrf + `<button type="submit">Resume</button></form>`)
			}
		} else if p.Can(http.MethodPost, "/v1/topics/"+t.Topic+":pause") {
			b.WriteString(`<form method="post" action="` + action + `/pause" data-confirm="Pause ` + name + `? It delivers nothing until resumed.">` + csrf + `<button type="submit">Pause</button></form>`)
		}
		b.WriteString("\n")
		if dead := t.Counts["dead"]; dead != 0 && p.Can(http.MethodPost, "/v1/topics/"+t.Topic+":requeue") {
			b.WriteString(`<form method="post" action="` + action + `/requeue" data-confirm="Requeue the ` + strconv.FormatInt(dead, 10) + ` dead tasks of ` + name + `?">` + csrf + `<button type="submit">Requeue dead</button></form>`)
		}
		b.WriteString("\n</div></td></tr>\n")
	}
	return template.HTML(b.String()) //nolint:gosec // every value above is escaped
}

func (c *Console) topicAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	topic, op := r.PathValue("topic"), r.PathValue("op")
	ctx := r.Context()
	var err error
	var msg string
	switch op {
	case "pause":
		_, err = v.client.PauseTopic(ctx, topic)
		msg = "Topic " + topic + " paused: it delivers nothing until resumed."
	case "resume":
		_, err = v.client.ResumeTopic(ctx, topic)
		msg = "Topic " + topic + " resumed."
	case "requeue":
		msg, err = c.runOperation(ctx, v, apiv1.OperationRequest{Action: "requeue", Filter: apiv1.OperationFilter{Topic: topic, Status: []string{"dead"}}},
			"dead tasks of "+topic, "requeued")
	default:
		c.renderError(w, r, v, http.StatusNotFound, "op", fmt.Sprintf("%q is not an action on a topic (pause, resume, requeue)", op))
		return
	}
	if err != nil {
		c.showTopics(w, r, v, asPageError(err))
		return
	}
	done(w, r, safeBack(r.PostFormValue("back"), "/ui/topics"), msg)
}

// ---- Cluster ----

type clusterData struct {
	Cluster *apiv1.ClusterView
	Lagging []apiv1.ClusterItemView
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Cluster", "cluster")
	d := &clusterData{}
	p.Data = d
	cv, err := v.client.Cluster(r.Context())
	if err != nil {
		p.Err = asPageError(err)
	} else {
		d.Cluster = cv
		for _, it := range cv.Items {
			if it.LagSecs > 0 {
				d.Lagging = append(d.Lagging, it)
			}
		}
		sort.Slice(d.Lagging, func(i, j int) bool { return d.Lagging[i].LagSecs > d.Lagging[j].LagSecs })
	}
	c.render(w, r, "cluster", p, http.StatusOK)
}

// ---- Scan jobs ----

type jobsData struct {
	Jobs []apiv1.JobView
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Scan jobs", "jobs")
	d := &jobsData{}
	p.Data = d
	js, err := v.client.Jobs(r.Context())
	if err != nil {
		p.Err = asPageError(err)
	}
	d.Jobs = js
	c.render(w, r, "jobs", p, http.StatusOK)
}

type jobData struct {
	Job   *apiv1.JobView
	Items []jobItem
	Runs  []apiv1.JobRun
}

// jobItem is one item with its latest run and that run's progress.
type jobItem struct {
	apiv1.JobItemView
	Last *apiv1.JobRun
	Done int64 // rows processed + failed
	All  int64 // done + left
}

// Pct is the item's last run's progress: rows done of done + left; 100
// once the run is done.
func (ji jobItem) Pct() int64 {
	switch {
	case ji.Last == nil:
		return 0
	case ji.Last.Status == "done":
		return 100
	case ji.All == 0:
		return 0
	}
	return ji.Done * 100 / ji.All
}

func (c *Console) jobDetail(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.showJob(w, r, v, nil)
}

// jobRuns is how many of a job's newest runs the page reads.
const jobRuns = 100

func (c *Console) showJob(w http.ResponseWriter, r *http.Request, v *viewer, actionErr *pageError) {
	name := r.PathValue("name")
	p := c.newPage(w, r, v, "Scan job "+name, "jobs")
	p.Self = "/ui/jobs/" + url.PathEscape(name)
	d := &jobData{}
	p.Data = d
	ctx := r.Context()
	j, err := v.client.Job(ctx, name)
	if err != nil {
		p.Err = asPageError(err)
		c.render(w, r, "job", p, http.StatusOK)
		return
	}
	d.Job = j
	runs, err := v.client.JobRuns(ctx, name, "", jobRuns)
	if err != nil {
		p.Err = asPageError(err)
	}
	d.Runs = runs
	latest := map[string]*apiv1.JobRun{}
	for i := range runs { // newest first
		if latest[runs[i].Item] == nil {
			latest[runs[i].Item] = &runs[i]
		}
	}
	for _, it := range j.ItemStates {
		ji := jobItem{JobItemView: it, Last: latest[it.Item]}
		if ji.Last != nil {
			ji.Done = ji.Last.Processed + ji.Last.Failed
			ji.All = ji.Done + ji.Last.Left
		}
		d.Items = append(d.Items, ji)
	}
	if actionErr != nil {
		p.Err = actionErr
	}
	c.render(w, r, "job", p, http.StatusOK)
}

func (c *Console) jobAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	name, op := r.PathValue("name"), r.PathValue("op")
	switch op {
	case "pause", "resume", "trigger":
	default:
		c.renderError(w, r, v, http.StatusNotFound, "op", fmt.Sprintf("%q is not an action on a job (pause, resume, trigger)", op))
		return
	}
	if _, err := v.client.JobOp(r.Context(), name, op); err != nil {
		c.showJob(w, r, v, asPageError(err))
		return
	}
	done(w, r, safeBack(r.PostFormValue("back"), "/ui/jobs/"+url.PathEscape(name)), "Job "+name+": "+op+" done.")
}

// ---- Schedules ----

type schedulesData struct {
	Schedules []apiv1.Schedule
	// Last holds each schedule's last fires (by name) and their tasks.
	Last map[string][]lastFire
}

// lastFire is one past fire time of a schedule and the task it made (its
// key NAME@<fire time>); no task when the misfire policy skipped it or
// retention deleted it.
type lastFire struct {
	At     time.Time
	TaskID string
	Status string
}

// lastFiresShown bounds the schedules whose last fires the list looks up
// (3 task reads each), so a long list stays quick.
const lastFiresShown = 50

// lastFires returns up to n of the fire times of s at or before its
// ScheduledUntil and since its creation, newest first: Between over
// windows growing from a minute to a year, until one holds n.
func lastFires(s apiv1.Schedule, n int) []time.Time {
	spec, err := cronspec.Parse(s.Cron, s.TimeZone)
	if err != nil || s.ScheduledUntil.IsZero() {
		return nil
	}
	var fires []time.Time
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 8 * 24 * time.Hour, 32 * 24 * time.Hour, 366 * 24 * time.Hour} {
		fires = spec.Between(s.ScheduledUntil.Add(-w), s.ScheduledUntil, 10000)
		if len(fires) >= n {
			break
		}
	}
	// Fire times before the schedule existed made nothing.
	fires = slices.DeleteFunc(fires, func(at time.Time) bool { return at.Before(s.CreatedAt.Truncate(time.Second)) })
	slices.Reverse(fires)
	return fires[:min(n, len(fires))]
}

func (c *Console) schedules(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.showSchedules(w, r, v, nil)
}

func (c *Console) showSchedules(w http.ResponseWriter, r *http.Request, v *viewer, actionErr *pageError) {
	p := c.newPage(w, r, v, "Schedules", "schedules")
	p.Self = "/ui/schedules"
	d := &schedulesData{}
	p.Data = d
	ss, err := v.client.ListSchedules(r.Context())
	if err != nil {
		p.Err = asPageError(err)
	}
	d.Schedules = ss
	d.Last = map[string][]lastFire{}
	for i, sc := range ss {
		if i == lastFiresShown {
			break
		}
		for _, at := range lastFires(sc, 3) {
			lf := lastFire{At: at}
			key := sc.Name + "@" + at.UTC().Format(time.RFC3339Nano)
			if t, err := v.client.GetByKey(r.Context(), sc.Task.Topic, key); err == nil {
				lf.TaskID, lf.Status = t.ID, t.Status
			}
			d.Last[sc.Name] = append(d.Last[sc.Name], lf)
		}
	}
	if actionErr != nil {
		p.Err = actionErr
	}
	c.render(w, r, "schedules", p, http.StatusOK)
}

func (c *Console) scheduleAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	name, op := r.PathValue("name"), r.PathValue("op")
	ctx := r.Context()
	var err error
	msg := "Schedule " + name + ": " + op + " done."
	switch op {
	case "pause":
		_, err = v.client.PauseSchedule(ctx, name)
	case "resume":
		_, err = v.client.ResumeSchedule(ctx, name)
	case "delete":
		_, err = v.client.DeleteSchedule(ctx, name)
		msg = "Schedule " + name + " deleted."
	case "trigger":
		var t *apiv1.Task
		t, err = v.client.TriggerSchedule(ctx, name)
		if err == nil {
			msg = "Schedule " + name + " triggered: task " + t.ID + "."
		}
	default:
		c.renderError(w, r, v, http.StatusNotFound, "op", fmt.Sprintf("%q is not an action on a schedule (pause, resume, trigger, delete)", op))
		return
	}
	if err != nil {
		c.showSchedules(w, r, v, asPageError(err))
		return
	}
	done(w, r, "/ui/schedules", msg)
}

// scheduleForm is the create/edit form's state.
type scheduleForm struct {
	Editing     bool // the name is fixed: an edit of an existing schedule
	Name        string
	Cron        string
	TimeZone    string
	Topic       string
	Payload     string
	Target      string
	MaxAttempts string
	Misfire     string
	Paused      bool
	Preview     *cronPreview
}

// cronPreview is what the form shows under the expression before saving.
type cronPreview struct {
	Words string
	Next  []time.Time
	Zone  string
	Err   string // the cron or time zone refused, field named
}

func (c *Console) scheduleForm(w http.ResponseWriter, r *http.Request, v *viewer) {
	name := r.PathValue("name")
	p := c.newPage(w, r, v, "New schedule", "schedules")
	f := &scheduleForm{Cron: "0 9 * * *", TimeZone: "UTC", Misfire: "skip", Payload: "{}"}
	if name != "" {
		p.Title = "Edit schedule " + name
		s, err := v.client.GetSchedule(r.Context(), name)
		if err != nil {
			p.Err = asPageError(err)
		} else {
			f = &scheduleForm{Editing: true, Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, Topic: s.Task.Topic,
				Payload: funcs["pretty"].(func(json.RawMessage) string)(s.Task.Payload), Target: s.Task.Target, Misfire: s.Misfire, Paused: s.Paused}
			if s.Task.MaxAttempts > 0 {
				f.MaxAttempts = strconv.Itoa(s.Task.MaxAttempts)
			}
		}
	}
	f.Preview = preview(f.Cron, f.TimeZone, p.Now)
	p.Data = f
	c.render(w, r, "schedule_form", p, http.StatusOK)
}

// preview explains expr and lists its next five fire times after now.
func preview(expr, tz string, now time.Time) *cronPreview {
	pv := &cronPreview{}
	spec, err := cronspec.Parse(strings.TrimSpace(expr), tz)
	if err != nil {
		pv.Err = err.Error()
		return pv
	}
	pv.Words = describeCron(strings.TrimSpace(expr))
	pv.Zone = spec.Location().String()
	t := now
	for range 5 {
		t = spec.Next(t)
		if t.IsZero() {
			break
		}
		pv.Next = append(pv.Next, t.In(spec.Location()))
	}
	return pv
}

func (c *Console) schedulePreview(w http.ResponseWriter, r *http.Request, v *viewer) {
	pv := preview(r.PostFormValue("cron"), r.PostFormValue("time_zone"), time.Now())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	status := http.StatusOK
	if pv.Err != "" {
		// htmx swaps only 2xx answers by default; the form shows the
		// refusal as it types, and a plain POST gets the status.
		if r.Header.Get("HX-Request") != "true" {
			status = http.StatusBadRequest
		}
	}
	w.WriteHeader(status)
	if err := c.pages["schedule_form"].ExecuteTemplate(w, "preview", pv); err != nil {
		c.log.Error("console: render preview", "err", err)
	}
}

func (c *Console) scheduleSave(w http.ResponseWriter, r *http.Request, v *viewer) {
	p := c.newPage(w, r, v, "Schedule", "schedules")
	f := &scheduleForm{Editing: r.PostFormValue("editing") == "1", Name: strings.TrimSpace(r.PostFormValue("name")),
		Cron: strings.TrimSpace(r.PostFormValue("cron")), TimeZone: strings.TrimSpace(r.PostFormValue("time_zone")),
		Topic: strings.TrimSpace(r.PostFormValue("topic")), Payload: strings.TrimSpace(r.PostFormValue("payload")),
		Target: strings.TrimSpace(r.PostFormValue("target")), MaxAttempts: strings.TrimSpace(r.PostFormValue("max_attempts")),
		Misfire: r.PostFormValue("misfire"), Paused: r.PostFormValue("paused") != ""}
	f.Preview = preview(f.Cron, f.TimeZone, p.Now)
	p.Data = f
	fail := func(pe *pageError) {
		p.Err = pe
		c.render(w, r, "schedule_form", p, pe.Status)
	}
	if f.Name == "" {
		fail(&pageError{Status: http.StatusBadRequest, Field: "name", Message: "required"})
		return
	}
	req := apiv1.ScheduleRequest{Name: f.Name, Cron: f.Cron, TimeZone: f.TimeZone, Misfire: f.Misfire, Paused: f.Paused,
		Task: apiv1.ScheduleTask{Topic: f.Topic, Target: f.Target}}
	if f.Payload != "" {
		if !json.Valid([]byte(f.Payload)) {
			fail(&pageError{Status: http.StatusBadRequest, Field: "task.payload", Message: "not valid JSON"})
			return
		}
		req.Task.Payload = json.RawMessage(f.Payload)
	}
	if f.MaxAttempts != "" {
		n, err := strconv.Atoi(f.MaxAttempts)
		if err != nil || n < 0 {
			fail(&pageError{Status: http.StatusBadRequest, Field: "task.max_attempts", Message: fmt.Sprintf("%q is not a whole number ≥ 0", f.MaxAttempts)})
			return
		}
		req.Task.MaxAttempts = n
	}
	var err error
	if f.Editing {
		_, _, err = v.client.PutSchedule(r.Context(), f.Name, req)
	} else {
		_, err = v.client.CreateSchedule(r.Context(), req)
	}
	if err != nil {
		fail(asPageError(err))
		return
	}
	done(w, r, "/ui/schedules", "Schedule "+f.Name+" saved.")
}
