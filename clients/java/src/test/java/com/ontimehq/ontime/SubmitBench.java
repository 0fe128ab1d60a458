package com.ontimehq.ontime;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java client's submit rate against a running node, sequentially and
 * from several threads, printed as the Go client's baseline
 * (bench/cmd/clientsubmit) prints it; scripts/client-bench.sh runs both on
 * the same node.
 *
 * <pre>java -cp … com.ontimehq.ontime.SubmitBench URL [seconds] [threads] [warmup seconds]</pre>
 */
public final class SubmitBench {
    private SubmitBench() {}

    public static void main(String[] args) throws Exception {
        String url = args.length > 0 ? args[0] : "http://127.0.0.1:7070";
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 5;
        int threads = args.length > 2 ? Integer.parseInt(args[2]) : 16;
        double warmup = args.length > 3 ? Double.parseDouble(args[3]) : 5;
        OntimeClient c = OntimeClient.builder(url).token(System.getenv("ONTIME_TOKEN"))
                .coalesceCalls(Integer.getInteger("bench.coalesceCalls", 1)).build();
        String topic = "bench.client.java." + System.nanoTime();
        TaskRequest req = TaskRequest.of(topic).delay("1h").target("http://127.0.0.1:9/bench").payload(Map.of("n", 1));
        // The JIT compiles the client's paths first: measured rates are those of a running service.
        measure(c, req, warmup, threads);
        measure(c, req, warmup / 2, 1);
        for (int n : new int[] {1, threads}) {
            long calls0 = c.coalescedCalls();
            long cpu0 = cpuNanos();
            long got = measure(c, req, seconds, n);
            long cpu = cpuNanos() - cpu0;
            long batches = c.coalescedCalls() - calls0;
            // cpu_us: the process's CPU time per submit (JIT and GC threads included).
            System.out.printf("RESULT client=java mode=%s threads=%d submits=%d seconds=%.2f rate=%.1f batch_calls=%d cpu_us=%.1f%n",
                    n == 1 ? "sequential" : "concurrent", n, got, seconds, got / seconds, batches, cpu / 1e3 / Math.max(got, 1));
        }
    }

    private static long cpuNanos() {
        if (java.lang.management.ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getProcessCpuTime();
        }
        return 0;
    }

    private static long measure(OntimeClient c, TaskRequest req, double seconds, int n) throws InterruptedException {
        AtomicLong done = new AtomicLong();
        AtomicReference<RuntimeException> err = new AtomicReference<>();
        long stop = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(() -> {
                while (System.nanoTime() < stop) {
                    try {
                        c.submit(req);
                    } catch (RuntimeException e) {
                        err.compareAndSet(null, e);
                        return;
                    }
                    done.incrementAndGet();
                }
            });
            t.start();
            ts.add(t);
        }
        for (Thread t : ts) {
            t.join();
        }
        if (err.get() != null) {
            throw err.get();
        }
        return done.get();
    }
}
