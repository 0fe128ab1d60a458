"""The errors the client raises.

An answer of the API's error envelope ({"error": {"code", "field",
"message"}}) becomes the APIError subclass of its code, so callers catch
what they handle; a node that could not be reached, or whose answer was
lost, after the retries is a NetworkError.
"""
from __future__ import annotations

from typing import Dict, Optional, Type


class OntimeError(Exception):
    """Every error this client raises."""


class APIError(OntimeError):
    """An error answer of the API (4xx or 5xx)."""

    def __init__(
        self,
        status: int,
        code: Optional[str],
        message: str,
        field: Optional[str] = None,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        """The HTTP status (for a batch entry: the status its code comes with)."""
        self.code = code
        """invalid, unauthorized, forbidden, not_found, conflict, too_large, internal, unavailable; None when the answer was not the API's envelope (a proxy's page)."""
        self.message = message
        self.field = field
        """The input at fault, when one is (a JSON field, a query parameter, "id")."""
        self.request_id = request_id
        """The answer's X-Request-Id: the node's log lines carry it."""
        self.retry_after = retry_after
        """A 503's Retry-After, in seconds."""
        what = f"HTTP {status}" + (f", {code}" if code else "")
        super().__init__(f"{field}: {message} ({what})" if field else f"{message} ({what})")


class InvalidError(APIError):
    """400 (and 405): the request is wrong as sent; sending it again fails again."""


class UnauthorizedError(APIError):
    """401: no or bad token."""


class ForbiddenError(APIError):
    """403: the token does not allow this."""


class NotFoundError(APIError):
    """404: no such task, schedule, job or route."""


class ConflictError(APIError):
    """409: the state forbids the change (cancel of a running task, ...)."""


class TooLargeError(APIError):
    """413: the body or the payload is over the limit."""


class InternalError(APIError):
    """500: a failure on the node's side; its log has the cause."""


class UnavailableError(APIError):
    """503: the node is starting, stopping or cannot reach its store (after the client's retries)."""


class NetworkError(OntimeError):
    """The node could not be reached, or its answer was lost or timed out, after the retries."""


_BY_CODE: Dict[str, Type[APIError]] = {
    "invalid": InvalidError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "too_large": TooLargeError,
    "internal": InternalError,
    "unavailable": UnavailableError,
}

_BY_STATUS: Dict[int, Type[APIError]] = {
    400: InvalidError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: InvalidError,
    409: ConflictError,
    413: TooLargeError,
    500: InternalError,
    503: UnavailableError,
}

_STATUS_OF_CODE: Dict[str, int] = {
    "invalid": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "internal": 500,
    "unavailable": 503,
}


def status_of(code: Optional[str]) -> int:
    """The status a single call's answer comes with for an error of this code."""
    return _STATUS_OF_CODE.get(code or "", 500)


def make_error(
    status: int,
    code: Optional[str],
    message: str,
    field: Optional[str] = None,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> APIError:
    """The APIError subclass for an answer: by its code, else its status."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or APIError
    return cls(status, code, message, field, request_id, retry_after)
