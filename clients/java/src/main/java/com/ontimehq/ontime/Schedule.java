package com.ontimehq.ontime;

import java.time.Instant;
import java.util.Map;

/**
 * A stored schedule.
 *
 * @param name its name
 * @param cron its expression (5 fields, 6 with seconds first, or @every 10s, @hourly…)
 * @param timeZone the IANA zone the expression is read in
 * @param task the task each fire time becomes
 * @param misfire skip or fire_once
 * @param paused whether it fires
 * @param nextFireAt the first fire time after now; null when paused or never again
 * @param scheduledUntil every fire time up to it has been made into a task or passed over
 * @param createdAt when it was created
 * @param updatedAt when it last changed
 */
public record Schedule(String name, String cron, String timeZone, ScheduleTask task, String misfire, boolean paused,
        Instant nextFireAt, Instant scheduledUntil, Instant createdAt, Instant updatedAt) {
    static Schedule from(Map<String, Object> m) {
        return new Schedule(Json.str(m, "name"), Json.str(m, "cron"), Json.str(m, "time_zone"),
                ScheduleTask.from(Json.obj(m.get("task"))), Json.str(m, "misfire"), Json.bool(m, "paused"),
                Task.time(m.get("next_fire_at")), Task.time(m.get("scheduled_until")),
                Task.time(m.get("created_at")), Task.time(m.get("updated_at")));
    }
}
