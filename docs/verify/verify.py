"""Verify ontime's webhook signature (Ontime-Signature, v2) in Python.

Standard library only. Copy verify() into your receiver:

    ok = verify(request.headers["Ontime-Signature"],
                "https://shop.example/hooks/cancel",  # the target URL you gave ontime
                raw_body,                               # bytes, before any JSON parsing
                ["new-secret", "old-secret"])           # several during a rotation
"""
import hashlib
import hmac
import sys
import time


def verify(header, target, body, secrets, tolerance=300, now=None):
    """True when one v2 signature of header matches one of secrets for
    this target and body, and its timestamp is within tolerance seconds."""
    ts, sigs = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            ts = value
        elif key == "v2":
            sigs.append(value)
    if ts is None or not ts.isdigit() or not sigs:
        return False
    now = time.time() if now is None else now
    if abs(now - int(ts)) > tolerance:
        return False
    signed = ts.encode() + b"." + target.encode() + b"." + body
    ok = False
    for secret in secrets:
        want = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        for sig in sigs:
            ok |= hmac.compare_digest(want, sig)
    return ok


if __name__ == "__main__":
    # Test harness: verify.py HEADER TARGET SECRET... < body; exit 0 when valid.
    header, target, secrets = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.exit(0 if verify(header, target, sys.stdin.buffer.read(), secrets) else 1)
