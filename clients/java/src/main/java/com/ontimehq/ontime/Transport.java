package com.ontimehq.ontime;

import java.io.IOException;
import java.time.Duration;

/** How the client sends a call: the JDK's HttpClient, or plain HTTP/1.1 over sockets (Http1). */
interface Transport {
    /** One answer: status, body, and the Retry-After header ("" when absent). */
    record Response(int status, String body, String retryAfter) {}

    /**
     * Sends one request: target is the path and query; body null for none;
     * authorization null for none; prefer, the Prefer header (RFC 7240),
     * null for none. An IOException means no answer came.
     */
    Response send(String method, String target, String body, String authorization, String prefer, Duration timeout)
            throws IOException, InterruptedException;
}
