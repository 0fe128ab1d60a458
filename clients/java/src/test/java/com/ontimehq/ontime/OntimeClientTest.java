package com.ontimehq.ontime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The client against a live {@code ontime serve} (see LiveNode). */
class OntimeClientTest {
    private static LiveNode node;
    private static OntimeClient ontime;

    @BeforeAll
    static void start() throws IOException {
        node = LiveNode.start();
        ontime = node.client();
    }

    @AfterAll
    static void stop() throws IOException {
        if (node != null) {
            node.close();
        }
    }

    /** A topic of its own per test: tests share the node. */
    private static String topic(String name) {
        return "java." + name + "." + UUID.randomUUID().toString().substring(0, 8);
    }

    @Test
    void submitGetUpdateCancelById() {
        String t = topic("byid");
        SubmitResult r = ontime.submit(TaskRequest.of(t).delay(Duration.ofHours(1)).target("http://127.0.0.1:9/hook")
                .payload(Map.of("order", 42, "name", "caf\u00e9 \"q\"\n")));
        assertTrue(r.created());
        Task task = r.task();
        assertEquals(t, task.topic());
        assertEquals("pending", task.status());
        assertEquals("", task.key());
        assertEquals(42L, Json.obj(task.payload()).get("order"));
        assertEquals("caf\u00e9 \"q\"\n", Json.obj(task.payload()).get("name"));
        assertTrue(task.dueAt().isAfter(Instant.now().plus(Duration.ofMinutes(59))));

        Task got = ontime.get(task.id());
        assertEquals(task.id(), got.id());
        assertEquals(task.dueAt(), got.dueAt());

        Instant due = Instant.now().plus(Duration.ofHours(2)).truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
        Task upd = ontime.update(task.id(), TaskPatch.create().dueAt(due).payload(Json.raw("[1,2,3]")).maxAttempts(7));
        assertEquals(due, upd.dueAt());
        assertEquals(List.of(1L, 2L, 3L), upd.payload());
        assertEquals(7, upd.maxAttempts());
        assertEquals("update", upd.movedBy());

        Task c = ontime.cancel(task.id());
        assertEquals("cancelled", c.status());
        // A cancelled task cannot change any more.
        OntimeException.Conflict e = assertThrows(OntimeException.Conflict.class,
                () -> ontime.update(task.id(), TaskPatch.create().delay("1m")));
        assertEquals(409, e.status());
        assertEquals("conflict", e.code());
    }

    @Test
    void byKey() {
        String t = topic("bykey");
        String key = "order/42 \u00e9";
        TaskRequest req = TaskRequest.of(t).key(key).delay("1h").target("http://127.0.0.1:9/hook").payload(Map.of("n", 1));
        SubmitResult first = ontime.submit(req);
        assertTrue(first.created());
        SubmitResult again = ontime.submit(req);
        assertFalse(again.created());
        assertEquals(first.task().id(), again.task().id());

        assertEquals(first.task().id(), ontime.getByKey(t, key).id());
        assertEquals(first.task().id(), ontime.listByKey(t, key).tasks().get(0).id());
        assertEquals(0, ontime.listByKey(t, "other key").tasks().size());
        Task upd = ontime.updateByKey(t, key, TaskPatch.create().delay(Duration.ofHours(3)).target("http://127.0.0.1:9/other"));
        assertEquals("http://127.0.0.1:9/other", upd.target());
        assertTrue(upd.dueAt().isAfter(Instant.now().plus(Duration.ofMinutes(170))));

        // if_exists replace updates the live task.
        SubmitResult rep = ontime.submit(TaskRequest.of(t).key(key).delay("5h").target("http://127.0.0.1:9/hook").ifExists("replace"));
        assertFalse(rep.created());
        assertEquals(first.task().id(), rep.task().id());

        assertEquals("cancelled", ontime.cancelByKey(t, key).status());
        assertThrows(OntimeException.NotFound.class, () -> ontime.getByKey(t, "no-such-key"));
    }

