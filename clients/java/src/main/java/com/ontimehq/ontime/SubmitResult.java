package com.ontimehq.ontime;

/**
 * A submit's answer.
 *
 * @param task the task stored, or the one its topic and key named already
 * @param created true when this submit wrote it (HTTP 201); false when the
 *     key named a task (nothing was written, or with ifExists "replace" the
 *     live task was updated). A keyed submit retried after a network error
 *     may say false for a task its first attempt wrote.
 */
public record SubmitResult(Task task, boolean created) {}
