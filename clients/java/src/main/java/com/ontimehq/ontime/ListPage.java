package com.ontimehq.ontime;

import java.util.List;

/**
 * One page of tasks in creation order.
 *
 * @param tasks the tasks
 * @param nextCursor asks for the next page ({@link ListOptions#cursor}); "" on the last page
 */
public record ListPage(List<Task> tasks, String nextCursor) {
    /** Whether another page follows. */
    public boolean hasMore() {
        return !nextCursor.isEmpty();
    }
}
