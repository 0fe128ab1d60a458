package com.ontimehq.ontime;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Calls to an http:// node as HTTP/1.1 over kept-alive sockets: the
 * default for http:// nodes. The JDK's HttpClient hands every call between
 * its selector thread and the caller's, which cost about five times what
 * the call itself does: against one node on a loaded 2-core machine, a
 * loop of submits made 1,600 calls/s through HttpClient and 7,000–8,000/s
 * over a socket (the Go client: 4,000–5,000/s). The protocol spoken is the
 * small part of HTTP/1.1 a node answers with: a status line, headers, a
 * body of Content-Length bytes, chunked, or up to the close.
 *
 * <p>Idle connections are kept (up to 64) and reused, the most recent
 * first. A reused connection the node closed while it was idle (its
 * http.idle_timeout) fails before any byte of an answer: the node never
 * read the request, so it is sent once more on a new connection, as Go's
 * transport does. The timeout bounds the connect and each read.
 */
final class Http1Transport implements Transport {
    private static final int MAX_IDLE = 64;
    private static final int MAX_HEADER_LINE = 64 << 10;
    private static final int MAX_BODY = 64 << 20;

    private final String host;
    private final int port;
    private final String hostHeader;
    private final ConcurrentLinkedDeque<Conn> idle = new ConcurrentLinkedDeque<>();
    private final AtomicInteger idleCount = new AtomicInteger();

    Http1Transport(String host, int port) {
        this.host = host;
        this.port = port;
        String h = host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
        this.hostHeader = h + ":" + port;
    }

    private static final class Conn {
        final Socket sock;
        final InputStream in;
        final OutputStream out;

        Conn(Socket s) throws IOException {
            this.sock = s;
            this.in = new BufferedInputStream(s.getInputStream(), 16 << 10);
            this.out = new BufferedOutputStream(s.getOutputStream(), 8 << 10);
        }

        void close() {
            try {
                sock.close();
            } catch (IOException ignored) {
                // closing: nothing to do
            }
        }
    }

    /** The node closed a kept-alive connection before answering: the request was not read. */
    private static final class Stale extends IOException {
        Stale(String m) {
            super(m);
        }
    }

