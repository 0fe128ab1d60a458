package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The console in a real browser: Debian's chromium, driven by chromedp.
// Two `ontime serve` processes with tokens form a cluster on MariaDB;
// tasks are submitted through the API; the test clicks through the
// console of one of them as an operator would and checks each outcome
// through the API. Each page it visits is saved as a PNG under
// $ONTIME_SCREENSHOTS (default e2e/screenshots, ignored by git), to be
// looked at.
//
// chromium missing is a failure, not a skip: scripts/services.sh (run by
// `make test`) installs it.

const (
	uiAdminToken = "ui-admin-token-0123456789"
	uiReadToken  = "ui-read-token-0123456789a"
)

// uiCluster starts two `ontime serve` processes (n1, n2) sharing one
// MariaDB database, with an admin and a read token and the given extra
// YAML (jobs), and returns n1's base URL, an admin API client of it and
// the processes.
func uiCluster(t *testing.T, extra string) (string, *client.Client, map[string]*serveProc) {
	t.Helper()
	dir := t.TempDir()
	dsn := testdb.MySQL(t)
	var toks strings.Builder
	for _, tk := range []struct{ name, secret string }{{"admin", uiAdminToken}, {"read", uiReadToken}} {
		f := filepath.Join(dir, tk.name+".token")
		if err := os.WriteFile(f, []byte(tk.secret), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&toks, "    - {name: %s, token_file: %q, role: %s}\n", tk.name, f, tk.name)
	}
	cfgPath := filepath.Join(dir, "ontime.yaml")
	cfg := fmt.Sprintf(`data_dir: %s
store:
  driver: mysql
  databases: [%q]
  tables: 2
  segments: 2
cluster:
  coordinator: database
  lease_ttl: 2s
delivery:
  retry_base: 50ms
  retry_max: 100ms
auth:
  tokens:
%s%s`, filepath.Join(dir, "data"), dsn, toks.String(), extra)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, procs := startServeCluster(t, cfgPath, []string{"n1", "n2"})
	base := "http://" + addrs["n1"]
	c, err := client.New(base, client.WithToken(uiAdminToken))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "both nodes live in n1's view", func() bool {
		v, err := c.Cluster(t.Context())
		if err != nil {
			return false
		}
		live := 0
		for _, n := range v.Nodes {
			if n.Live {
				live++
			}
		}
		return live == 2
	})
	return base, c, procs
}

// uiBrowser starts headless chromium; every JavaScript dialog (the
// console's confirmations) is accepted.
func uiBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (apt-get install -y chromium; scripts/services.sh does it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	// One deadline for the whole walk: a page that never shows what a
	// step waits for fails the test instead of hanging it.
	ctx, cancel3 := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv("ONTIME_SCREENSHOTS")
	if dir == "" {
		dir = "screenshots"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shot saves the viewport as dir/name.png.
func shot(t *testing.T, dir, name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var png []byte
		if err := chromedp.CaptureScreenshot(&png).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// run runs the actions of one step, failing the test with its name.
func run(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// waitJS evaluates a JavaScript expression until it is true. It retries
// through errors: while a page loads, the old one's context is gone
// ("Cannot find context"), which chromedp.Poll does not survive.
func waitJS(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var last error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var ok bool
			if last = chromedp.Evaluate(expr, &ok).Do(ctx); last == nil && ok {
				return nil
			}
		}
		return fmt.Errorf("waited 20s for %s (last error: %v)", expr, last)
	})
}

// follow clicks a link or button that loads another page and waits until
// the browser shows a page whose path and query start with want.
func follow(sel, want string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Click(sel),
		waitJS(fmt.Sprintf(`document.readyState === "complete" && (location.pathname + location.search).startsWith(%q)`, want)),
	}
}

// flash waits for the page's flash message to hold want.
func flash(want string) chromedp.Action {
	return waitJS(fmt.Sprintf(`(() => { const f = document.querySelector(".flash"); return document.readyState === "complete" && !!f && f.textContent.includes(%q); })()`, want))
}

func uiDead(t *testing.T, c *client.Client, topic, key string, host int) *apiv1.Task {
	t.Helper()
	task, _, err := c.Submit(t.Context(), apiv1.TaskRequest{Topic: topic, Key: key, MaxAttempts: 1, Target: fmt.Sprintf("http://127.0.3.%d:1/hook", host)})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, err := c.Get(t.Context(), task.ID); err == nil && got.Status == "dead" {
			return got
		}
	}
	t.Fatalf("task %s never died", task.ID)
	return nil
}

