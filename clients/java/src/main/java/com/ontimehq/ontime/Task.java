package com.ontimehq.ontime;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.Map;

/**
 * A stored task, as every task route answers it.
 *
 * @param id the task's ID
 * @param topic its topic
 * @param key its key within the topic; "" when it has none
 * @param dueAt when its next attempt is due
 * @param firstDueAt the due time as submitted (retries move dueAt only)
 * @param movedBy what last set dueAt: "retry", "update", "requeue"; "" when nothing did
 * @param payload the payload as parsed JSON (see {@link Json}); null when none
 * @param target the webhook or broker target; "" for a Go handler's topic
 * @param maxAttempts attempts before the task is dead
 * @param status pending, claimed, running, done, dead or cancelled
 * @param attempts attempts made
 * @param createdAt when it was stored
 * @param updatedAt when it last changed (a final task's: when it ended)
 * @param lastError the last attempt's error; "" when none
 * @param keyHeldUntil in a submit's answer only: the key is held by this
 *     final task until then, and nothing was written; null otherwise
 */
public record Task(
        String id,
        String topic,
        String key,
        Instant dueAt,
        Instant firstDueAt,
        String movedBy,
        Object payload,
        String target,
        int maxAttempts,
        String status,
        int attempts,
        Instant createdAt,
        Instant updatedAt,
        String lastError,
        Instant keyHeldUntil) {

    static Task from(Map<String, Object> m) {
        return new Task(
                Json.str(m, "id"),
                Json.str(m, "topic"),
                Json.str(m, "key"),
                time(m.get("due_at")),
                time(m.get("first_due_at")),
                Json.str(m, "moved_by"),
                m.get("payload"),
                Json.str(m, "target"),
                (int) Json.num(m, "max_attempts"),
                Json.str(m, "status"),
                (int) Json.num(m, "attempts"),
                time(m.get("created_at")),
                time(m.get("updated_at")),
                Json.str(m, "last_error"),
                time(m.get("key_held_until")));
    }

    /** An RFC 3339 time as the API writes it, or null. */
    static Instant time(Object v) {
        if (!(v instanceof String s) || s.isEmpty()) {
            return null;
        }
        Instant fast = utc(s);
        return fast != null ? fast : OffsetDateTime.parse(s).toInstant();
    }

    /**
     * The node's own form, 2026-11-26T10:00:00.123456Z, read directly:
     * every task carries four times, and OffsetDateTime.parse took a
     * tenth of a submit's time in the client. Null for any other form.
     */
    static Instant utc(String s) {
        int n = s.length();
        if (n < 20 || s.charAt(n - 1) != 'Z' || s.charAt(4) != '-' || s.charAt(7) != '-' || s.charAt(10) != 'T'
                || s.charAt(13) != ':' || s.charAt(16) != ':') {
            return null;
        }
        int year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2);
        int hour = digits(s, 11, 2), minute = digits(s, 14, 2), second = digits(s, 17, 2);
        if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 || minute > 59
                || second < 0 || second > 59) {
            return null;
        }
        int nanos = 0;
        if (n > 20) {
            int f = n - 1 - 20; // digits after the dot
            if (s.charAt(19) != '.' || f < 1 || f > 9) {
                return null;
            }
            nanos = digits(s, 20, f);
            if (nanos < 0) {
                return null;
            }
            for (int i = f; i < 9; i++) {
                nanos *= 10;
            }
        } else if (s.charAt(19) != 'Z') {
            return null;
        }
        try {
            long days = java.time.LocalDate.of(year, month, day).toEpochDay();
            return Instant.ofEpochSecond(days * 86400 + hour * 3600L + minute * 60L + second, nanos);
        } catch (java.time.DateTimeException e) {
            return null; // 31 April: let the full parser say what is wrong
        }
    }

    private static int digits(String s, int from, int len) {
        int v = 0;
        for (int i = from; i < from + len; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
            v = v * 10 + (c - '0');
        }
        return v;
    }
}