    @Override
    public Response send(String method, String target, String body, String authorization, String prefer, Duration timeout) throws IOException {
        byte[] payload = body == null ? null : body.getBytes(StandardCharsets.UTF_8);
        int ms = (int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis()));
        for (int attempt = 0; ; attempt++) {
            Conn c = idle.pollFirst();
            boolean reused = c != null;
            if (reused) {
                idleCount.decrementAndGet();
            } else {
                Socket s = new Socket();
                try {
                    s.setTcpNoDelay(true);
                    s.connect(new InetSocketAddress(host, port), ms);
                    c = new Conn(s);
                } catch (IOException e) {
                    s.close();
                    throw e;
                }
            }
            try {
                c.sock.setSoTimeout(ms);
                try {
                    write(c.out, method, target, payload, authorization, prefer);
                } catch (IOException e) {
                    if (reused) { // closed while idle: the node has not taken the request
                        throw new Stale("connection closed by the node: " + e.getMessage());
                    }
                    throw e;
                }
                Parsed r = read(c.in, reused);
                if (r.keepAlive && idleCount.incrementAndGet() <= MAX_IDLE) {
                    idle.offerFirst(c);
                } else {
                    if (r.keepAlive) {
                        idleCount.decrementAndGet();
                    }
                    c.close();
                }
                return r.response;
            } catch (Stale e) {
                c.close();
                // The others kept as long are likely closed too: start afresh.
                for (Conn old; (old = idle.pollFirst()) != null; ) {
                    idleCount.decrementAndGet();
                    old.close();
                }
                if (attempt == 0) {
                    continue;
                }
                throw e;
            } catch (IOException | RuntimeException e) {
                c.close();
                throw e;
            }
        }
    }

    private void write(OutputStream o, String method, String target, byte[] payload, String authorization, String prefer) throws IOException {
        StringBuilder h = new StringBuilder(192);
        h.append(method).append(' ').append(target).append(" HTTP/1.1\r\nHost: ").append(hostHeader)
                .append("\r\nUser-Agent: ").append(OntimeClient.USER_AGENT).append("\r\n");
        if (authorization != null) {
            h.append("Authorization: ").append(authorization).append("\r\n");
        }
        if (prefer != null) {
            h.append("Prefer: ").append(prefer).append("\r\n");
        }
        if (payload != null) {
            h.append("Content-Type: application/json\r\nContent-Length: ").append(payload.length).append("\r\n");
        } else if (!method.equals("GET") && !method.equals("DELETE")) {
            h.append("Content-Length: 0\r\n");
        }
        h.append("\r\n");
        o.write(h.toString().getBytes(StandardCharsets.UTF_8));
        if (payload != null) {
            o.write(payload);
        }
        o.flush();
    }

    private record Parsed(Response response, boolean keepAlive) {}

    private static Parsed read(InputStream in, boolean reused) throws IOException {
        int first = in.read();
        if (first < 0) {
            if (reused) {
                throw new Stale("connection closed by the node before an answer");
            }
            throw new EOFException("connection closed by the node before an answer");
        }
        String status = line(in, first);
        // "HTTP/1.1 201 Created"
        if (!status.startsWith("HTTP/1.") || status.length() < 12) {
            throw new IOException("not an HTTP/1.x answer: " + status);
        }
        int code;
        try {
            code = Integer.parseInt(status.substring(9, 12));
        } catch (NumberFormatException e) {
            throw new IOException("bad status line: " + status);
        }
        boolean keepAlive = status.startsWith("HTTP/1.1");
        long length = -1;
        boolean chunked = false;
        String retryAfter = "";
        while (true) {
            String h = line(in, in.read());
            if (h.isEmpty()) {
                break;
            }
            int colon = h.indexOf(':');
            if (colon <= 0) {
                continue;
            }
            String name = h.substring(0, colon).trim().toLowerCase(Locale.ROOT);
            String value = h.substring(colon + 1).trim();
            switch (name) {
                case "content-length" -> {
                    try {
                        length = Long.parseLong(value);
                    } catch (NumberFormatException e) {
                        throw new IOException("bad Content-Length: " + value);
                    }
                }
                case "transfer-encoding" -> chunked = value.toLowerCase(Locale.ROOT).contains("chunked");
                case "connection" -> {
                    String v = value.toLowerCase(Locale.ROOT);
                    if (v.contains("close")) {
                        keepAlive = false;
                    } else if (v.contains("keep-alive")) {
                        keepAlive = true;
                    }
                }
                case "retry-after" -> retryAfter = value;
                default -> {
                    // not needed
                }
            }
        }
        byte[] body;
        if (code == 204 || code == 304 || (code >= 100 && code < 200)) {
            body = new byte[0];
        } else if (chunked) {
            body = chunked(in);
        } else if (length >= 0) {
            if (length > MAX_BODY) {
                throw new IOException("answer of " + length + " bytes is over " + MAX_BODY);
            }
            body = in.readNBytes((int) length);
            if (body.length != length) {
                throw new EOFException("answer cut after " + body.length + " of " + length + " bytes");
            }
        } else {
            body = in.readNBytes(MAX_BODY); // up to the close
            keepAlive = false;
        }
        return new Parsed(new Response(code, new String(body, StandardCharsets.UTF_8), retryAfter), keepAlive);
    }

    private static byte[] chunked(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream(4096);
        while (true) {
            String size = line(in, in.read());
            int semi = size.indexOf(';');
            long n;
            try {
                n = Long.parseLong((semi >= 0 ? size.substring(0, semi) : size).trim(), 16);
            } catch (NumberFormatException e) {
                throw new IOException("bad chunk size: " + size);
            }
            if (n == 0) {
                while (!line(in, in.read()).isEmpty()) {
                    // trailers: ignored
                }
                return out.toByteArray();
            }
            if (out.size() + n > MAX_BODY) {
                throw new IOException("answer over " + MAX_BODY + " bytes");
            }
            byte[] b = in.readNBytes((int) n);
            if (b.length != n) {
                throw new EOFException("answer cut inside a chunk");
            }
            out.write(b);
            if (!line(in, in.read()).isEmpty()) {
                throw new IOException("no CRLF after a chunk");
            }
        }
    }

    /** One line (without CRLF) whose first byte, c, was read already. */
    private static String line(InputStream in, int c) throws IOException {
        StringBuilder b = new StringBuilder(64);
        while (true) {
            if (c < 0) {
                throw new EOFException("answer cut inside its headers");
            }
            if (c == '\n') {
                int n = b.length();
                if (n > 0 && b.charAt(n - 1) == '\r') {
                    b.setLength(n - 1);
                }
                return b.toString();
            }
            if (b.length() >= MAX_HEADER_LINE) {
                throw new IOException("header line over " + MAX_HEADER_LINE + " bytes");
            }
            b.append((char) c); // headers are ASCII (ISO-8859-1 at most)
            c = in.read();
        }
    }
}
