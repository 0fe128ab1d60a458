package com.ontimehq.ontime;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Concurrent submits of one client share POST /v1/tasks:batch calls, as the
 * Go client's do (client/coalesce.go). No background thread, no timed
 * linger: the first submit to find no call in flight sends at once — alone,
 * as the plain POST /v1/tasks, when it is alone — and submits arriving while
 * a call is in flight queue; when the call returns, the first of them sends
 * everything queued by the time it runs (up to 1,000 tasks and 1 MiB) in
 * one batch call.
 * A sequential caller pays nothing, and 16 threads submitting in a loop send
 * batches of about 15.
 *
 * <p>Unlike Go's goroutines, each waiting submit is an OS thread whose
 * wake-up costs a trip through the scheduler, so a finished call hands on
 * to the next leader before it wakes its group, and the next leader waits
 * (yielding, up to 200 µs) until every submit under way has queued rather
 * than until the queue stops growing between two yields: on a loaded
 * machine a yield often returns before any woken thread has run.
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
    /**
     * How long a leader in a crowd waits for the submits under way to queue:
     * threads the last call answered are woken one by one (OS threads, each a
     * scheduler's wake-up), so on a loaded machine some take a while.
     */
    private static final long WAIT_NANOS = 200_000;

    private final OntimeClient client;
    volatile boolean off;
    final AtomicLong batches = new AtomicLong();

    private final Object mu = new Object();
    private final int calls; // batch calls in flight at most
    // Calls in flight, each from its leader's making until it hands on;
    // written under mu, read without it by a waiting leader.
    private volatile int busy;
    private final ArrayDeque<Pending> queue = new ArrayDeque<>();
    private final AtomicInteger queued = new AtomicInteger(); // queue.size(), read without mu
    private final AtomicInteger inside = new AtomicInteger(); // submits under way

    Coalescer(OntimeClient client, int calls) {
        this.client = client;
        this.calls = calls;
    }

    private static final class Pending {
        final String body;
        final boolean keyed;
        // Completed with true to lead a call, or false once the fields below are set.
        final CompletableFuture<Boolean> wake = new CompletableFuture<>();
        SubmitResult result;
        RuntimeException error;
        boolean alone; // the batch was refused whole: submit alone

        Pending(String body, boolean keyed) {
            this.body = body;
            this.keyed = keyed;
        }
    }

    SubmitResult submit(String body, boolean keyed) {
        inside.incrementAndGet();
        try {
            Pending p = new Pending(body, keyed);
            boolean lead;
            synchronized (mu) {
                lead = busy < calls;
                if (lead) {
                    busy++;
                } else {
                    queue.add(p);
                    queued.incrementAndGet();
                }
            }
            if (!lead) {
                lead = p.wake.join();
            }
            if (lead) {
                lead(p);
            }
            if (p.alone) {
                return client.submitOne(p.body, p.keyed);
            }
            if (p.error != null) {
                throw p.error;
            }
            return p.result;
        } finally {
            inside.decrementAndGet();
        }
    }

    /**
     * Makes one call: p's task and everything queued (within the bounds);
     * then hands on and answers the others. A leader in a crowd first
     * yields its processor until the threads the last call answered reach
     * the queue (at most WAIT_NANOS): the group is taken when the leader
     * runs, not when it is made leader.
     */
    private void lead(Pending p) {
        if (inside.get() > 1) {
            // Every submit under way that leads no call is either queued
            // already or on its way to the queue (answered by the last
            // call, or just arriving): wait for those, yielding, for at
            // most WAIT_NANOS.
            long until = System.nanoTime() + WAIT_NANOS;
            while (queued.get() < inside.get() - busy && queued.get() < MAX_TASKS - 1 && System.nanoTime() < until) {
                Thread.yield();
            }
        }
        List<Pending> group = new ArrayList<>();
        group.add(p);
        synchronized (mu) {
            int chars = 12 + p.body.length() + 1; // {"tasks":[…]}
            while (!queue.isEmpty() && group.size() < MAX_TASKS && chars + queue.peek().body.length() + 1 <= MAX_CHARS) {
                Pending x = queue.poll();
                chars += x.body.length() + 1;
                group.add(x);
            }
            queued.addAndGet(1 - group.size());
        }
        try {
            if (group.size() == 1) {
                try {
                    p.result = client.submitOne(p.body, p.keyed);
                } catch (RuntimeException e) {
                    p.error = e;
                }
            } else {
                send(group);
            }
        } finally {
            // The next leader first: its call goes out while the group's
            // threads are woken (each an OS thread's wake-up, tens of µs
            // on a loaded machine, and each may preempt this one).
            handOn();
            for (int i = 1; i < group.size(); i++) {
                group.get(i).wake.complete(false);
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

    /** Makes the first queued submit the next leader, or frees the call when none waits. */
    private void handOn() {
        Pending next;
        synchronized (mu) {
            next = queue.poll();
            if (next == null) {
                busy--;
                return;
            }
            queued.decrementAndGet();
        }
        next.wake.complete(true);
    }
}