    @Test
    void batchWithBadEntry() {
        String t = topic("batch");
        List<BatchItem> items = ontime.submitBatch(List.of(
                TaskRequest.of(t).key("a").delay("1h").target("http://127.0.0.1:9/h"),
                TaskRequest.of(t).key("b").delay("not-a-duration").target("http://127.0.0.1:9/h"),
                TaskRequest.of(t).key("c").delay("1h").target("http://127.0.0.1:9/h")));
        assertEquals(3, items.size());
        assertTrue(items.get(0).ok());
        assertTrue(items.get(0).created());
        assertFalse(items.get(1).ok());
        assertNull(items.get(1).task());
        assertTrue(items.get(1).error() instanceof OntimeException.Invalid, items.get(1).error().toString());
        assertEquals("delay", items.get(1).error().field());
        assertEquals(400, items.get(1).error().status());
        assertTrue(items.get(2).ok());
        assertEquals("c", items.get(2).task().key());
    }

    /**
     * The minimal batch names the tasks by ID and status, with each refused
     * task's error in its place, in order; through a proxy that drops the
     * Prefer header (a node older than it), the whole views are read into
     * the same. Over the client's sockets and over java.net.http.
     */
    @Test
    void batchMinimal() throws Exception {
        String t = topic("min");
        List<String[]> prefs = new java.util.concurrent.CopyOnWriteArrayList<>(); // {Prefer sent, Preference-Applied}
        java.util.concurrent.atomic.AtomicBoolean drop = new java.util.concurrent.atomic.AtomicBoolean();
        HttpServer proxy = preferProxy(drop, prefs);
        try {
            String url = "http://127.0.0.1:" + proxy.getAddress().getPort();
            List<OntimeClient> clients = List.of(OntimeClient.builder(url).token(LiveNode.TOKEN).build(),
                    OntimeClient.builder(url).token(LiveNode.TOKEN)
                            .httpClient(java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build()).build());
            Map<Integer, String> first = new java.util.HashMap<>();
            for (int i = 0; i < clients.size(); i++) {
                for (boolean dropped : List.of(false, true)) {
                    String what = "client " + i + (dropped ? ", whole views" : ", minimal");
                    drop.set(dropped);
                    List<BatchRef> refs = clients.get(i).submitBatchMinimal(List.of(
                            TaskRequest.of(t).key("m1." + i).delay("1h").target("http://127.0.0.1:9/h"),
                            TaskRequest.of("not a topic!").delay("1h").target("http://127.0.0.1:9/h"),
                            TaskRequest.of(t).delay("1h").target("http://127.0.0.1:9/h").payload(Map.of("n", 2)),
                            TaskRequest.of(t).key("m1." + i).delay("2h").target("http://127.0.0.1:9/h")));
                    String[] seen = prefs.get(prefs.size() - 1);
                    assertEquals("return=minimal", seen[0], what);
                    assertEquals(dropped ? null : "return=minimal", seen[1], what);
                    assertEquals(4, refs.size(), what);
                    BatchRef a = refs.get(0);
                    BatchRef bad = refs.get(1);
                    BatchRef b = refs.get(2);
                    BatchRef again = refs.get(3);
                    assertFalse(bad.ok(), what);
                    assertFalse(bad.created(), what);
                    assertEquals("", bad.id(), what);
                    assertTrue(bad.error() instanceof OntimeException.Invalid, what + ": " + bad.error());
                    assertEquals("topic", bad.error().field(), what);
                    assertEquals(400, bad.error().status(), what);
                    for (BatchRef r : List.of(a, b, again)) {
                        assertTrue(r.ok(), what + ": " + r);
                        assertEquals(26, r.id().length(), what + ": " + r);
                        assertEquals("pending", r.status(), what);
                    }
                    assertNotEquals(a.id(), b.id(), what);
                    // The second entry of the key finds the first's task.
                    assertEquals(a.id(), again.id(), what);
                    assertFalse(again.created(), what);
                    // The keyless entry is a new task each time.
                    assertTrue(b.created(), what);
                    if (!dropped) {
                        assertTrue(a.created(), what);
                        first.put(i, a.id());
                    } else { // the same batch again: the key's task is found
                        assertFalse(a.created(), what);
                        assertEquals(first.get(i), a.id(), what);
                    }
                    // The IDs name the tasks sent, in order.
                    Task ta = ontime.get(a.id());
                    assertEquals("m1." + i, ta.key(), what);
                    assertEquals(a.status(), ta.status(), what);
                    Task tb = ontime.get(b.id());
                    assertEquals(t, tb.topic(), what);
                    assertEquals(2L, Json.obj(tb.payload()).get("n"), what);
                }
            }
            // Each client's key once, and a keyless task per call.
            assertEquals(clients.size() * 3, ontime.list(ListOptions.create().topic(t)).tasks().size());
            // Above 1,000: split as submitBatch splits, every call minimal.
            drop.set(false);
            prefs.clear();
            List<TaskRequest> big = new ArrayList<>();
            for (int i = 0; i < 1203; i++) {
                big.add(TaskRequest.of(t).key("big" + i).delay("1h").target("http://127.0.0.1:9/h"));
            }
            List<BatchRef> refs = clients.get(0).submitBatchMinimal(big);
            assertEquals(1203, refs.size());
            for (BatchRef r : refs) {
                assertTrue(r.ok() && r.created() && r.status().equals("pending"), r.toString());
            }
            assertEquals("big1111", ontime.get(refs.get(1111).id()).key());
            assertEquals(2, prefs.size());
            for (String[] p : prefs) {
                assertEquals("return=minimal", p[1]);
            }
        } finally {
            proxy.stop(0);
        }
    }

