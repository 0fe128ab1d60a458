package com.ontimehq.ontime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** The socket transport against a scripted server: framing, keep-alive, a connection closed while idle. */
class Http1TransportTest {
    /** Serves one connection per script entry: each answers the requests of its connection, then closes it. */
    private static ServerSocket serve(List<List<String>> perConnection, List<String> requests) throws IOException {
        ServerSocket ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(() -> {
            for (List<String> answers : perConnection) {
                try (Socket s = ss.accept()) {
                    BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.ISO_8859_1));
                    OutputStream out = s.getOutputStream();
                    for (String answer : answers) {
                        String line = in.readLine();
                        requests.add(line);
                        int len = 0;
                        for (String h; (h = in.readLine()) != null && !h.isEmpty(); ) {
                            if (h.toLowerCase().startsWith("content-length:")) {
                                len = Integer.parseInt(h.substring(15).trim());
                            }
                        }
                        in.skip(len);
                        out.write(answer.getBytes(StandardCharsets.ISO_8859_1));
                        out.flush();
                    }
                } catch (IOException e) {
                    return;
                }
            }
        });
        t.setDaemon(true);
        t.start();
        return ss;
    }

    @Test
    void framingAndIdleClose() throws Exception {
        List<String> requests = new CopyOnWriteArrayList<>();
        String task = "{\"id\":\"t1\",\"topic\":\"x\",\"status\":\"pending\",\"due_at\":\"2026-11-26T10:00:00Z\"}";
        try (ServerSocket ss = serve(List.of(
                // Connection 1: a Content-Length answer, then a chunked one; then the server closes it (idle).
                List.of("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: " + task.length() + "\r\n\r\n" + task,
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(10) + "\r\n" + task.substring(0, 10)
                                + "\r\n" + Integer.toHexString(task.length() - 10) + ";ext=1\r\n" + task.substring(10) + "\r\n0\r\n\r\n"),
                // Connection 2: the call the closed connection could not carry, answered to its close.
                List.of("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n{\"error\":{\"code\":\"not_found\",\"message\":\"no task\"}}")),
                requests)) {
            OntimeClient c = OntimeClient.builder("http://127.0.0.1:" + ss.getLocalPort()).retries(0).build();
            assertEquals("t1", c.submit(TaskRequest.of("x")).task().id());
            assertEquals("t1", c.get("01KMXYZ0000000000000000000").id());
            Thread.sleep(200); // the server has closed connection 1 by now
            // Sent on the closed connection first, then (not read by anyone) again on a new one.
            OntimeException.NotFound nf = assertThrows(OntimeException.NotFound.class, () -> c.submit(TaskRequest.of("y")));
            assertEquals("no task", nf.detail());
            assertEquals(List.of("POST /v1/tasks HTTP/1.1", "GET /v1/tasks/01KMXYZ0000000000000000000 HTTP/1.1", "POST /v1/tasks HTTP/1.1"), requests);
        }
    }

    @Test
    void timeoutIsANetworkError() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) { // accepts, never answers
            OntimeClient c = OntimeClient.builder("http://127.0.0.1:" + ss.getLocalPort()).timeout(Duration.ofMillis(300)).retries(0).build();
            assertThrows(OntimeException.Network.class, () -> c.get("x"));
        }
    }
}
