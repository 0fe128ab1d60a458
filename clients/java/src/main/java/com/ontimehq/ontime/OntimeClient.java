package com.ontimehq.ontime;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.StringJoiner;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The Java client of ontime's HTTP API v1: one node's address, thread safe,
 * to share across the program.
 *
 * <pre>{@code
 * OntimeClient ontime = OntimeClient.builder("http://127.0.0.1:7070").token(System.getenv("ONTIME_TOKEN")).build();
 * SubmitResult r = ontime.submit(TaskRequest.of("orders.close").key("order-42")
 *         .delay(Duration.ofMinutes(30)).target("https://shop.example/hooks/close").payload(Map.of("order", 42)));
 * }</pre>
 *
 * <p>Errors are {@link OntimeException}s: an error answer is an
 * {@link OntimeException.Api} subclass per code ({@code NotFound},
 * {@code Conflict}, {@code Invalid}…), a call with no answer a
 * {@link OntimeException.Network}.
 *
 * <p>Retries: a 503 (the node starting, stopping or without its store) is
 * retried after its {@code Retry-After}; a call that got no answer
 * (connection refused or reset, a timeout) is retried when sending it again
 * cannot do anything twice: reads, puts, deletes, and submits whose tasks
 * have keys (the node answers the second with the task the first wrote).
 * {@link Builder#autoKey} gives unkeyed submits a random key so that they
 * are retried too.
 *
 * <p>Concurrent {@link #submit} calls share {@code POST /v1/tasks:batch}
 * calls, as the Go client does: a lone submit is sent at once, alone;
 * submits arriving while one is in flight are sent together when it
 * returns, each answered as its own submit would have been.
 */
public final class OntimeClient {
    /** The most tasks one batch call carries; {@link #submitBatch} splits larger lists. */
    public static final int MAX_BATCH = 1000;

    private final Transport transport;
    private final String authorization;
    private final Duration timeout;
    private final int retries;
    private final Duration backoff;
    private final Duration maxRetryAfter;
    private final boolean autoKey;
    private final Coalescer coalescer;

    private OntimeClient(Builder b) {
        URI u = URI.create(b.base);
        if (b.http == null && u.getScheme().equals("http") && (u.getRawPath() == null || u.getRawPath().isEmpty())) {
            this.transport = new Http1Transport(u.getHost(), u.getPort() == -1 ? 80 : u.getPort());
        } else {
            this.transport = new JdkTransport(b.base, b.http != null ? b.http
                    : HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build());
        }
        this.authorization = b.token == null || b.token.isEmpty() ? null : "Bearer " + b.token;
        this.timeout = b.timeout;
        this.retries = b.retries;
        this.backoff = b.backoff;
        this.maxRetryAfter = b.maxRetryAfter;
        this.autoKey = b.autoKey;
        this.coalescer = b.coalesce ? new Coalescer(this, b.coalesceCalls) : null;
    }

    /** A builder for the node at baseUrl ("http://127.0.0.1:7070"). */
    public static Builder builder(String baseUrl) {
        return new Builder(baseUrl);
    }

    /** Configures an {@link OntimeClient}. */
    public static final class Builder {
        private final String base;
        private String token;
        private Duration timeout = Duration.ofSeconds(30);
        private int retries = 3;
        private Duration backoff = Duration.ofMillis(100);
        private Duration maxRetryAfter = Duration.ofSeconds(30);
        private boolean autoKey;
        private boolean coalesce = true;
        private int coalesceCalls = 1;
        private HttpClient http;

        private Builder(String baseUrl) {
            URI u;
            try {
                u = URI.create(baseUrl);
            } catch (IllegalArgumentException | NullPointerException e) {
                u = null;
            }
            if (u == null || !("http".equals(u.getScheme()) || "https".equals(u.getScheme())) || u.getHost() == null) {
                throw new IllegalArgumentException("baseUrl: " + baseUrl + " is not an http(s) URL such as http://127.0.0.1:7070");
            }
            this.base = baseUrl.replaceAll("/+$", "");
        }

        /** The API token, sent as Authorization: Bearer; null or "" for none. */
        public Builder token(String token) {
            this.token = token;
            return this;
        }

        /** Bounds each HTTP call (default 30 s). */
        public Builder timeout(Duration d) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("timeout: " + d + " is not positive");
            }
            this.timeout = d;
            return this;
        }

        /** Retries of a call after a network error or a 503: 0 to 20 (default 3). */
        public Builder retries(int n) {
            if (n < 0 || n > 20) {
                throw new IllegalArgumentException("retries: " + n + " is not between 0 and 20");
            }
            this.retries = n;
            return this;
        }

        /** The first wait before retrying after a network error, doubled each time (default 100 ms). */
        public Builder backoff(Duration d) {
            if (d == null || d.isNegative()) {
                throw new IllegalArgumentException("backoff: " + d + " is negative");
            }
            this.backoff = d;
            return this;
        }

        /** The longest Retry-After the client waits for; longer ones are cut to it (default 30 s). */
        public Builder maxRetryAfter(Duration d) {
            if (d == null || d.isNegative()) {
                throw new IllegalArgumentException("maxRetryAfter: " + d + " is negative");
            }
            this.maxRetryAfter = d;
            return this;
        }

        /** Gives each submit without a key a random one, so that it can be retried after a network error. */
        public Builder autoKey(boolean on) {
            this.autoKey = on;
            return this;
        }

        /** Whether concurrent submits share batch calls (default on). */
        public Builder coalesce(boolean on) {
            this.coalesce = on;
            return this;
        }

        /**
         * How many coalesced batch calls may be in flight at once: 1 to 64
         * (default 1, as the Go client's: one call gathers a crowd best,
         * since the node commits each call's tasks alone anyway).
         */
        public Builder coalesceCalls(int n) {
            if (n < 1 || n > 64) {
                throw new IllegalArgumentException("coalesceCalls: " + n + " is not between 1 and 64");
            }
            this.coalesceCalls = n;
            return this;
        }

        /**
         * Sends the calls through this java.net.http client (a proxy, TLS
         * settings…). By default an http:// node is called over kept-alive
         * HTTP/1.1 sockets (a fifth of HttpClient's cost per call) and an
         * https:// node through a default HttpClient.
         */
        public Builder httpClient(HttpClient c) {
            this.http = c;
            return this;
        }

        public OntimeClient build() {
            return new OntimeClient(this);
        }
    }

    // ---- tasks ----

    /**
     * Stores a task. It returns once the node has committed it; created is
     * false when its topic and key named a task already.
     */
    public SubmitResult submit(TaskRequest t) {
        if (autoKey && t.key().isEmpty()) {
            t = t.withKey("auto-" + UUID.randomUUID());
        }
        String body = t.toJson();
        boolean keyed = !t.key().isEmpty();
        if (coalescer != null && body.length() <= Coalescer.SOLO_CHARS && !coalescer.off) {
            return coalescer.submit(body, keyed);
        }
        return submitOne(body, keyed);
    }

    SubmitResult submitOne(String body, boolean keyed) {
        Transport.Response r = call("POST", "/v1/tasks", body, keyed);
        return new SubmitResult(Task.from(Json.obj(parse(r))), r.status() == 201);
    }

    /**
     * Stores many tasks: one answer per task, in order; a bad task fails
     * alone (its item's error). Lists over {@value #MAX_BATCH} tasks go in
     * several calls of up to {@value #MAX_BATCH}.
     */
    public List<BatchItem> submitBatch(List<TaskRequest> tasks) {
        List<BatchItem> out = new ArrayList<>(tasks.size());
        for (Chunk c : chunks(tasks)) {
            out.addAll(batchCall(c.bodies(), c.keyed()));
        }
        return out;
    }

    /** One call's share of a batch: its tasks' bodies, and whether every task has a key. */
    private record Chunk(List<String> bodies, boolean keyed) {}

    /** tasks in calls of up to {@value #MAX_BATCH}, each given a key first when autoKey is on. */
    private List<Chunk> chunks(List<TaskRequest> tasks) {
        List<Chunk> out = new ArrayList<>();
        for (int lo = 0; lo < tasks.size(); lo += MAX_BATCH) {
            List<String> bodies = new ArrayList<>();
            boolean keyed = true;
            for (TaskRequest t : tasks.subList(lo, Math.min(lo + MAX_BATCH, tasks.size()))) {
                if (autoKey && t.key().isEmpty()) {
                    t = t.withKey("auto-" + UUID.randomUUID());
                }
                keyed &= !t.key().isEmpty();
                bodies.add(t.toJson());
            }
            out.add(new Chunk(bodies, keyed));
        }
        return out;
    }

    /**
     * {@link #submitBatch} answered with each task's ID and status instead
     * of its whole view ({@code Prefer: return=minimal}, RFC 7240): for a
     * caller that keeps only the IDs; the answer is about an eighth of the
     * size. One answer per task, in order; a bad task fails alone (its
     * ref's error). A node older than the preference answers whole views;
     * their IDs and statuses are returned all the same.
     */
    public List<BatchRef> submitBatchMinimal(List<TaskRequest> tasks) {
        List<BatchRef> out = new ArrayList<>(tasks.size());
        for (Chunk c : chunks(tasks)) {
            // A minimal item and a whole view name the task by the same
            // fields (id, status, created, error): one reading for both.
            for (Map<String, Object> m : batchPost(c.bodies(), c.keyed(), PREFER_MINIMAL)) {
                Map<String, Object> e = m.get("error") == null ? null : Json.obj(m.get("error"));
                out.add(e != null ? new BatchRef("", "", false, itemError(e))
                        : new BatchRef(Json.str(m, "id"), Json.str(m, "status"), Json.bool(m, "created"), null));
            }
        }
        return out;
    }

    /** The Prefer header (RFC 7240) of {@link #submitBatchMinimal}. */
    static final String PREFER_MINIMAL = "return=minimal";

    /** POST /v1/tasks:batch with these task bodies; one item per body. */
    List<BatchItem> batchCall(List<String> bodies, boolean keyed) {
        List<BatchItem> items = new ArrayList<>(bodies.size());
        for (Map<String, Object> m : batchPost(bodies, keyed, null)) {
            if (m.get("error") != null) {
                items.add(new BatchItem(null, false, itemError(Json.obj(m.get("error")))));
            } else {
                items.add(new BatchItem(Task.from(m), Json.bool(m, "created"), null));
            }
        }
        return items;
    }

    /** POST /v1/tasks:batch with these task bodies and this Prefer header (null: none); one item per body. */
    private List<Map<String, Object>> batchPost(List<String> bodies, boolean keyed, String prefer) {
        StringBuilder b = new StringBuilder("{\"tasks\":[");
        for (int i = 0; i < bodies.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(bodies.get(i));
        }
        b.append("]}");
        Transport.Response r = call("POST", "/v1/tasks:batch", b.toString(), keyed, prefer);
        List<Map<String, Object>> items = new ArrayList<>(bodies.size());
        for (Object o : Json.arr(Json.obj(parse(r)).get("tasks"))) {
            items.add(Json.obj(o));
        }
        if (items.size() != bodies.size()) {
            throw new OntimeException.Decode("batch answer has " + items.size() + " items for " + bodies.size() + " tasks", null);
        }
        return items;
    }

    /** A batch item's error as the exception a single submit's answer makes. */
    private static OntimeException.Api itemError(Map<String, Object> e) {
        String code = Json.str(e, "code");
        return OntimeException.Api.of(OntimeException.Api.statusOf(code), code, Json.str(e, "field"), Json.str(e, "message"));
    }

    /** The task with this ID. */
    public Task get(String id) {
        return task("GET", "/v1/tasks/" + path(id), null);
    }

    /** Changes a pending or claimed task; others are a Conflict. */
    public Task update(String id, TaskPatch p) {
        return task("PATCH", "/v1/tasks/" + path(id), p.toJson());
    }

    /** Cancels a task. */
    public Task cancel(String id) {
        return task("DELETE", "/v1/tasks/" + path(id), null);
    }

    /** Returns a dead task to pending, due now. */
    public Task requeue(String id) {
        return task("POST", "/v1/tasks/" + path(id) + ":requeue", null);
    }

    /** The task a key names in a topic: its live task, else the one that ended last. */
    public Task getByKey(String topic, String key) {
        return task("GET", keyPath(topic, key), null);
    }

    /** Changes the live task a key names. */
    public Task updateByKey(String topic, String key, TaskPatch p) {
        return task("PATCH", keyPath(topic, key), p.toJson());
    }

    /** Cancels the live task a key names. */
    public Task cancelByKey(String topic, String key) {
        return task("DELETE", keyPath(topic, key), null);
    }

    /** GET /v1/tasks?topic=&amp;key=: a page holding the task the key names, or none. */
    public ListPage listByKey(String topic, String key) {
        return page("/v1/tasks?topic=" + path(topic) + "&key=" + path(key));
    }

    /** One page of tasks in creation order. */
    public ListPage list(ListOptions o) {
        StringJoiner q = new StringJoiner("&");
        add(q, "topic", o.topic);
        add(q, "status", o.status);
        add(q, "limit", o.limit == 0 ? "" : Integer.toString(o.limit));
        add(q, "cursor", o.cursor);
        add(q, "due_after", o.dueAfter == null ? "" : o.dueAfter.toString());
        add(q, "due_before", o.dueBefore == null ? "" : o.dueBefore.toString());
        return page(q.length() == 0 ? "/v1/tasks" : "/v1/tasks?" + q);
    }

    private ListPage page(String p) {
        Map<String, Object> m = Json.obj(parse(call("GET", p, null, true)));
        List<Task> tasks = new ArrayList<>();
        for (Object t : Json.arr(m.get("tasks"))) {
            tasks.add(Task.from(Json.obj(t)));
        }
        return new ListPage(tasks, Json.str(m, "next_cursor"));
    }

    /** Every task the options select, page after page as the iteration goes. */
    public Iterable<Task> listAll(ListOptions o) {
        return () -> new Iterator<>() {
            private ListPage page = list(o);
            private int i;

            @Override
            public boolean hasNext() {
                while (i >= page.tasks().size() && page.hasMore()) {
                    String c = page.nextCursor();
                    ListOptions next = ListOptions.create().topic(o.topic).status(o.status).limit(o.limit).cursor(c);
                    next.dueAfter = o.dueAfter;
                    next.dueBefore = o.dueBefore;
                    page = list(next);
                    i = 0;
                }
                return i < page.tasks().size();
            }

            @Override
            public Task next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return page.tasks().get(i++);
            }
        };
    }

    // ---- topics ----

    /** Every topic that has tasks or is paused, by name. */
    public List<Topic> topics() {
        List<Topic> out = new ArrayList<>();
        for (Object t : Json.arr(Json.obj(parse(call("GET", "/v1/topics", null, true))).get("topics"))) {
            out.add(Topic.from(Json.obj(t)));
        }
        return out;
    }

    /** Pauses a topic cluster wide: its tasks wait. */
    public Topic pauseTopic(String topic) {
        return Topic.from(Json.obj(parse(call("POST", "/v1/topics/" + path(topic) + ":pause", null, true))));
    }

    /** Resumes a paused topic. */
    public Topic resumeTopic(String topic) {
        return Topic.from(Json.obj(parse(call("POST", "/v1/topics/" + path(topic) + ":resume", null, true))));
    }

    /** Moves every dead task of a topic back to pending; returns how many. */
    public long requeueTopic(String topic) {
        return Json.num(Json.obj(parse(call("POST", "/v1/topics/" + path(topic) + ":requeue", null, true))), "requeued");
    }

    // ---- schedules ----

    /** A schedule put: the schedule, and whether the put created it. */
    public record SchedulePut(Schedule schedule, boolean created) {}

    /** Creates a schedule; a name in use is a Conflict. */
    public Schedule createSchedule(ScheduleRequest s) {
        return schedule("POST", "/v1/schedules", s.toJson(), false);
    }

    /** Creates the schedule name or replaces its definition. */
    public SchedulePut putSchedule(String name, ScheduleRequest s) {
        Transport.Response r = call("PUT", "/v1/schedules/" + path(name), s.toJson(), true);
        return new SchedulePut(Schedule.from(Json.obj(parse(r))), r.status() == 201);
    }

    public Schedule getSchedule(String name) {
        return schedule("GET", "/v1/schedules/" + path(name), null, true);
    }

    /** Every schedule, by name. */
    public List<Schedule> listSchedules() {
        List<Schedule> out = new ArrayList<>();
        for (Object s : Json.arr(Json.obj(parse(call("GET", "/v1/schedules", null, true))).get("schedules"))) {
            out.add(Schedule.from(Json.obj(s)));
        }
        return out;
    }

    /** Removes a schedule; returns it as it was. */
    public Schedule deleteSchedule(String name) {
        return schedule("DELETE", "/v1/schedules/" + path(name), null, true);
    }

    public Schedule pauseSchedule(String name) {
        return schedule("POST", "/v1/schedules/" + path(name) + ":pause", null, true);
    }

    /** Restarts a paused schedule from its next fire time. */
    public Schedule resumeSchedule(String name) {
        return schedule("POST", "/v1/schedules/" + path(name) + ":resume", null, true);
    }

    /** Makes one task of the schedule now. */
    public Task triggerSchedule(String name) {
        return task("POST", "/v1/schedules/" + path(name) + ":trigger", null);
    }

    // ---- cluster ----

    /** GET /v1/cluster, as parsed JSON: nodes, leader, items. */
    public Map<String, Object> cluster() {
        return Json.obj(parse(call("GET", "/v1/cluster", null, true)));
    }

    /** GET /v1/jobs, as parsed JSON: the scan jobs. */
    public List<Object> jobs() {
        return Json.arr(Json.obj(parse(call("GET", "/v1/jobs", null, true))).get("jobs"));
    }

    /** GET /v1/jobs/{name}, as parsed JSON: one job with each item's owner, run and cursor. */
    public Map<String, Object> job(String name) {
        return Json.obj(parse(call("GET", "/v1/jobs/" + path(name), null, true)));
    }

    /** A job's latest runs, newest first; item "" for every item, limit 0 for the node's default. */
    public List<Object> jobRuns(String name, String item, int limit) {
        StringJoiner q = new StringJoiner("&");
        add(q, "item", item);
        add(q, "limit", limit == 0 ? "" : Integer.toString(limit));
        String p = "/v1/jobs/" + path(name) + "/runs" + (q.length() == 0 ? "" : "?" + q);
        return Json.arr(Json.obj(parse(call("GET", p, null, true))).get("runs"));
    }

    /** Posts "trigger", "pause" or "resume" to a job; returns its view as parsed JSON. */
    public Map<String, Object> jobOp(String name, String op) {
        return Json.obj(parse(call("POST", "/v1/jobs/" + path(name) + ":" + op, null, false)));
    }

    /** Checks /readyz; throws when the node is not ready. */
    public void health() {
        call("GET", "/readyz", null, true);
    }

    // ---- the calls ----

    private Task task(String method, String path, String body) {
        // PATCH with a delay moves the due time from now: sent twice, it
        // moves it twice, so it is not retried after a network error.
        boolean idempotent = !method.equals("POST") && !method.equals("PATCH");
        return Task.from(Json.obj(parse(call(method, path, body, idempotent))));
    }

    private Schedule schedule(String method, String path, String body, boolean idempotent) {
        return Schedule.from(Json.obj(parse(call(method, path, body, idempotent))));
    }

    private static Object parse(Transport.Response r) {
        try {
            return Json.parse(r.body());
        } catch (Json.ParseException e) {
            throw new OntimeException.Decode("decoding the answer (HTTP " + r.status() + "): " + e.getMessage(), e);
        }
    }

    /**
     * Makes one call: retried after a 503 (waiting its Retry-After) and,
     * when idempotent, after a network error; an error answer is thrown.
     */
    Transport.Response call(String method, String path, String body, boolean idempotent) {
        return call(method, path, body, idempotent, null);
    }

    /** {@link #call(String, String, String, boolean)} with a Prefer header (RFC 7240), unless prefer is null. */
    Transport.Response call(String method, String path, String body, boolean idempotent, String prefer) {
        for (int attempt = 0; ; attempt++) {
            Transport.Response r;
            try {
                r = transport.send(method, path, body, authorization, prefer, timeout);
            } catch (IOException e) {
                if (idempotent && attempt < retries) {
                    sleep(networkBackoff(attempt));
                    continue;
                }
                throw new OntimeException.Network(method + " " + path + ": " + e, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new OntimeException.Network(method + " " + path + ": interrupted", e);
            }
            if (r.status() == 503 && attempt < retries) {
                sleep(retryAfter(r.retryAfter(), attempt));
                continue;
            }
            if (r.status() >= 400) {
                throw error(r);
            }
            return r;
        }
    }

    /** The client's version, in its User-Agent. */
    public static final String VERSION = "0.1.0";

    static final String USER_AGENT = "ontime-java/" + VERSION;

    private static OntimeException.Api error(Transport.Response r) {
        String body = r.body() == null ? "" : r.body();
        try {
            Map<String, Object> e = Json.obj(Json.obj(Json.parse(body)).get("error"));
            if (!Json.str(e, "message").isEmpty()) {
                return OntimeException.Api.of(r.status(), Json.str(e, "code"), Json.str(e, "field"), Json.str(e, "message"));
            }
        } catch (Json.ParseException ignored) {
            // not the API's envelope: a proxy's page
        }
        return OntimeException.Api.of(r.status(), "", "", body.strip());
    }

    private Duration networkBackoff(int attempt) {
        long ms = backoff.toMillis() << Math.min(attempt, 10);
        ms = Math.min(ms, 5000);
        // Jitter, so that clients cut off together do not return together.
        return Duration.ofMillis(ms / 2 + ThreadLocalRandom.current().nextLong(ms / 2 + 1));
    }

    /** The wait a 503 asks for: Retry-After (seconds or an HTTP date), bounded. */
    private Duration retryAfter(String header, int attempt) {
        String v = header.strip();
        Duration d = null;
        if (!v.isEmpty()) {
            try {
                d = Duration.ofSeconds(Long.parseLong(v));
            } catch (NumberFormatException e) {
                try {
                    d = Duration.between(Instant.now(), ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant());
                } catch (RuntimeException ignored) {
                    // unreadable: back off as after a network error
                }
            }
        }
        if (d == null || d.isNegative()) {
            d = networkBackoff(attempt);
        }
        return d.compareTo(maxRetryAfter) > 0 ? maxRetryAfter : d;
    }

    private static void sleep(Duration d) {
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new OntimeException.Network("interrupted while waiting to retry", e);
        }
    }

    /** A path segment, percent-encoded (a key may hold slashes and any UTF-8). */
    static String path(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private static String keyPath(String topic, String key) {
        return "/v1/topics/" + path(topic) + "/keys/" + path(key);
    }

    private static void add(StringJoiner q, String name, String v) {
        if (v != null && !v.isEmpty()) {
            q.add(name + "=" + path(v));
        }
    }

    /** Batch calls the coalescer made (tests, benchmarks). */
    long coalescedCalls() {
        return coalescer == null ? 0 : coalescer.batches.get();
    }
}