    /**
     * A proxy in front of the node that drops the Prefer header while drop
     * is set; records each call's Prefer (as the client sent it) and its
     * answer's Preference-Applied.
     */
    private static HttpServer preferProxy(java.util.concurrent.atomic.AtomicBoolean drop, List<String[]> prefs) throws IOException {
        java.net.http.HttpClient up = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        s.createContext("/", ex -> {
            try {
                byte[] body = ex.getRequestBody().readAllBytes();
                String prefer = ex.getRequestHeaders().getFirst("Prefer");
                java.net.http.HttpRequest.Builder rb = java.net.http.HttpRequest.newBuilder(java.net.URI.create(node.url + ex.getRequestURI()))
                        .method(ex.getRequestMethod(), java.net.http.HttpRequest.BodyPublishers.ofByteArray(body));
                for (String h : List.of("Authorization", "Content-Type")) {
                    String v = ex.getRequestHeaders().getFirst(h);
                    if (v != null) {
                        rb.header(h, v);
                    }
                }
                if (prefer != null && !drop.get()) {
                    rb.header("Prefer", prefer);
                }
                java.net.http.HttpResponse<byte[]> r = up.send(rb.build(), java.net.http.HttpResponse.BodyHandlers.ofByteArray());
                String applied = r.headers().firstValue("Preference-Applied").orElse(null);
                prefs.add(new String[] {prefer, applied});
                if (applied != null) {
                    ex.getResponseHeaders().add("Preference-Applied", applied);
                }
                ex.getResponseHeaders().add("Content-Type", "application/json");
                ex.sendResponseHeaders(r.statusCode(), r.body().length);
                ex.getResponseBody().write(r.body());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                ex.sendResponseHeaders(502, -1);
            } finally {
                ex.close();
            }
        });
        s.start();
        return s;
    }

