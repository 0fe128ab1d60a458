"""A real `ontime serve` for the tests, and the helpers around it.

The node: SQLite in a temporary directory, two tokens (admin and read), a
webhook secret with v1 signatures on, and a scan job over a SQLite table
of bills the test made (its rows go to the test's receiver). The binary is
$ONTIME_BIN, else built with `go build` from this repository.
"""
from __future__ import annotations

import http.client
import http.server
import json
import os
import secrets
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[3]


def ontime_binary(tmp: str) -> str:
    if os.environ.get("ONTIME_BIN"):
        return os.path.abspath(os.environ["ONTIME_BIN"])
    out = os.path.join(tmp, "ontime")
    subprocess.run(["go", "build", "-o", out, "./cmd/ontime"], cwd=ROOT, check=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """An HTTP server that records every POST (headers, raw body, path) and answers 204."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Dict[str, str], bytes]] = []
        self.cv = threading.Condition()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.cv:
                    outer.calls.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    outer.cv.notify_all()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, pred, timeout: float = 20.0):  # type: ignore[no-untyped-def]
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for c in self.calls:
                    if pred(c):
                        return c
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"no matching call within {timeout}s: {[c[0] for c in self.calls]}")
                self.cv.wait(left)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Node:
    def __init__(self, receiver: Receiver) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ontime-py-node-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_token = "admin-" + secrets.token_hex(12)
        self.read_token = "read-" + secrets.token_hex(12)
        self.secret = "whsec-" + secrets.token_hex(12)
        self.app_db = os.path.join(self.tmp, "app.db")
        self.bills_target = f"http://127.0.0.1:{receiver.port}/bills"
        with open(os.path.join(self.tmp, "secret"), "w") as f:
            f.write(self.secret + "\n")
        db = sqlite3.connect(self.app_db)
        db.execute("CREATE TABLE bill (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL, status INTEGER NOT NULL)")
        db.execute("CREATE INDEX bill_status ON bill (status, id)")
        db.executemany("INSERT INTO bill VALUES (?, ?, 0)", [(i, 100 * i) for i in range(1, 6)])
        db.commit()
        db.close()
        cfg = f"""data_dir: {self.tmp}/data
log_level: warn
store:
  tables: 2
  segments: 2
hot:
  window: 1s
delivery:
  webhook_secret_file: {self.tmp}/secret
  signature_v1: true
  retry_base: 50ms
  retry_max: 200ms
auth:
  tokens:
    - {{name: admin, token_env: CLIENT_TEST_ADMIN_TOKEN, role: admin}}
    - {{name: reader, token_env: CLIENT_TEST_READ_TOKEN, role: read}}
jobs:
  - name: bills
    cron: "@every 1h"
    source:
      driver: sqlite
      databases: ["{self.app_db}"]
      table: bill
      key: id
      columns: [id, amount]
      where: {{status: 0}}
    process:
      target: {self.bills_target}
    on_success:
      set: {{status: 1}}
"""
        path = os.path.join(self.tmp, "ontime.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        # ontime serve refuses an ONTIME_* variable that is no config key
        # (ONTIME_BIN is the tests'): only ONTIME_LISTEN is passed.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTIME_")}
        env.update(ONTIME_LISTEN=f"127.0.0.1:{self.port}", CLIENT_TEST_ADMIN_TOKEN=self.admin_token, CLIENT_TEST_READ_TOKEN=self.read_token)
        self.log = open(os.path.join(self.tmp, "ontime.log"), "w+")
        self.proc = subprocess.Popen([ontime_binary(self.tmp), "serve", "--config", path], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("ontime serve exited: " + self.logs())
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    c.close()
                    break
                c.close()
            except OSError:
                pass
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("ontime serve not ready within 60 s: " + self.logs())
            time.sleep(0.1)

    def logs(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)


class FaultyProxy:
    """A proxy in front of the node that can lose answers (the node does the
    work, the caller's connection is reset) and answer 503 itself; and drop
    the Prefer header, as a node older than it would ignore it. prefs holds
    each forwarded request's Prefer header, as the client sent it, and its
    answer's Preference-Applied header."""

    def __init__(self, upstream_port: int) -> None:
        self.drop_answers = 0
        self.unavailable = 0
        self.retry_after = "0"
        self.seen: List[Tuple[str, str, bytes]] = []
        self.drop_prefer = False
        self.prefs: List[Tuple[Optional[str], Optional[str]]] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.seen.append((self.command, self.path, body))
                if outer.unavailable > 0:
                    outer.unavailable -= 1
                    b = json.dumps({"error": {"code": "unavailable", "message": "proxy: try again"}}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Retry-After", outer.retry_after)
                    self.send_header("Content-Length", str(len(b)))
                    self.end_headers()
                    self.wfile.write(b)
                    return
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
                if outer.drop_prefer:
                    hdrs = {k: v for k, v in hdrs.items() if k.lower() != "prefer"}
                up.request(self.command, self.path, body=body or None, headers=hdrs)
                r = up.getresponse()
                data = r.read()
                up.close()
                outer.prefs.append((", ".join(self.headers.get_all("Prefer") or []) or None, r.getheader("Preference-Applied")))
                if outer.drop_answers > 0:
                    outer.drop_answers -= 1
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def uniq(prefix: str) -> str:
    return f"{prefix}.{secrets.token_hex(4)}"


def wait_for(pred, timeout: float = 20.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(0.05)


__all__ = ["FaultyProxy", "Node", "Receiver", "ROOT", "uniq", "wait_for"]
