package com.ontimehq.ontime;

import java.time.Instant;

/** Filters of {@link OntimeClient#list}; unset ones do not filter. */
public final class ListOptions {
    String topic = "";
    String status = "";
    int limit;
    String cursor = "";
    Instant dueAfter;
    Instant dueBefore;

    public static ListOptions create() {
        return new ListOptions();
    }

    public ListOptions topic(String topic) {
        this.topic = topic;
        return this;
    }

    /** pending, claimed, running, done, dead or cancelled. */
    public ListOptions status(String status) {
        this.status = status;
        return this;
    }

    /** Tasks per page; 0: the node's default. */
    public ListOptions limit(int limit) {
        this.limit = limit;
        return this;
    }

    /** The previous page's {@link ListPage#nextCursor}. */
    public ListOptions cursor(String cursor) {
        this.cursor = cursor;
        return this;
    }

    /** Tasks due at or after this time. */
    public ListOptions dueAfter(Instant t) {
        this.dueAfter = t;
        return this;
    }

    /** Tasks due before this time. */
    public ListOptions dueBefore(Instant t) {
        this.dueBefore = t;
        return this;
    }
}
