package com.ontimehq.ontime;

import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A topic's view.
 *
 * @param topic its name
 * @param counts tasks by status (pending, claimed, running, done, dead, cancelled)
 * @param oldestDueAt the earliest due time of its pending tasks; null when none
 * @param paused whether it delivers nothing, cluster wide
 * @param known whether it has tasks (a topic may be paused before its first task)
 */
public record Topic(String topic, Map<String, Long> counts, Instant oldestDueAt, boolean paused, boolean known) {
    static Topic from(Map<String, Object> m) {
        Map<String, Long> counts = new LinkedHashMap<>();
        Json.obj(m.get("counts")).forEach((k, v) -> counts.put(k, v instanceof Number n ? n.longValue() : 0L));
        return new Topic(Json.str(m, "topic"), counts, Task.time(m.get("oldest_due_at")), Json.bool(m, "paused"), Json.bool(m, "known"));
    }
}
