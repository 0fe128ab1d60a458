package com.ontimehq.ontime;

import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A task to submit. Give the topic, then either a due time or a delay
 * (neither: due now), and usually a target and a payload:
 *
 * <pre>{@code
 * TaskRequest.of("orders.close")
 *     .key("order-42")
 *     .delay(Duration.ofMinutes(30))
 *     .target("https://shop.example/hooks/close")
 *     .payload(Map.of("order", 42));
 * }</pre>
 */
public final class TaskRequest {
    private final String topic;
    private String key = "";
    private Instant dueAt;
    private String delay = "";
    private Object payload;
    private boolean hasPayload;
    private String target = "";
    private int maxAttempts;
    private String ifExists = "";

    private TaskRequest(String topic) {
        this.topic = topic;
    }

    /** A task of topic. */
    public static TaskRequest of(String topic) {
        return new TaskRequest(topic);
    }

    /** The task's key: one live task per topic and key; a keyed submit is safe to retry. */
    public TaskRequest key(String key) {
        this.key = key == null ? "" : key;
        return this;
    }

    /** Due at this time. */
    public TaskRequest dueAt(Instant at) {
        this.dueAt = at;
        return this;
    }

    /** Due after this delay (from when the node stores it). */
    public TaskRequest delay(Duration d) {
        this.delay = goDuration(d);
        return this;
    }

    /** Due after this delay, in Go's duration syntax ("30s", "1h30m"). */
    public TaskRequest delay(String d) {
        this.delay = d == null ? "" : d;
        return this;
    }

    /**
     * The payload: any value {@link Json#write} writes (a Map, a List, a
     * String, a number…), or {@link Json#raw} for JSON text.
     */
    public TaskRequest payload(Object payload) {
        this.payload = payload;
        this.hasPayload = true;
        return this;
    }

    /** The webhook URL (or mq://BROKER/ADDRESS) the task is delivered to. */
    public TaskRequest target(String target) {
        this.target = target == null ? "" : target;
        return this;
    }

    /** Attempts before the task is dead; 0: the node's default. */
    public TaskRequest maxAttempts(int n) {
        this.maxAttempts = n;
        return this;
    }

    /** "keep" (the default) or "replace": what a submit does when its key names a live task. */
    public TaskRequest ifExists(String mode) {
        this.ifExists = mode == null ? "" : mode;
        return this;
    }

    public String topic() {
        return topic;
    }

    public String key() {
        return key;
    }

    /** The same request with another key (the client's automatic keys). */
    TaskRequest withKey(String k) {
        TaskRequest t = new TaskRequest(topic);
        t.key = k;
        t.dueAt = dueAt;
        t.delay = delay;
        t.payload = payload;
        t.hasPayload = hasPayload;
        t.target = target;
        t.maxAttempts = maxAttempts;
        t.ifExists = ifExists;
        return t;
    }

    /** The request's JSON body, members as the Go client writes them. */
    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", topic);
        if (!key.isEmpty()) {
            m.put("key", key);
        }
        if (dueAt != null) {
            m.put("due_at", dueAt.toString());
        }
        if (!delay.isEmpty()) {
            m.put("delay", delay);
        }
        if (hasPayload) {
            m.put("payload", payload);
        }
        if (!target.isEmpty()) {
            m.put("target", target);
        }
        if (maxAttempts != 0) {
            m.put("max_attempts", maxAttempts);
        }
        if (!ifExists.isEmpty()) {
            m.put("if_exists", ifExists);
        }
        return Json.write(m);
    }

    /** d in Go's duration syntax: whole seconds as "90s", else milliseconds, else nanoseconds. */
    static String goDuration(Duration d) {
        if (d == null) {
            return "";
        }
        if (d.getNano() == 0) {
            return d.getSeconds() + "s";
        }
        if (d.getNano() % 1_000_000 == 0) {
            return d.toMillis() + "ms";
        }
        return d.toNanos() + "ns";
    }
}
