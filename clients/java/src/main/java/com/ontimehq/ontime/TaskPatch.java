package com.ontimehq.ontime;

import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/** A change to a pending or claimed task: the fields set; the others stay as they are. */
public final class TaskPatch {
    private final Map<String, Object> fields = new LinkedHashMap<>();

    /** An empty patch; set at least one field. */
    public static TaskPatch create() {
        return new TaskPatch();
    }

    public TaskPatch dueAt(Instant at) {
        fields.put("due_at", at.toString());
        return this;
    }

    public TaskPatch delay(Duration d) {
        fields.put("delay", TaskRequest.goDuration(d));
        return this;
    }

    public TaskPatch delay(String d) {
        fields.put("delay", d);
        return this;
    }

    public TaskPatch payload(Object payload) {
        fields.put("payload", payload);
        return this;
    }

    public TaskPatch target(String target) {
        fields.put("target", target);
        return this;
    }

    public TaskPatch maxAttempts(int n) {
        fields.put("max_attempts", n);
        return this;
    }

    String toJson() {
        return Json.write(fields);
    }
}