    @Test
    void batchSplitsAbove1000AndListPages() {
        String t = topic("big");
        List<TaskRequest> tasks = new ArrayList<>();
        for (int i = 0; i < 1203; i++) {
            tasks.add(TaskRequest.of(t).key("k" + i).delay("1h").target("http://127.0.0.1:9/h").payload(i));
        }
        List<BatchItem> items = ontime.submitBatch(tasks);
        assertEquals(1203, items.size());
        Set<String> ids = new HashSet<>();
        for (int i = 0; i < items.size(); i++) {
            assertTrue(items.get(i).ok(), "item " + i);
            assertEquals("k" + i, items.get(i).task().key());
            ids.add(items.get(i).task().id());
        }
        assertEquals(1203, ids.size());

        // Pages of 500: 500, 500, 203, in creation order, the cursor between.
        ListPage p1 = ontime.list(ListOptions.create().topic(t).limit(500));
        assertEquals(500, p1.tasks().size());
        assertTrue(p1.hasMore());
        ListPage p2 = ontime.list(ListOptions.create().topic(t).limit(500).cursor(p1.nextCursor()));
        assertEquals(500, p2.tasks().size());
        assertNotEquals(p1.tasks().get(0).id(), p2.tasks().get(0).id());
        Set<String> listed = new HashSet<>();
        for (Task task : ontime.listAll(ListOptions.create().topic(t).status("pending").limit(500))) {
            listed.add(task.id());
        }
        assertEquals(ids, listed);
        assertEquals(0, ontime.list(ListOptions.create().topic(t).status("done")).tasks().size());
    }

    @Test
    void topics() {
        String t = topic("topics");
        ontime.submit(TaskRequest.of(t).delay("1h").target("http://127.0.0.1:9/h"));
        Topic paused = ontime.pauseTopic(t);
        assertTrue(paused.paused());
        assertTrue(paused.known());
        Topic listed = ontime.topics().stream().filter(x -> x.topic().equals(t)).findFirst().orElseThrow();
        assertTrue(listed.paused());
        assertFalse(ontime.resumeTopic(t).paused());
        assertEquals(0, ontime.requeueTopic(t));
        // A pause ahead of the first task says the topic is unknown.
        String fresh = topic("unknown");
        assertFalse(ontime.pauseTopic(fresh).known());
        ontime.resumeTopic(fresh);
    }

    @Test
    void schedules() {
        String name = topic("sched").replace('.', '-');
        String t = topic("schedtask");
        ScheduleRequest req = ScheduleRequest.of(name, "0 2 * * *", new ScheduleTask(t, Map.of("kind", "nightly"), "http://127.0.0.1:9/h", 0))
                .timeZone("Europe/Paris");
        Schedule s = ontime.createSchedule(req);
        assertEquals(name, s.name());
        assertEquals("Europe/Paris", s.timeZone());
        assertEquals("skip", s.misfire());
        assertNotNull(s.nextFireAt());
        assertThrows(OntimeException.Conflict.class, () -> ontime.createSchedule(req));
        assertEquals("0 2 * * *", ontime.getSchedule(name).cron());
        assertTrue(ontime.listSchedules().stream().anyMatch(x -> x.name().equals(name)));
        assertTrue(ontime.pauseSchedule(name).paused());
        assertFalse(ontime.resumeSchedule(name).paused());
        Task fired = ontime.triggerSchedule(name);
        assertEquals(t, fired.topic());
        OntimeClient.SchedulePut put = ontime.putSchedule(name, ScheduleRequest.of(name, "@every 1h", new ScheduleTask(t, null, "http://127.0.0.1:9/h", 3)));
        assertFalse(put.created());
        assertEquals("@every 1h", put.schedule().cron());
        assertEquals(name, ontime.deleteSchedule(name).name());
        assertThrows(OntimeException.NotFound.class, () -> ontime.getSchedule(name));
        OntimeException.Invalid bad = assertThrows(OntimeException.Invalid.class,
                () -> ontime.createSchedule(ScheduleRequest.of(name, "not cron", new ScheduleTask(t, null, "http://127.0.0.1:9/h", 0))));
        assertEquals("cron", bad.field());
    }

