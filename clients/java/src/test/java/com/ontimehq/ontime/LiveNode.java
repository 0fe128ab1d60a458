package com.ontimehq.ontime;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * An {@code ontime serve} process for the tests: the binary named by the
 * system property ontime.bin or ONTIME_BIN (make java-test builds it), on a
 * free loopback port, with a private SQLite data directory, API tokens and a
 * webhook secret.
 */
final class LiveNode implements AutoCloseable {
    static final String TOKEN = "java-client-test-token";
    static final String READ_TOKEN = "java-client-read-token";
    static final String SECRET = "java-client-webhook-secret";

    final String url;
    private final Process proc;
    private final Path dir;

    private LiveNode(String url, Process proc, Path dir) {
        this.url = url;
        this.proc = proc;
        this.dir = dir;
    }

    static LiveNode start() throws IOException {
        String bin = System.getProperty("ontime.bin", "");
        if (bin.isEmpty() || bin.startsWith("${")) { // Maven passes ${env.ONTIME_BIN} as it is when unset
            bin = System.getenv("ONTIME_BIN");
        }
        if (bin == null || bin.isEmpty() || !Files.isExecutable(Path.of(bin))) {
            throw new IllegalStateException("set -Dontime.bin or ONTIME_BIN to an ontime binary (make java-test builds one); got " + bin);
        }
        Path dir = Files.createTempDirectory("ontime-java-test");
        Path cfg = dir.resolve("ontime.yaml");
        Files.writeString(cfg, String.join("\n",
                "listen: 127.0.0.1:0",
                "data_dir: " + dir.resolve("data"),
                "log_level: error",
                "store:",
                "  tables: 2",
                "auth:",
                "  tokens:",
                "    - name: java-test",
                "      token_env: ONTIME_JAVA_TEST_TOKEN",
                "      role: admin",
                "    - name: java-read",
                "      token_env: ONTIME_JAVA_READ_TOKEN",
                "      role: read",
                "delivery:",
                "  webhook_secret: " + SECRET,
                "  retry_base: 100ms",
                ""));
        ProcessBuilder pb = new ProcessBuilder(bin, "serve", "--config", cfg.toString());
        pb.environment().put("ONTIME_JAVA_TEST_TOKEN", TOKEN);
        pb.environment().put("ONTIME_JAVA_READ_TOKEN", READ_TOKEN);
        pb.redirectError(dir.resolve("serve.log").toFile());
        Process p = pb.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine(); // "ontime listening on http://127.0.0.1:PORT"
        if (line == null || !line.startsWith("ontime listening on ")) {
            p.destroyForcibly();
            throw new IllegalStateException("ontime serve did not start: " + line + "\n" + Files.readString(dir.resolve("serve.log")));
        }
        // Keep reading stdout so the process never blocks on a full pipe.
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // discard
                }
            } catch (IOException ignored) {
                // the process ended
            }
        }, "ontime-serve-stdout");
        drain.setDaemon(true);
        drain.start();
        return new LiveNode(line.substring("ontime listening on ".length()).strip(), p, dir);
    }

    OntimeClient client() {
        return OntimeClient.builder(url).token(TOKEN).build();
    }

    @Override
    public void close() throws IOException {
        proc.destroy();
        try {
            if (!proc.waitFor(30, TimeUnit.SECONDS)) {
                proc.destroyForcibly();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }
}
