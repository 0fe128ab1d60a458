package com.ontimehq.ontime;

/**
 * Every error the client throws. An answer of the API is an {@link Api} (a
 * subclass per error code, so programs catch what they handle); a call that
 * got no answer is a {@link Network}.
 */
public class OntimeException extends RuntimeException {
    OntimeException(String message, Throwable cause) {
        super(message, cause);
    }

    /**
     * An error answer of the API: {"error": {"code", "field", "message"}}.
     * The set of codes is closed; {@link #code} is "" when the answer was not
     * the API's error envelope (a proxy's error page).
     */
    public static class Api extends OntimeException {
        private final int status;
        private final String code;
        private final String field;
        private final String detail;

        Api(int status, String code, String field, String detail) {
            super(describe(status, code, field, detail), null);
            this.status = status;
            this.code = code;
            this.field = field;
            this.detail = detail;
        }

        /** The HTTP status. */
        public int status() {
            return status;
        }

        /** invalid, too_large, not_found, conflict, unauthorized, forbidden, unavailable, internal; or "". */
        public String code() {
            return code;
        }

        /** The input at fault (a JSON field, a query parameter, "id"); "" when none. */
        public String field() {
            return field;
        }

        /** The message, for people. */
        public String detail() {
            return detail;
        }

        private static String describe(int status, String code, String field, String detail) {
            String s = "HTTP " + status + (code.isEmpty() ? "" : ", " + code);
            return field.isEmpty() ? detail + " (" + s + ")" : field + ": " + detail + " (" + s + ")";
        }

        /** The exception for an answer with this status and code. */
        static Api of(int status, String code, String field, String detail) {
            switch (code.isEmpty() ? codeOf(status) : code) {
                case "invalid":
                    return new Invalid(status, code, field, detail);
                case "too_large":
                    return new TooLarge(status, code, field, detail);
                case "not_found":
                    return new NotFound(status, code, field, detail);
                case "conflict":
                    return new Conflict(status, code, field, detail);
                case "unauthorized":
                    return new Unauthorized(status, code, field, detail);
                case "forbidden":
                    return new Forbidden(status, code, field, detail);
                case "unavailable":
                    return new Unavailable(status, code, field, detail);
                case "internal":
                    return new Internal(status, code, field, detail);
                default:
                    return new Api(status, code, field, detail);
            }
        }

        /** The status a code comes with: a batch item's error has a code only. */
        static int statusOf(String code) {
            switch (code) {
                case "invalid":
                    return 400;
                case "too_large":
                    return 413;
                case "not_found":
                    return 404;
                case "conflict":
                    return 409;
                case "unauthorized":
                    return 401;
                case "forbidden":
                    return 403;
                case "unavailable":
                    return 503;
                default:
                    return 500;
            }
        }

        private static String codeOf(int status) {
            switch (status) {
                case 400:
                case 405:
                    return "invalid";
                case 413:
                    return "too_large";
                case 404:
                    return "not_found";
                case 409:
                    return "conflict";
                case 401:
                    return "unauthorized";
                case 403:
                    return "forbidden";
                case 503:
                    return "unavailable";
                default:
                    return status >= 500 ? "internal" : "";
            }
        }
    }

    /** 400 (and 405): the request is wrong as sent; sending it again fails again. */
    public static final class Invalid extends Api {
        Invalid(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 413: the body or the payload is over the limit. */
    public static final class TooLarge extends Api {
        TooLarge(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 404: no task (schedule, topic key…) by that name. */
    public static final class NotFound extends Api {
        NotFound(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 409: the state forbids the change (cancel of a running task, a schedule name in use). */
    public static final class Conflict extends Api {
        Conflict(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 401: no or bad token. */
    public static final class Unauthorized extends Api {
        Unauthorized(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 403: the token does not allow this. */
    public static final class Forbidden extends Api {
        Forbidden(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 503: the node is starting, stopping or cannot reach its store (after the client's retries). */
    public static final class Unavailable extends Api {
        Unavailable(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /** 500: a failure on the node's side; its log has the cause. */
    public static final class Internal extends Api {
        Internal(int status, String code, String field, String detail) {
            super(status, code, field, detail);
        }
    }

    /**
     * The call got no answer (connection refused or reset, a timeout), after
     * the client's retries. Whether a submit's task was written is unknown:
     * a keyed submit can be sent again safely.
     */
    public static final class Network extends OntimeException {
        Network(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The answer could not be read as the API's JSON. */
    public static final class Decode extends OntimeException {
        Decode(String message, Throwable cause) {
            super(message, cause);
        }
    }
}