    @Test
    void errorsAreExceptions() {
        Task some = ontime.submit(TaskRequest.of(topic("errors")).delay("1h").target("http://127.0.0.1:9/h")).task();
        String missing = some.id().substring(0, 20) + (some.id().endsWith("0000") ? "111111" : "000000");
        OntimeException.NotFound nf = assertThrows(OntimeException.NotFound.class, () -> ontime.get(missing));
        assertEquals(404, nf.status());
        assertEquals("not_found", nf.code());
        OntimeException.Invalid badID = assertThrows(OntimeException.Invalid.class, () -> ontime.get("no-such-task"));
        assertEquals("id", badID.field());
        OntimeException.Invalid inv = assertThrows(OntimeException.Invalid.class,
                () -> ontime.submit(TaskRequest.of("").delay("1h").target("http://127.0.0.1:9/h")));
        assertEquals("topic", inv.field());
        // Tokens: none is 401, a read token may not write (403), and reads.
        OntimeClient anon = OntimeClient.builder(node.url).build();
        assertThrows(OntimeException.Unauthorized.class, () -> anon.topics());
        OntimeClient reader = OntimeClient.builder(node.url).token(LiveNode.READ_TOKEN).build();
        reader.topics();
        assertThrows(OntimeException.Forbidden.class,
                () -> reader.submit(TaskRequest.of(topic("ro")).delay("1h").target("http://127.0.0.1:9/h")));
        // Nothing listens on port 9: a network error, after the retries for a read.
        OntimeClient nowhere = OntimeClient.builder("http://127.0.0.1:9").retries(2).backoff(Duration.ofMillis(1)).build();
        assertThrows(OntimeException.Network.class, () -> nowhere.get("x"));
        assertThrows(IllegalArgumentException.class, () -> OntimeClient.builder("127.0.0.1:7070"));
        assertThrows(OntimeException.NotFound.class, () -> ontime.job("no-such-job"));
        assertTrue(ontime.jobs().isEmpty());
        ontime.health();
        assertTrue(Json.arr(ontime.cluster().get("items")).size() > 0);
    }

