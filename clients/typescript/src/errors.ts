// The errors the client throws. An answer of the API's error envelope
// ({"error": {"code", "field", "message"}}) becomes the APIError subclass
// of its code, so callers branch with instanceof; a node that could not be
// reached (or whose answer was lost) after the retries is a NetworkError.

import type { components } from "./openapi.js";

/** The error codes of API v1; the set is closed. */
export type ErrorCode = components["schemas"]["ErrorDetail"]["code"];

/** Every error this client throws. */
export class OntimeError extends Error {
  override name = "OntimeError";
}

/** An error answer of the API (4xx or 5xx). */
export class APIError extends OntimeError {
  override name = "APIError";
  /** The HTTP status (for a batch entry: the status its code comes with). */
  readonly status: number;
  /** The error code; undefined when the answer was not the API's envelope (a proxy's page). */
  readonly code: ErrorCode | undefined;
  /** The input at fault, when one is (a JSON field, a query parameter, "id"). */
  readonly field: string | undefined;
  /** The X-Request-Id of the answer: the node's log lines carry it. */
  readonly requestId: string | undefined;
  /** A 503's Retry-After, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(status: number, code: ErrorCode | undefined, message: string, field?: string, requestId?: string, retryAfterMs?: number) {
    super(field ? `${field}: ${message} (HTTP ${status}${code ? ", " + code : ""})` : `${message} (HTTP ${status}${code ? ", " + code : ""})`);
    this.status = status;
    this.code = code;
    this.field = field;
    this.requestId = requestId;
    this.retryAfterMs = retryAfterMs;
  }
}

/** 400 (and 405): the request is wrong as sent; sending it again fails again. */
export class InvalidError extends APIError {
  override name = "InvalidError";
}
/** 401: no or bad token. */
export class UnauthorizedError extends APIError {
  override name = "UnauthorizedError";
}
/** 403: the token does not allow this. */
export class ForbiddenError extends APIError {
  override name = "ForbiddenError";
}
/** 404: no such task, schedule, job or route. */
export class NotFoundError extends APIError {
  override name = "NotFoundError";
}
/** 409: the state forbids the change (cancel of a running task, …). */
export class ConflictError extends APIError {
  override name = "ConflictError";
}
/** 413: the body or the payload is over the limit. */
export class TooLargeError extends APIError {
  override name = "TooLargeError";
}
/** 500: a failure on the node's side; its log has the cause. */
export class InternalError extends APIError {
  override name = "InternalError";
}
/** 503: the node is starting, stopping or cannot reach its store (after the client's retries). */
export class UnavailableError extends APIError {
  override name = "UnavailableError";
}

/** The node could not be reached, or its answer was lost or timed out, after the retries. */
export class NetworkError extends OntimeError {
  override name = "NetworkError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

const byCode: Record<ErrorCode, typeof APIError> = {
  invalid: InvalidError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  too_large: TooLargeError,
  internal: InternalError,
  unavailable: UnavailableError,
};

const byStatus: Record<number, typeof APIError> = {
  400: InvalidError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  405: InvalidError,
  409: ConflictError,
  413: TooLargeError,
  500: InternalError,
  503: UnavailableError,
};

/** The status a single call's answer comes with for an error of this code. */
export function statusOf(code: ErrorCode | undefined): number {
  switch (code) {
    case "invalid":
      return 400;
    case "unauthorized":
      return 401;
    case "forbidden":
      return 403;
    case "not_found":
      return 404;
    case "conflict":
      return 409;
    case "too_large":
      return 413;
    case "unavailable":
      return 503;
    default:
      return 500;
  }
}

/** makeError builds the APIError subclass for an answer. */
export function makeError(status: number, code: ErrorCode | undefined, message: string, field?: string, requestId?: string, retryAfterMs?: number): APIError {
  const cls = (code && byCode[code]) || byStatus[status] || APIError;
  return new cls(status, code, message, field, requestId, retryAfterMs);
}
