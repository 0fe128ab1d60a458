package com.ontimehq.ontime;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/** Calls over java.net.http.HttpClient: https:// nodes, and any node when the program gives its own HttpClient. */
final class JdkTransport implements Transport {
    private final String base;
    private final HttpClient http;

    JdkTransport(String base, HttpClient http) {
        this.base = base;
        this.http = http;
    }

    @Override
    public Response send(String method, String target, String body, String authorization, String prefer, Duration timeout)
            throws IOException, InterruptedException {
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(base + target)).timeout(timeout)
                .header("User-Agent", OntimeClient.USER_AGENT)
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (body != null) {
            rb.header("Content-Type", "application/json");
        }
        if (authorization != null) {
            rb.header("Authorization", authorization);
        }
        if (prefer != null) {
            rb.header("Prefer", prefer);
        }
        HttpResponse<String> r = http.send(rb.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        return new Response(r.statusCode(), r.body(), r.headers().firstValue("Retry-After").orElse(""));
    }
}