    @Test
    void concurrentSubmitsShareBatchCalls() throws Exception {
        String t = topic("coalesce");
        int threads = 16, each = 40;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<List<SubmitResult>>> fs = new ArrayList<>();
            for (int w = 0; w < threads; w++) {
                int wid = w;
                fs.add(pool.submit(() -> {
                    List<SubmitResult> out = new ArrayList<>();
                    for (int i = 0; i < each; i++) {
                        out.add(ontime.submit(TaskRequest.of(t).key(wid + "-" + i).delay("1h").target("http://127.0.0.1:9/h")));
                    }
                    return out;
                }));
            }
            Set<String> ids = new HashSet<>();
            for (Future<List<SubmitResult>> f : fs) {
                for (SubmitResult r : f.get(120, TimeUnit.SECONDS)) {
                    assertTrue(r.created());
                    ids.add(r.task().id());
                }
            }
            assertEquals(threads * each, ids.size());
            assertTrue(ontime.coalescedCalls() > 0, "no batch call was made");
            // A bad task among coalesced ones fails alone, as its own submit would.
            List<Future<?>> mixed = new ArrayList<>();
            AtomicInteger invalid = new AtomicInteger();
            for (int w = 0; w < threads; w++) {
                int wid = w;
                mixed.add(pool.submit(() -> {
                    for (int i = 0; i < 10; i++) {
                        try {
                            ontime.submit(TaskRequest.of(t).key("m" + wid + "-" + i).delay(i == 5 ? "bad" : "1h").target("http://127.0.0.1:9/h"));
                        } catch (OntimeException.Invalid e) {
                            assertEquals("delay", e.field());
                            invalid.incrementAndGet();
                        }
                    }
                }));
            }
            for (Future<?> f : mixed) {
                f.get(120, TimeUnit.SECONDS);
            }
            assertEquals(threads, invalid.get());
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void webhookSignatureVerifies() throws Exception {
        LinkedBlockingQueue<Map<String, Object>> calls = new LinkedBlockingQueue<>();
        HttpServer rcv = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        rcv.createContext("/", ex -> {
            byte[] body = ex.getRequestBody().readAllBytes();
            calls.add(Map.of("body", body,
                    "sig", ex.getRequestHeaders().getFirst("Ontime-Signature"),
                    "target", ex.getRequestHeaders().getFirst("Ontime-Target"),
                    "ua", ex.getRequestHeaders().getFirst("User-Agent")));
            ex.sendResponseHeaders(204, -1);
            ex.close();
        });
        rcv.start();
        try {
            String target = "http://127.0.0.1:" + rcv.getAddress().getPort() + "/hooks/java?x=1";
            Task task = ontime.submit(TaskRequest.of(topic("signed")).target(target).payload(Map.of("hello", "world"))).task();
            Map<String, Object> call = calls.poll(60, TimeUnit.SECONDS);
            assertNotNull(call, "no webhook call within 60 s");
            byte[] body = (byte[]) call.get("body");
            String sig = (String) call.get("sig");
            assertEquals(target, call.get("target"));
            assertTrue(((String) call.get("ua")).startsWith("ontime/"), (String) call.get("ua"));
            Signatures.verify(sig, (String) call.get("target"), body, Signatures.DEFAULT_TOLERANCE, "old-secret", LiveNode.SECRET);
            assertEquals(task.id(), Json.str(Json.obj(Json.parse(new String(body, StandardCharsets.UTF_8))), "id"));
            assertFalse(Signatures.isValid(sig, target + "&y=2", body, Signatures.DEFAULT_TOLERANCE, LiveNode.SECRET));
            byte[] tampered = body.clone();
            tampered[tampered.length - 2] ^= 1;
            assertFalse(Signatures.isValid(sig, target, tampered, Signatures.DEFAULT_TOLERANCE, LiveNode.SECRET));
            assertFalse(Signatures.isValid(sig, target, body, Signatures.DEFAULT_TOLERANCE, "wrong"));
            assertThrows(Signatures.BadSignature.class,
                    () -> Signatures.verify(sig, target, body, Instant.now().plus(Duration.ofMinutes(10)), Duration.ofMinutes(5), LiveNode.SECRET));
        } finally {
            rcv.stop(0);
        }
    }

    // ---- retries, against a node stand-in ----

    /** A stand-in node: each call is answered by the next of the answers; counts calls by path. */
    private static HttpServer fake(Map<String, AtomicInteger> count, List<java.util.function.Consumer<HttpExchange>> answers) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        AtomicInteger n = new AtomicInteger();
        s.createContext("/", ex -> {
            ex.getRequestBody().readAllBytes();
            count.computeIfAbsent(ex.getRequestURI().getPath(), k -> new AtomicInteger()).incrementAndGet();
            answers.get(Math.min(n.getAndIncrement(), answers.size() - 1)).accept(ex);
        });
        s.start();
        return s;
    }

    private static void reply(HttpExchange ex, int status, String retryAfter, String body) {
        try {
            if (retryAfter != null) {
                ex.getResponseHeaders().add("Retry-After", retryAfter);
            }
            ex.getResponseHeaders().add("Content-Type", "application/json");
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(status, b.length);
            ex.getResponseBody().write(b);
        } catch (IOException e) {
            throw new RuntimeException(e);
        } finally {
            ex.close();
        }
    }

    private static final String TASK = "{\"id\":\"t1\",\"topic\":\"x\",\"key\":\"k\",\"due_at\":\"2026-11-26T10:00:00Z\","
            + "\"first_due_at\":\"2026-11-26T10:00:00Z\",\"payload\":null,\"max_attempts\":25,\"status\":\"pending\",\"attempts\":0,"
            + "\"created_at\":\"2026-11-26T09:00:00.123456Z\",\"updated_at\":\"2026-11-26T09:00:00Z\"}";

