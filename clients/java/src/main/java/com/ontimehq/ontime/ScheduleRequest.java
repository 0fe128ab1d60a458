package com.ontimehq.ontime;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A schedule to create or put:
 *
 * <pre>{@code
 * ScheduleRequest.of("nightly-report", "0 2 * * *",
 *         new ScheduleTask("reports.nightly", Map.of("kind", "daily"), "https://reports.example/run", 0))
 *     .timeZone("Europe/Paris");
 * }</pre>
 */
public final class ScheduleRequest {
    private final String name;
    private final String cron;
    private final ScheduleTask task;
    private String timeZone = "";
    private String misfire = "";
    private boolean paused;

    private ScheduleRequest(String name, String cron, ScheduleTask task) {
        this.name = name;
        this.cron = cron;
        this.task = task;
    }

    /** A schedule named name firing on cron, each fire time making task. */
    public static ScheduleRequest of(String name, String cron, ScheduleTask task) {
        return new ScheduleRequest(name, cron, task);
    }

    /** The IANA time zone the expression is read in; default UTC. */
    public ScheduleRequest timeZone(String tz) {
        this.timeZone = tz;
        return this;
    }

    /** "skip" (default) or "fire_once": what a schedule does with fire times it missed. */
    public ScheduleRequest misfire(String policy) {
        this.misfire = policy;
        return this;
    }

    /** Created paused. */
    public ScheduleRequest paused(boolean paused) {
        this.paused = paused;
        return this;
    }

    public String name() {
        return name;
    }

    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        if (name != null && !name.isEmpty()) {
            m.put("name", name);
        }
        m.put("cron", cron);
        if (!timeZone.isEmpty()) {
            m.put("time_zone", timeZone);
        }
        m.put("task", task.toMap());
        if (!misfire.isEmpty()) {
            m.put("misfire", misfire);
        }
        if (paused) {
            m.put("paused", true);
        }
        return Json.write(m);
    }
}