func TestConsoleInBrowser(t *testing.T) {
	// A scan job over two SQLite tables of 300 bills, run when triggered.
	const billTables, billRows = 2, 300
	bills := newBillDB(t, "sqlite", billTables, billRows)
	rcv := newJobReceiver(t)
	base, c, _ := uiCluster(t, fmt.Sprintf(`jobs:
  - name: bill-settle
    cron: "0 0 * * * *"
    misfire: fire_once
    overlap: skip
    source: {driver: sqlite, databases: [%q], table: "bill_{table}", tables: %d, segments: 1, key: id, columns: [id, x, y, z], where: {status: 1}, page: 100}
    process: {target: %q, batch: 25, concurrency: 4}
    on_success: {set: {status: 2}}
`, bills.dsn, billTables, rcv.srv.URL))
	ctx := uiBrowser(t)
	dir := screenshotDir(t)
	tc := t.Context()

	// Work to look at: pending orders, dead bills, a schedule.
	var order *apiv1.Task
	for i := 1; i <= 6; i++ {
		tk, _, err := c.Submit(tc, apiv1.TaskRequest{Topic: "orders.cancel", Key: fmt.Sprintf("order-%d", i), Delay: fmt.Sprintf("%dm", 10*i),
			Target: "http://127.0.0.1:1/orders", Payload: json.RawMessage(fmt.Sprintf(`{"order":%d,"reason":"unpaid"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			order = tk
		}
	}
	lone := uiDead(t, c, "mail", "m-1", 1)
	for i := 1; i <= 3; i++ {
		uiDead(t, c, "billing", fmt.Sprintf("bill-%d", i), 10+i)
	}
	if _, err := c.CreateSchedule(tc, apiv1.ScheduleRequest{Name: "nightly-report", Cron: "0 3 * * *", Task: apiv1.ScheduleTask{Topic: "reports", Target: "http://127.0.0.1:1/report"}}); err != nil {
		t.Fatal(err)
	}

	// Sign in as admin: the first page asks for a token.
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		shot(t, dir, "01-login"),
		chromedp.SendKeys(`#token`, uiAdminToken, chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`#chart-rate canvas`, chromedp.ByQuery),
		chromedp.WaitVisible(`//td/a[text()="orders.cancel"]`),
		shot(t, dir, "02-overview"),
	)

	// What falls due, per topic.
	run(t, ctx, "coming up",
		follow(`//nav//a[text()="Coming up"]`, "/ui/upcoming"),
		chromedp.WaitVisible(`.hist .seg`, chromedp.ByQuery),
		shot(t, dir, "02b-coming-up"),
	)

	// Find a task by its key, reschedule it, cancel it.
	run(t, ctx, "find by key",
		follow(`//nav//a[text()="Tasks"]`, "/ui/tasks"),
		chromedp.WaitVisible(`input[name="key"]`, chromedp.ByQuery),
		chromedp.SendKeys(`input[name="topic"]`, "orders.cancel", chromedp.ByQuery),
		chromedp.SendKeys(`input[name="key"]`, "order-3", chromedp.ByQuery),
		follow(`//button[text()="Search"]`, "/ui/tasks?"),
		chromedp.WaitVisible(`//a[text()="`+order.ID+`"]`),
		shot(t, dir, "03-tasks-search"),
		follow(`//a[text()="`+order.ID+`"]`, "/ui/tasks/"+order.ID),
		chromedp.WaitVisible(`textarea[name="payload"]`, chromedp.ByQuery),
		shot(t, dir, "04-task-detail"),
		chromedp.SendKeys(`input[name="delay"]`, "5h", chromedp.ByQuery),
		chromedp.Click(`//button[text()="Reschedule"]`),
		flash("Task rescheduled"),
	)
	if got, err := c.Get(tc, order.ID); err != nil || got.DueAt.Sub(order.DueAt) < time.Hour || got.MovedBy != apiv1.MovedByUpdate {
		t.Fatalf("after reschedule: %+v %v", got, err)
	}
	run(t, ctx, "cancel",
		chromedp.Click(`//button[text()="Cancel task"]`),
		flash("Task cancelled"),
		shot(t, dir, "05-task-cancelled"),
	)
	if got, _ := c.Get(tc, order.ID); got.Status != "cancelled" {
		t.Fatalf("after cancel: %s", got.Status)
	}

	// Requeue one dead task from its page.
	run(t, ctx, "requeue one",
		chromedp.Navigate(base+"/ui/tasks/"+lone.ID),
		chromedp.WaitVisible(`//button[text()="Requeue"]`),
		chromedp.Click(`//button[text()="Requeue"]`),
		flash("Task requeued"),
	)
	if got, _ := c.Get(tc, lone.ID); got.MovedBy != apiv1.MovedByRequeue {
		t.Fatalf("after requeue: %+v", got)
	}

	// Bulk-requeue a topic's dead tasks from the dead letters.
	run(t, ctx, "bulk requeue",
		follow(`//nav//a[text()="Dead letters"]`, "/ui/dead"),
		chromedp.WaitVisible(`//a[contains(@class,"chip") and contains(., "billing")]`),
		follow(`//a[contains(@class,"chip") and contains(., "billing")]`, "/ui/dead?topic=billing"),
		chromedp.WaitVisible(`//button[text()="Requeue all matching"]`),
		shot(t, dir, "06-dead-letters"),
		chromedp.Click(`//button[text()="Requeue all matching"]`),
		flash("3 dead tasks of billing requeued"),
	)
	if pg, err := c.List(tc, client.ListOptions{Topic: "billing", Limit: 10}); err != nil {
		t.Fatal(err)
	} else {
		for _, tk := range pg.Tasks {
			if tk.MovedBy != apiv1.MovedByRequeue {
				t.Errorf("billing task %s not requeued: %+v", tk.ID, tk)
			}
		}
	}

	// Dead tasks are final: "cancel" in the dead letters is a purge. One
	// selected, then all of the topic.
	junk := []*apiv1.Task{uiDead(t, c, "junk", "j-1", 21), uiDead(t, c, "junk", "j-2", 22), uiDead(t, c, "junk", "j-3", 23)}
	run(t, ctx, "purge",
		chromedp.Navigate(base+"/ui/dead?topic=junk"),
		chromedp.WaitVisible(`//button[text()="Purge all matching"]`),
		chromedp.Click(`input[name="id"][value="`+junk[0].ID+`"]`, chromedp.ByQuery),
		shot(t, dir, "06b-dead-purge-selected"),
		chromedp.Click(`//button[text()="Purge selected"]`),
		flash("1 dead tasks purged"),
		chromedp.WaitVisible(`//button[text()="Purge all matching"]`),
		chromedp.Click(`//button[text()="Purge all matching"]`),
		flash("2 dead tasks of junk purged"),
		shot(t, dir, "06c-dead-purged"),
	)
	for _, tk := range junk {
		if _, err := c.Get(tc, tk.ID); !client.HasCode(err, apiv1.CodeNotFound) {
			t.Errorf("purged task %s: %v", tk.ID, err)
		}
	}

	// Pause and resume a topic.
	pauseBtn := `//tr[td/a[text()="orders.cancel"]]//button[text()="Pause"]`
	resumeBtn := `//tr[td/a[text()="orders.cancel"]]//button[text()="Resume"]`
	run(t, ctx, "pause",
		follow(`//nav//a[text()="Topics"]`, "/ui/topics"),
		chromedp.WaitVisible(pauseBtn),
		chromedp.Click(pauseBtn),
		flash("paused"),
		chromedp.WaitVisible(resumeBtn),
		shot(t, dir, "07-topics-paused"),
	)
	if ts, _ := c.Topics(tc); !topicPaused(ts, "orders.cancel") {
		t.Fatal("orders.cancel is not paused")
	}
	run(t, ctx, "resume",
		chromedp.Click(resumeBtn),
		flash("resumed"),
		chromedp.WaitVisible(pauseBtn),
	)
	if ts, _ := c.Topics(tc); topicPaused(ts, "orders.cancel") {
		t.Fatal("orders.cancel is still paused")
	}

	// Trigger a schedule; the new-schedule form explains a cron as it is typed.
	run(t, ctx, "trigger",
		follow(`//nav//a[text()="Schedules"]`, "/ui/schedules"),
		chromedp.WaitVisible(`//tr[td[contains(., "nightly-report")]]//button[text()="Trigger"]`),
		shot(t, dir, "08-schedules"),
		chromedp.Click(`//tr[td[contains(., "nightly-report")]]//button[text()="Trigger"]`),
		flash("triggered"),
	)
	if pg, err := c.List(tc, client.ListOptions{Topic: "reports"}); err != nil || len(pg.Tasks) != 1 || !strings.HasPrefix(pg.Tasks[0].Key, "nightly-report") {
		t.Fatalf("trigger made no task: %+v %v", pg, err)
	}
	run(t, ctx, "schedule form",
		chromedp.Navigate(base+"/ui/schedules/new"),
		chromedp.WaitVisible(`#cron`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("#cron").value = ""`, nil),
		chromedp.SendKeys(`#cron`, "*/15 8-18 * * 1-5", chromedp.ByQuery),
		waitJS(`document.querySelector("#preview").textContent.includes("every 15 minutes")`),
		shot(t, dir, "09-schedule-form"),
		chromedp.Evaluate(`document.querySelector("#cron").value = ""`, nil),
		chromedp.SendKeys(`#cron`, "61 * * * *", chromedp.ByQuery),
		waitJS(`document.querySelector("#preview .bad") !== null`),
	)

	// Trigger the scan job and watch its items' progress bars fill.
	run(t, ctx, "scan job",
		follow(`//nav//a[text()="Scan jobs"]`, "/ui/jobs"),
		chromedp.WaitVisible(`//a[text()="bill-settle"]`),
		shot(t, dir, "10-jobs"),
		follow(`//a[text()="bill-settle"]`, "/ui/jobs/bill-settle"),
		chromedp.WaitVisible(`//div[@class="toolbar"]//button[text()="Trigger"]`),
		chromedp.Click(`//div[@class="toolbar"]//button[text()="Trigger"]`),
		flash("trigger done"),
		// The live region refreshes by itself (htmx, every 2 s) until
		// both items' last runs are done and their bars full.
		waitJS(`(() => { const p = [...document.querySelectorAll("#live progress")];
			const done = [...document.querySelectorAll("#live tbody tr td:nth-child(3) .badge")].filter(b => b.textContent === "done");
			return p.length === 2 && p.every(x => x.value === 100) && done.length === 2; })()`),
		shot(t, dir, "10b-job-progress"),
	)
	if n := bills.count(t, billTables, 2); n != billTables*billRows {
		t.Fatalf("the job settled %d bills of %d", n, billTables*billRows)
	}

	// The cluster: both processes, each with its version (from its
	// registration, schema 19).
	run(t, ctx, "cluster",
		follow(`//nav//a[text()="Cluster"]`, "/ui/cluster"),
		chromedp.WaitVisible(`//h2[text()="Items map"]`),
		waitJS(`(() => { const v = [...document.querySelectorAll("td.node-version")]; return v.length === 2 && v.every(x => x.textContent.trim() !== "" && x.textContent.trim() !== "—"); })()`),
		shot(t, dir, "11-cluster"),
	)

	// A phone, in dark mode.
	run(t, ctx, "phone, dark",
		emulation.SetDeviceMetricsOverride(390, 844, 3, true),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(`#chart-rate canvas`, chromedp.ByQuery),
		shot(t, dir, "12-overview-phone-dark"),
		chromedp.Navigate(base+"/ui/dead"),
		chromedp.WaitVisible(`#dead-form`, chromedp.ByQuery),
		shot(t, dir, "13-dead-phone-dark"),
		emulation.ClearDeviceMetricsOverride(),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}),
	)

	// Sign out, sign in with the read token: no action buttons, and an
	// action posted anyway (a form built in the page, with its CSRF
	// token) is refused with the API's 403 in the page.
	var buttons int
	run(t, ctx, "read token",
		follow(`//button[text()="Sign out"]`, "/ui/login"),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, uiReadToken, chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`#chart-rate canvas`, chromedp.ByQuery),
		chromedp.Navigate(base+"/ui/topics"),
		chromedp.WaitVisible(`//td/a[text()="orders.cancel"]`),
		chromedp.Evaluate(`document.querySelectorAll("main button").length`, &buttons),
	)
	if buttons != 0 {
		t.Errorf("a read token sees %d buttons on the topics page", buttons)
	}
	run(t, ctx, "read token refused",
		chromedp.Evaluate(`(() => {
			const f = document.createElement("form");
			f.method = "post"; f.action = "/ui/topics/orders.cancel/pause";
			const i = document.createElement("input");
			i.name = "csrf"; i.value = document.body.dataset.csrf; f.appendChild(i);
			document.body.appendChild(f); f.submit(); return true;
		})()`, nil),
		waitJS(`(() => { const e = document.querySelector(".error"); return !!e && e.textContent.includes("403 forbidden"); })()`),
		shot(t, dir, "14-read-token-refused"),
	)
	if ts, _ := c.Topics(tc); topicPaused(ts, "orders.cancel") {
		t.Fatal("a read token paused a topic")
	}
	// Not a blank: the refusal names the role.
	var msg string
	run(t, ctx, "refusal text", chromedp.Text(`.error`, &msg, chromedp.ByQuery))
	if !strings.Contains(msg, "has role read") {
		t.Errorf("refusal: %q", msg)
	}
}

func topicPaused(ts []apiv1.Topic, name string) bool {
	for _, tp := range ts {
		if tp.Topic == name {
			return tp.Paused
		}
	}
	return false
}
