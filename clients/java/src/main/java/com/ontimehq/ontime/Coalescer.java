package com.ontimehq.ontime;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Concurrent submits of one client share POST /v1/tasks:batch calls, as the
 * Go client's do (client/coalesce.go). No background thread, no timed
 * linger: the first submit to find no call in flight sends at once — alone,
 * as the plain POST /v1/tasks, when it is alone — and submits arriving while
 * a call is in flight queue; when the call returns, the first of them sends
 * everything queued by then (up to 1,000 tasks and 1 MiB) in one batch call.
 * A sequential caller pays nothing, and 16 threads submitting in a loop send
 * batches of about 15.
 *
 * <p>Each caller gets what a single submit would have given it: its task
 * and created, or its item's error as the exception a single submit's
 * answer makes. A batch the node refuses whole before writing anything
 * (400, 401, 403, 404, 405, 413) is sent again as single submits, each by
 * its own caller; 404 or 405 (no batch route: a proxy in front) turns
 * coalescing off. A network error or a 5xx is every caller's error, as it
 * would have been each single submit's.
 */
final class Coalescer {
    /** Tasks whose JSON is longer are sent alone (as the Go client's 64 KiB). */
    static final int SOLO_CHARS = 64 << 10;
    private static final int MAX_TASKS = OntimeClient.MAX_BATCH;
    private static final int MAX_CHARS = 1 << 20;

    private final OntimeClient client;
    volatile boolean off;
    final AtomicLong batches = new AtomicLong();

    private final Object mu = new Object();
    private boolean busy; // a call is in flight, from its leader's start until it hands on
    private final ArrayDeque<Pending> queue = new ArrayDeque<>();

    Coalescer(OntimeClient client) {
        this.client = client;
    }

    private static final class Pending {
        final String body;
        final boolean keyed;
        // Completed with a group to lead, or with null once the fields below are set.
        final CompletableFuture<List<Pending>> wake = new CompletableFuture<>();
        SubmitResult result;
        RuntimeException error;
        boolean alone; // the batch was refused whole: submit alone

        Pending(String body, boolean keyed) {
            this.body = body;
            this.keyed = keyed;
        }
    }

    SubmitResult submit(String body, boolean keyed) {
        Pending p = new Pending(body, keyed);
        List<Pending> group = null;
        synchronized (mu) {
            if (!busy) {
                busy = true;
                group = List.of(p);
            } else {
                queue.add(p);
            }
        }
        if (group == null) {
            group = p.wake.join();
        }
        if (group != null) {
            lead(group);
        }
        if (p.alone) {
            return client.submitOne(p.body, p.keyed);
        }
        if (p.error != null) {
            throw p.error;
        }
        return p.result;
    }

    /** Sends group (its first is the caller), hands on, and answers the others. */
    private void lead(List<Pending> group) {
        try {
            if (group.size() == 1) {
                Pending p = group.get(0);
                try {
                    p.result = client.submitOne(p.body, p.keyed);
                } catch (RuntimeException e) {
                    p.error = e;
                }
                return;
            }
            send(group);
        } finally {
            handOn();
            for (int i = 1; i < group.size(); i++) {
                group.get(i).wake.complete(null);
            }
        }
    }

    private void send(List<Pending> group) {
        List<String> bodies = new ArrayList<>(group.size());
        boolean keyed = true;
        for (Pending p : group) {
            bodies.add(p.body);
            keyed &= p.keyed;
        }
        batches.incrementAndGet();
        try {
            List<BatchItem> items = client.batchCall(bodies, keyed);
            for (int i = 0; i < group.size(); i++) {
                BatchItem it = items.get(i);
                if (it.error() != null) {
                    group.get(i).error = it.error();
                } else {
                    group.get(i).result = new SubmitResult(it.task(), it.created());
                }
            }
        } catch (OntimeException.Api e) {
            int s = e.status();
            if (s == 400 || s == 401 || s == 403 || s == 404 || s == 405 || s == 413) {
                if (s == 404 || s == 405) {
                    off = true;
                }
                for (Pending p : group) {
                    p.alone = true;
                }
            } else {
                for (Pending p : group) {
                    p.error = e;
                }
            }
        } catch (RuntimeException e) {
            for (Pending p : group) {
                p.error = e;
            }
        }
    }

    /** Hands the queue to its first submit, or frees the call slot when none waits. */
    private void handOn() {
        List<Pending> next;
        synchronized (mu) {
            if (queue.isEmpty()) {
                busy = false;
                return;
            }
            next = new ArrayList<>(Math.min(queue.size(), MAX_TASKS));
            int chars = 12; // {"tasks":[]}
            while (!queue.isEmpty() && next.size() < MAX_TASKS && (next.isEmpty() || chars + queue.peek().body.length() + 1 <= MAX_CHARS)) {
                Pending p = queue.poll();
                chars += p.body.length() + 1;
                next.add(p);
            }
        }
        next.get(0).wake.complete(next);
    }
}
