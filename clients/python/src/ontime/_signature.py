"""Checking ontime's webhook signature in a receiver.

A webhook call carries ``Ontime-Signature: t=<unix seconds>,v2=<hex>[,v2=<hex>...][,v1=<hex>]``
where v2 = HMAC-SHA256(secret, t + "." + target + "." + body), target being
the task's target URL exactly as submitted (query included). During a
secret rotation the call carries one v2 per secret. v1 (HMAC of
t + "." + body, not bound to the target) is sent only when the node has
delivery.signature_v1 on, for receivers not yet moved to v2: a v1
signature is valid at every receiver sharing the secret, so it is refused
unless accept_v1 is set.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Iterable, List, Optional, Union

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DIGITS = re.compile(r"^[0-9]{1,15}$")


def verify_signature(
    header: Optional[str],
    target: Union[str, Iterable[str]],
    body: Union[bytes, bytearray, memoryview, str],
    secrets: Union[str, Iterable[str]],
    *,
    tolerance: float = 300,
    now: Optional[float] = None,
    accept_v1: bool = False,
) -> bool:
    """True when header (the Ontime-Signature value) holds a valid signature
    of body for target by one of secrets, made within tolerance seconds of now.

    target: the URL this receiver was given to ontime as the task's target,
    exactly as submitted (several when it is known by several); body: the raw
    request body, before any JSON parsing; secrets: one, or several during a
    rotation (new and old).
    """
    if not header:
        return False
    ts: Optional[str] = None
    v2: List[bytes] = []
    v1: List[bytes] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        value = value.strip()
        if key == "t":
            ts = value
        elif key in ("v1", "v2") and _HEX64.match(value):
            (v2 if key == "v2" else v1).append(bytes.fromhex(value))
    if ts is None or not _DIGITS.match(ts):
        return False
    if abs((time.time() if now is None else now) - int(ts)) > tolerance:
        return False
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    targets = [target] if isinstance(target, str) else list(target)
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    ok = False
    # Every comparison is made, whatever matched: the time taken does not
    # tell which secret or signature was right.
    for secret in keys:
        if not secret:
            continue
        k = secret.encode("utf-8")
        for t in targets:
            want = hmac.new(k, ts.encode() + b"." + t.encode("utf-8") + b"." + raw, hashlib.sha256).digest()
            for sig in v2:
                ok = hmac.compare_digest(want, sig) or ok
        if accept_v1:
            want = hmac.new(k, ts.encode() + b"." + raw, hashlib.sha256).digest()
            for sig in v1:
                ok = hmac.compare_digest(want, sig) or ok
    return ok
