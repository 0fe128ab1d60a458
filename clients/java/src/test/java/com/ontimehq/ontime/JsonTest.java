package com.ontimehq.ontime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
    @Test
    void roundTrip() {
        String doc = "{\"a\":[1,-2.5,true,false,null,\"x\\\"\\\\\\n\\u00e9\\u2028\"],\"b\":{},\"c\":[],\"big\":123456789012345678901234567890}";
        Object v = Json.parse(doc);
        Map<String, Object> m = Json.obj(v);
        assertEquals(Arrays.asList(1L, -2.5, true, false, null, "x\"\\\n\u00e9\u2028"), m.get("a"));
        assertEquals(new BigInteger("123456789012345678901234567890"), m.get("big"));
        assertEquals(v, Json.parse(Json.write(v)));
        assertEquals("\"\\u0001\\t\\u2028\"", Json.write("\u0001\t\u2028"));
        assertEquals("[1,2.5,\"s\",null]", Json.write(Arrays.asList(1, 2.5, "s", null)));
        assertEquals("3", Json.write(3.0));
        Map<String, Object> ordered = new LinkedHashMap<>();
        ordered.put("z", 1);
        ordered.put("a", Json.raw(" {\"k\": [1]} "));
        assertEquals("{\"z\":1,\"a\":{\"k\": [1]}}", Json.write(ordered));
    }

    @Test
    void refusesWhatIsNotJson() {
        for (String bad : List.of("", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "tru", "1 2", "\"a\nb\"", "-")) {
            assertThrows(Json.ParseException.class, () -> Json.parse(bad), bad);
        }
        assertThrows(IllegalArgumentException.class, () -> Json.raw("{oops}"));
        assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN));
        assertThrows(Json.ParseException.class, () -> Json.parse("[".repeat(1000) + "]".repeat(1000)));
    }

    @Test
    void times() {
        for (String t : List.of("2026-11-26T10:00:00Z", "2026-11-26T10:00:00.1Z", "2026-11-26T10:00:00.123456Z",
                "2026-11-26T10:00:00.123456789Z", "1999-02-28T23:59:59.5Z")) {
            assertEquals(java.time.OffsetDateTime.parse(t).toInstant(), Task.utc(t), t);
        }
        assertEquals(java.time.Instant.parse("2026-11-26T09:00:00Z"), Task.time("2026-11-26T10:00:00+01:00"));
        assertEquals(null, Task.utc("2026-04-31T10:00:00Z"));
        assertEquals(null, Task.time(null));
    }

    @Test
    void goDurations() {
        assertEquals("90s", TaskRequest.goDuration(Duration.ofSeconds(90)));
        assertEquals("1500ms", TaskRequest.goDuration(Duration.ofMillis(1500)));
        assertEquals("1000001ns", TaskRequest.goDuration(Duration.ofNanos(1_000_001)));
    }

    @Test
    void taskRequestBody() {
        String body = TaskRequest.of("t").key("k").delay("1m").payload(Map.of("a", 1)).target("http://x").maxAttempts(3).ifExists("replace").toJson();
        assertEquals("{\"topic\":\"t\",\"key\":\"k\",\"delay\":\"1m\",\"payload\":{\"a\":1},\"target\":\"http://x\",\"max_attempts\":3,\"if_exists\":\"replace\"}", body);
        assertEquals("{\"topic\":\"t\"}", TaskRequest.of("t").toJson());
        assertEquals("{\"topic\":\"t\",\"payload\":null}", TaskRequest.of("t").payload(null).toJson());
    }
}
