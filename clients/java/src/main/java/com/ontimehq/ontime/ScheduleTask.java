package com.ontimehq.ontime;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The task each fire time of a schedule becomes.
 *
 * @param topic its topic
 * @param payload its payload (parsed JSON, or {@link Json.Raw}); null for none
 * @param target its target; "" for a Go handler's topic
 * @param maxAttempts attempts before it is dead; 0: the node's default
 */
public record ScheduleTask(String topic, Object payload, String target, int maxAttempts) {
    static ScheduleTask from(Map<String, Object> m) {
        return new ScheduleTask(Json.str(m, "topic"), m.get("payload"), Json.str(m, "target"), (int) Json.num(m, "max_attempts"));
    }

    Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", topic);
        if (payload != null) {
            m.put("payload", payload);
        }
        if (target != null && !target.isEmpty()) {
            m.put("target", target);
        }
        if (maxAttempts != 0) {
            m.put("max_attempts", maxAttempts);
        }
        return m;
    }
}
