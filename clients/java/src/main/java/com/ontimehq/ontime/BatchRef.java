package com.ontimehq.ontime;

/**
 * One answer of {@link OntimeClient#submitBatchMinimal}, in the order of the
 * tasks sent: the task's ID and status (created, or found by its key), or
 * the error that kept it from being written.
 *
 * @param id the task's ID; "" when error is set
 * @param status the task's status (pending, claimed, running, done, dead, cancelled); "" when error is set
 * @param created true when this submit wrote the task (a single submit's 201)
 * @param error why the task was not written; null on success
 */
public record BatchRef(String id, String status, boolean created, OntimeException.Api error) {
    /** Whether the task was stored or found. */
    public boolean ok() {
        return error == null;
    }
}