    @Test
    void retryAfterOn503() throws Exception {
        Map<String, AtomicInteger> count = new ConcurrentHashMap<>();
        HttpServer s = fake(count, List.of(
                ex -> reply(ex, 503, "1", "{\"error\":{\"code\":\"unavailable\",\"message\":\"node starting; retry later\"}}"),
                ex -> reply(ex, 201, null, TASK)));
        try {
            OntimeClient c = OntimeClient.builder("http://127.0.0.1:" + s.getAddress().getPort()).build();
            long t0 = System.nanoTime();
            SubmitResult r = c.submit(TaskRequest.of("x").key("k"));
            assertTrue(Duration.ofNanos(System.nanoTime() - t0).toMillis() >= 900, "did not wait for Retry-After");
            assertTrue(r.created());
            assertEquals("t1", r.task().id());
            assertEquals(2, count.get("/v1/tasks").get());
            // Out of retries: Unavailable.
            HttpServer down = fake(count, List.of(ex -> reply(ex, 503, "0", "{\"error\":{\"code\":\"unavailable\",\"message\":\"stopping\"}}")));
            try {
                OntimeClient d = OntimeClient.builder("http://127.0.0.1:" + down.getAddress().getPort()).retries(2).build();
                assertThrows(OntimeException.Unavailable.class, () -> d.get("t1"));
            } finally {
                down.stop(0);
            }
        } finally {
            s.stop(0);
        }
    }

    @Test
    void keyedSubmitRetriedAfterNetworkError() throws Exception {
        Map<String, AtomicInteger> count = new ConcurrentHashMap<>();
        // The first call is cut before any answer: a network error.
        HttpServer s = fake(count, List.of(HttpExchange::close, ex -> reply(ex, 200, null, TASK)));
        try {
            OntimeClient c = OntimeClient.builder("http://127.0.0.1:" + s.getAddress().getPort()).backoff(Duration.ofMillis(10)).build();
            SubmitResult r = c.submit(TaskRequest.of("x").key("k"));
            assertEquals("t1", r.task().id());
            assertEquals(2, count.get("/v1/tasks").get(), "the keyed submit was sent again");
        } finally {
            s.stop(0);
        }
        Map<String, AtomicInteger> count2 = new ConcurrentHashMap<>();
        HttpServer s2 = fake(count2, List.of(HttpExchange::close, ex -> reply(ex, 201, null, TASK)));
        try {
            OntimeClient c = OntimeClient.builder("http://127.0.0.1:" + s2.getAddress().getPort()).backoff(Duration.ofMillis(10)).build();
            // Without a key a second send could store the task twice: not retried.
            assertThrows(OntimeException.Network.class, () -> c.submit(TaskRequest.of("x")));
            assertEquals(1, count2.get("/v1/tasks").get());
        } finally {
            s2.stop(0);
        }
    }

    /** The same calls through java.net.http (a program's own HttpClient). */
    @Test
    void overJavaNetHttp() {
        OntimeClient c = OntimeClient.builder(node.url).token(LiveNode.TOKEN)
                .httpClient(java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build()).build();
        String t = topic("jdk");
        SubmitResult r = c.submit(TaskRequest.of(t).key("k").delay("1h").target("http://127.0.0.1:9/h").payload("text"));
        assertTrue(r.created());
        assertEquals("text", c.get(r.task().id()).payload());
        assertFalse(c.submit(TaskRequest.of(t).key("k").delay("1h").target("http://127.0.0.1:9/h")).created());
        assertEquals(2, c.submitBatch(List.of(TaskRequest.of(t).delay("1h").target("http://127.0.0.1:9/h"),
                TaskRequest.of(t).delay("1h").target("http://127.0.0.1:9/h"))).size());
        assertEquals("cancelled", c.cancel(r.task().id()).status());
        assertThrows(OntimeException.Conflict.class, () -> c.update(r.task().id(), TaskPatch.create().delay("2h")));
        assertThrows(OntimeException.Unauthorized.class, () -> OntimeClient.builder(node.url)
                .httpClient(java.net.http.HttpClient.newHttpClient()).build().topics());
    }

    @Test
    void autoKeyMakesUnkeyedSubmitsRetriable() {
        OntimeClient c = OntimeClient.builder(node.url).token(LiveNode.TOKEN).autoKey(true).build();
        Task t = c.submit(TaskRequest.of(topic("autokey")).delay("1h").target("http://127.0.0.1:9/h")).task();
        assertTrue(t.key().startsWith("auto-"), t.key());
    }
}
