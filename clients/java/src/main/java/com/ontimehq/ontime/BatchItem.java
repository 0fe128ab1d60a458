package com.ontimehq.ontime;

/**
 * One answer of a batch submit, in the order of the tasks sent: the task
 * (created, or found by its key) or the error that kept it from being written.
 *
 * @param task the task; null when error is set
 * @param created true when this submit wrote the task (a single submit's 201)
 * @param error why the task was not written; null on success
 */
public record BatchItem(Task task, boolean created, OntimeException.Api error) {
    /** Whether the task was stored or found. */
    public boolean ok() {
        return error == null;
    }
}
