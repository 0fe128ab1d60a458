"""The client of ontime's HTTP API v1: standard library only (http.client
over keep-alive connections, json, threading). Safe to share between
threads."""
from __future__ import annotations

import base64
import email.utils
import http.client
import json
import os
import random
import select
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ._errors import APIError, NetworkError, OntimeError, make_error, status_of
from ._types import (
    BatchRef,
    BatchTask,
    ClusterView,
    Job,
    JobRun,
    ListPage,
    Outbox,
    Schedule,
    ScheduleRequest,
    Status,
    Task,
    TaskPatch,
    TaskRequest,
    Topic,
    TopicList,
)

MAX_BATCH = 1000
"""The most tasks one POST /v1/tasks:batch may carry."""

_PREFER_MINIMAL = {"Prefer": "return=minimal"}
"""The Prefer header (RFC 7240) of submit_batch_minimal."""

_SOLO_BYTES = 64 << 10
_BATCH_FRAME = len(b'{"tasks":[]}')
# The retry kinds: "always" (idempotent) or "unsent" (only when nothing
# reached the node: a refused connection).
_ALWAYS, _UNSENT = "always", "unsent"


@dataclass
class SubmitResult:
    """A single submit's answer (internal; submit returns it as one dict):
    the task, and whether this submit wrote it (201) or its topic and key
    named it already (200)."""

    task: Task
    created: bool


@dataclass
class BatchResult:
    """One entry's answer of submit_batch: its task, or the error that kept it from being written."""

    task: Optional[BatchTask]
    created: bool
    error: Optional[APIError] = None


@dataclass
class Coalesce:
    """How concurrent submits share POST /v1/tasks:batch calls."""

    max_tasks: int = MAX_BATCH
    """Tasks in one batch call: 1 to 1,000."""
    max_bytes: int = 1 << 20
    """Request body bytes of one batch call: 4 KiB to 64 MiB."""
    calls: int = 1
    """Batch calls in flight at once: 1 to 64."""


class _Attempt(Exception):
    """One attempt's network failure; unsent when nothing reached the node."""

    def __init__(self, message: str, unsent: bool) -> None:
        super().__init__(message)
        self.unsent = unsent


class _Answer:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _bound(name: str, v: Optional[Union[int, float]], lo: float, hi: float, default: Union[int, float]) -> Any:
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise ValueError(f"{name}: {v!r} is not between {lo} and {hi}")
    return v


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class Client:
    """Client talks to one ontime node (or a load balancer in front of several).

    base_url: "http://127.0.0.1:7070". token: a bearer token (auth.tokens).
    timeout: seconds allowed for one attempt's connect and each read.
    retries: retries after a network error or a 503 (see README); 0: none.
    retry_base / retry_max: the first backoff (doubled each retry, with
    jitter) and the cap of one wait, a 503's Retry-After included (a longer
    Retry-After is not waited for). auto_key: a submit without a key is
    given one ("auto-" and 22 random characters) so that a retry after a
    lost answer finds the task the first attempt wrote instead of writing
    another; with False a keyless submit is retried only when nothing was
    sent. coalesce: how concurrent submits share batch calls; False: each
    alone. ca_file: PEM CA certificates for an https:// node.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 3,
        retry_base: float = 0.1,
        retry_max: float = 5.0,
        auto_key: bool = True,
        coalesce: Union[bool, Coalesce] = True,
        ca_file: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        max_idle: int = 64,
    ) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url: {base_url!r} is not an http(s) URL such as http://127.0.0.1:7070")
        self.base_url = base_url.rstrip("/")
        self._prefix = u.path.rstrip("/")
        self._host = u.hostname
        self._port = u.port or (443 if u.scheme == "https" else 80)
        self._tls: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            self._tls = ssl.create_default_context(cafile=ca_file)
        self._timeout = _bound("timeout", timeout, 0.001, 3600, 30.0)
        self._retries = _bound("retries", retries, 0, 100, 3)
        self._retry_base = _bound("retry_base", retry_base, 0, 60, 0.1)
        self._retry_max = _bound("retry_max", retry_max, 0, 3600, 5.0)
        self._auto_key = auto_key
        self._headers = {"Accept": "application/json", "User-Agent": "ontime-client-python"}
        if headers:
            self._headers.update(headers)
        if token:
            self._headers["Authorization"] = "Bearer " + token
        self._idle: List[http.client.HTTPConnection] = []
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._co: Optional[_Coalescer] = None
        if coalesce is not False:
            o = Coalesce() if coalesce is True else coalesce
            self._co = _Coalescer(
                self,
                _bound("coalesce.max_tasks", o.max_tasks, 1, MAX_BATCH, MAX_BATCH),
                _bound("coalesce.max_bytes", o.max_bytes, 4 << 10, 64 << 20, 1 << 20),
                _bound("coalesce.calls", o.calls, 1, 64, 1),
            )

    def close(self) -> None:
        """Closes the idle keep-alive connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- tasks ----

    def submit(self, task: Optional[TaskRequest] = None, **fields: Any) -> BatchTask:
        """Stores a task, given as a dict or as keyword arguments (topic=,
        key=, delay= or due_at=, payload=, target=, max_attempts=,
        if_exists=), and returns it as a dict: the task's view and
        "created", False when its topic and key named a task already (as a
        batch answers each entry). Submits made from several threads at once
        share POST /v1/tasks:batch calls, each answered as its own
        POST /v1/tasks."""
        if task is None:
            task = cast(TaskRequest, fields)
        elif fields:
            raise TypeError("submit: give the task as a dict or as keyword arguments, not both")
        r = self._submit(task)
        return _with_created(r)

    def _submit(self, task: TaskRequest) -> SubmitResult:
        t = self._keyed(task)
        body = json.dumps(t, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        retry = _ALWAYS if t.get("key") else _UNSENT
        co = self._co
        if co is not None and len(body) <= min(_SOLO_BYTES, co.max_bytes - _BATCH_FRAME):
            return co.submit(body, retry)
        return self._submit_one(body, retry)

    def _submit_one(self, body: bytes, retry: str) -> SubmitResult:
        a = self._call("POST", "/v1/tasks", body, retry)
        return SubmitResult(cast(Task, _parse(a)), a.status == 201)

    def submit_batch(self, tasks: Sequence[TaskRequest], *, chunk_size: int = MAX_BATCH) -> List[BatchResult]:
        """Stores any number of tasks: POST /v1/tasks:batch calls of up to
        1,000 (chunk_size) each, one after the other. One answer per task,
        in order; an entry that is not valid fails alone (its error set),
        the others are written. A call that fails whole raises, and the
        chunks before it stay written."""
        out: List[BatchResult] = []
        for bodies, retry in self._chunks(tasks, chunk_size):
            out.extend(_batch_result(it) for it in self._batch_call(bodies, retry))
        return out

    def _chunks(self, tasks: Sequence[TaskRequest], chunk_size: int) -> Iterator[Tuple[List[bytes], str]]:
        """The batch calls' shares of tasks, chunk_size each: their bodies
        (each task given a key first when auto_key is on), and how the call
        may be retried (always when every task has a key)."""
        chunk = _bound("chunk_size", chunk_size, 1, MAX_BATCH, MAX_BATCH)
        for i in range(0, len(tasks), chunk):
            part = [self._keyed(t) for t in tasks[i : i + chunk]]
            retry = _ALWAYS if all(isinstance(t, dict) and t.get("key") for t in part) else _UNSENT
            yield [json.dumps(t, separators=(",", ":"), ensure_ascii=False).encode("utf-8") for t in part], retry

    def submit_batch_minimal(self, tasks: Sequence[TaskRequest], *, chunk_size: int = MAX_BATCH) -> List[BatchRef]:
        """submit_batch answered with each task's ID and status instead of
        its whole view (Prefer: return=minimal, RFC 7240): for a caller that
        keeps only the IDs; the answer is about an eighth of the size. One
        dict per task, in order: {"id", "status", "created"}, or {"error",
        "created": False} for an entry that is not valid (the node's
        ErrorDetail: code, field, message). A node older than the
        preference answers whole views; their IDs and statuses are returned
        all the same."""
        out: List[BatchRef] = []
        for bodies, retry in self._chunks(tasks, chunk_size):
            a, items = self._batch_post(bodies, retry, _PREFER_MINIMAL)
            if _minimal_applied(a):
                out.extend(cast(List[BatchRef], items))
            else:
                out.extend(_batch_ref(it) for it in items)
        return out

    def _batch_call(self, bodies: Sequence[bytes], retry: str) -> List[Dict[str, Any]]:
        return self._batch_post(bodies, retry)[1]

    def _batch_post(self, bodies: Sequence[bytes], retry: str, headers: Optional[Mapping[str, str]] = None) -> Tuple[_Answer, List[Dict[str, Any]]]:
        """One POST /v1/tasks:batch of these task bodies, with these headers
        besides the client's; one item per body."""
        a = self._call("POST", "/v1/tasks:batch", b'{"tasks":[' + b",".join(bodies) + b"]}", retry, headers)
        items = _parse(a).get("tasks")
        if not isinstance(items, list) or len(items) != len(bodies):
            raise OntimeError(f"decoding the answer: {len(items) if isinstance(items, list) else 'no'} items for {len(bodies)} tasks")
        return a, items

    def get(self, id: str) -> Task:
        """Returns a task by its ID."""
        return cast(Task, self._json("GET", f"/v1/tasks/{_q(id)}"))

    def update(self, id: str, patch: TaskPatch) -> Task:
        """Changes a pending or claimed task."""
        return cast(Task, self._json("PATCH", f"/v1/tasks/{_q(id)}", patch))

    def cancel(self, id: str) -> Task:
        """Cancels a pending or claimed task."""
        return cast(Task, self._json("DELETE", f"/v1/tasks/{_q(id)}"))

    def requeue(self, id: str) -> Task:
        """Returns a dead task to pending, due now."""
        return cast(Task, self._json("POST", f"/v1/tasks/{_q(id)}:requeue", retry=_UNSENT))

    def get_by_key(self, topic: str, key: str) -> Task:
        """Returns the task a key names in a topic: its live task, else the one that ended last."""
        return cast(Task, self._json("GET", _key_path(topic, key)))

    def update_by_key(self, topic: str, key: str, patch: TaskPatch) -> Task:
        """Changes the live task a key names."""
        return cast(Task, self._json("PATCH", _key_path(topic, key), patch))

    def cancel_by_key(self, topic: str, key: str) -> Task:
        """Cancels the live task a key names."""
        return cast(Task, self._json("DELETE", _key_path(topic, key)))

    def list(
        self,
        *,
        topic: Optional[str] = None,
        key: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        due_after: Optional[str] = None,
        due_before: Optional[str] = None,
    ) -> ListPage:
        """One page of tasks in creation order; next_cursor, when set, asks for the next."""
        q = {"topic": topic, "key": key, "status": status, "limit": limit, "cursor": cursor, "due_after": due_after, "due_before": due_before}
        return cast(ListPage, self._json("GET", "/v1/tasks" + _query(q)))

    def list_all(self, **filters: Any) -> Iterator[Task]:
        """Every task the filters of list keep, page after page (limit: the page size)."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list(cursor=cursor, **filters)
            yield from page["tasks"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    # ---- topics ----

    def topics(self) -> TopicList:
        """Every topic that has tasks or is paused: counts per status, oldest due time, paused."""
        return cast(TopicList, self._json("GET", "/v1/topics"))

    def pause_topic(self, topic: str) -> Topic:
        """Stops delivery of a topic, cluster wide; its tasks wait."""
        return cast(Topic, self._json("POST", f"/v1/topics/{_q(topic)}:pause"))

    def resume_topic(self, topic: str) -> Topic:
        return cast(Topic, self._json("POST", f"/v1/topics/{_q(topic)}:resume"))

    def requeue_topic(self, topic: str) -> int:
        """Moves every dead task of a topic back to pending; returns how many."""
        return int(self._json("POST", f"/v1/topics/{_q(topic)}:requeue")["requeued"])

    # ---- schedules ----

    def create_schedule(self, schedule: ScheduleRequest) -> Schedule:
        """Creates a schedule; one of that name is a ConflictError."""
        return cast(Schedule, self._json("POST", "/v1/schedules", schedule, retry=_UNSENT))

    def put_schedule(self, name: str, schedule: ScheduleRequest) -> Tuple[Schedule, bool]:
        """Creates or replaces the schedule name; returns it and whether it was created."""
        a = self._call("PUT", f"/v1/schedules/{_q(name)}", _dumps(schedule), _ALWAYS)
        return cast(Schedule, _parse(a)), a.status == 201

    def get_schedule(self, name: str) -> Schedule:
        return cast(Schedule, self._json("GET", f"/v1/schedules/{_q(name)}"))

    def list_schedules(self) -> List[Schedule]:
        return cast(List[Schedule], self._json("GET", "/v1/schedules")["schedules"])

    def delete_schedule(self, name: str) -> Schedule:
        return cast(Schedule, self._json("DELETE", f"/v1/schedules/{_q(name)}", retry=_UNSENT))

    def pause_schedule(self, name: str) -> Schedule:
        return cast(Schedule, self._json("POST", f"/v1/schedules/{_q(name)}:pause"))

    def resume_schedule(self, name: str) -> Schedule:
        return cast(Schedule, self._json("POST", f"/v1/schedules/{_q(name)}:resume"))

    def trigger_schedule(self, name: str) -> BatchTask:
        """Makes the schedule's task now; returns it with "created"."""
        a = self._call("POST", f"/v1/schedules/{_q(name)}:trigger", None, _UNSENT)
        return _with_created(SubmitResult(cast(Task, _parse(a)), a.status == 201))

    # ---- scan jobs, outboxes ----

    def jobs(self) -> List[Job]:
        return cast(List[Job], self._json("GET", "/v1/jobs")["jobs"])

    def job(self, name: str) -> Job:
        return cast(Job, self._json("GET", f"/v1/jobs/{_q(name)}"))

    def job_runs(self, name: str, *, item: Optional[str] = None, limit: Optional[int] = None) -> List[JobRun]:
        """A job's latest runs, newest first."""
        return cast(List[JobRun], self._json("GET", f"/v1/jobs/{_q(name)}/runs" + _query({"item": item, "limit": limit}))["runs"])

    def trigger_job(self, name: str) -> Job:
        """Starts a run of the job now."""
        return cast(Job, self._json("POST", f"/v1/jobs/{_q(name)}:trigger", retry=_UNSENT))

    def pause_job(self, name: str) -> Job:
        return cast(Job, self._json("POST", f"/v1/jobs/{_q(name)}:pause"))

    def resume_job(self, name: str) -> Job:
        return cast(Job, self._json("POST", f"/v1/jobs/{_q(name)}:resume"))

    def outboxes(self) -> List[Outbox]:
        return cast(List[Outbox], self._json("GET", "/v1/outboxes")["outboxes"])

    # ---- operations ----

    def cluster(self) -> ClusterView:
        """The cluster as the node sees it: nodes, leader, sharding items."""
        return cast(ClusterView, self._json("GET", "/v1/cluster"))

    def health(self) -> Status:
        """GET /healthz: the process is alive."""
        return cast(Status, self._json("GET", "/healthz"))

    def ready(self) -> Status:
        """GET /readyz: the node serves (an UnavailableError when not, after the retries)."""
        return cast(Status, self._json("GET", "/readyz"))

    def metrics(self) -> str:
        """GET /metrics: Prometheus text."""
        return self._call("GET", "/metrics", None, _ALWAYS).body.decode("utf-8")

    def openapi(self) -> Dict[str, Any]:
        """GET /v1/openapi.json: the API's OpenAPI 3.1 document."""
        return cast(Dict[str, Any], self._json("GET", "/v1/openapi.json"))

    # ---- transport ----

    def _keyed(self, t: TaskRequest) -> TaskRequest:
        if not self._auto_key or not isinstance(t, dict) or t.get("key"):
            return t
        k = dict(t)
        k["key"] = "auto-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        return cast(TaskRequest, k)

    def _json(self, method: str, path: str, body: Any = None, retry: str = _ALWAYS) -> Any:
        return _parse(self._call(method, path, None if body is None else _dumps(body), retry))

    def _call(self, method: str, path: str, body: Optional[bytes], retry: str, headers: Optional[Mapping[str, str]] = None) -> _Answer:
        """One call with its retries: after a network error when retry is
        "always" (or nothing was sent), and after a 503 whose Retry-After is
        within retry_max. An error answer raises its APIError. headers are
        sent besides the client's (a name the client sends too is sent with
        this value instead)."""
        attempt = 0
        while True:
            try:
                a = self._attempt(method, path, body, headers)
            except _Attempt as e:
                if attempt >= self._retries or not (retry == _ALWAYS or e.unsent):
                    after = f" (after {attempt + 1} attempts)" if attempt else ""
                    raise NetworkError(f"{method} {path}: {e}{after}") from e.__cause__
                wait = self._backoff(attempt)
            else:
                if a.status < 400:
                    return a
                err = _error_of(a)
                if a.status != 503 or attempt >= self._retries:
                    raise err
                wait = err.retry_after if err.retry_after is not None else self._backoff(attempt)
                if wait > self._retry_max:
                    raise err
            time.sleep(wait)
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        d = min(self._retry_max, self._retry_base * (2**attempt))
        return d / 2 + random.random() * d / 2

    def _conn(self) -> Tuple[http.client.HTTPConnection, bool]:
        while True:
            with self._lock:
                if not self._idle:
                    break
                c = self._idle.pop()
            # An idle connection with something to read was closed by the
            # node (its idle_timeout): writing on it would fail after the
            # fact, so it is dropped before use.
            if c.sock is not None and not select.select([c.sock], [], [], 0)[0]:
                return c, True
            c.close()
        if self._tls is not None:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._tls), False
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout), False

    def _release(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(c)
                return
        c.close()

    def _attempt(self, method: str, path: str, body: Optional[bytes], extra: Optional[Mapping[str, str]] = None) -> _Answer:
        conn, reused = self._conn()
        headers = dict(self._headers)
        if extra:
            names = {k.lower() for k in extra}
            headers = {k: v for k, v in headers.items() if k.lower() not in names}
            headers.update(extra)
        if body is not None:
            headers["Content-Type"] = "application/json"
        sent = False
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            sent = True
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            # A refused connection carried nothing; nor did a kept-alive one
            # the node had closed before this request was written on it.
            unsent = isinstance(e, (ConnectionRefusedError, socket.gaierror)) or (reused and not sent and isinstance(e, (BrokenPipeError, ConnectionResetError)))
            raise _Attempt(str(e) or type(e).__name__, unsent) from e
        if resp.will_close:
            conn.close()
        else:
            self._release(conn)
        return _Answer(resp.status, resp.headers, data)


def _with_created(r: SubmitResult) -> BatchTask:
    out = cast(Dict[str, Any], dict(r.task))
    out["created"] = r.created
    return cast(BatchTask, out)


def _dumps(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _key_path(topic: str, key: str) -> str:
    return f"/v1/topics/{_q(topic)}/keys/{_q(key)}"


def _query(q: Mapping[str, Any]) -> str:
    kept = [(k, str(v)) for k, v in q.items() if v is not None and v != ""]
    return "?" + urllib.parse.urlencode(kept, quote_via=urllib.parse.quote) if kept else ""


def _parse(a: _Answer) -> Any:
    try:
        return json.loads(a.body)
    except ValueError as e:
        raise OntimeError(f"decoding the answer (HTTP {a.status}): {e}") from e


def _retry_after(v: Optional[str]) -> Optional[float]:
    if not v:
        return None
    v = v.strip()
    if v.isdigit():
        return float(v)
    try:
        t = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(0.0, t.timestamp() - time.time())


def _error_of(a: _Answer) -> APIError:
    rid = a.headers.get("X-Request-Id")
    ra = _retry_after(a.headers.get("Retry-After"))
    try:
        e = json.loads(a.body).get("error")
        if isinstance(e, dict) and e.get("message"):
            return make_error(a.status, e.get("code"), e["message"], e.get("field"), rid, ra)
    except (ValueError, AttributeError):
        pass  # not the envelope: a proxy's page
    text = a.body.decode("utf-8", "replace").strip()[:512] or f"HTTP {a.status}"
    return make_error(a.status, None, text, None, rid, ra)


def _batch_result(it: Dict[str, Any]) -> BatchResult:
    e = it.get("error")
    if e:
        return BatchResult(None, False, make_error(status_of(e.get("code")), e.get("code"), e.get("message", ""), e.get("field")))
    return BatchResult(cast(BatchTask, it), it.get("created") is True)


def _minimal_applied(a: _Answer) -> bool:
    """Whether the answer's Preference-Applied header says return=minimal:
    else the node ignored the preference and answered the tasks' views."""
    for v in a.headers.get_all("Preference-Applied") or ():
        for pref in v.split(","):
            name, _, val = pref.split(";")[0].partition("=")
            if name.strip().lower() == "return" and val.strip().strip('"').lower() == "minimal":
                return True
    return False


def _batch_ref(it: Dict[str, Any]) -> BatchRef:
    """A whole view's item of a batch answer as a minimal one's."""
    e = it.get("error")
    if e:
        return cast(BatchRef, {"error": e, "created": False})
    return cast(BatchRef, {"id": it.get("id"), "status": it.get("status"), "created": it.get("created") is True})


# ---- coalescing ----
#
# Concurrent submits of one Client (from several threads) share POST
# /v1/tasks:batch calls, as the Go client's do (client/coalesce.go). No
# background thread and no timer: a submit that finds fewer than `calls`
# batch calls in flight (and none queued) is sent at once, alone, as the
# plain POST /v1/tasks it always was; submits made while calls are in
# flight queue, and when a call returns, the first queued becomes the leader
# of everything queued by then (up to max_tasks tasks and max_bytes of body)
# and sends it as one batch. After a call that served a crowd, the slot is
# held (up to 2 ms) until the callers it answered have queued their next
# submits: 16 threads submitting in a loop then send batches of 16.
#
# Each caller gets what a single submit would have given it: the task and
# created, or its entry's error as the APIError a single submit's answer
# makes. A batch the node refuses whole before writing anything (400, 401,
# 403, 404, 405, 413) is sent again as single submits, so their answers are
# the single ones; a 404 or 405 for the route turns coalescing off. Any
# other failure of the call (a network error after the retries, a 5xx) is
# every caller's error, as it would have been each single submit's.


class _Pending:
    __slots__ = ("body", "retry", "leader", "done", "result", "error", "wake")

    def __init__(self, body: bytes, retry: str) -> None:
        self.body = body
        self.retry = retry
        self.leader = False
        self.done = False
        self.result: Optional[SubmitResult] = None
        self.error: Optional[BaseException] = None
        # Held while there is nothing new for the caller: released (under
        # the coalescer's lock) when it is made leader or its answer is in.
        # One lock per caller wakes only that caller, where a shared
        # Condition's notify_all would wake every queued thread each time.
        self.wake = threading.Lock()
        self.wake.acquire()

    def signal(self) -> None:
        """Wakes the caller. Called with the coalescer's lock held."""
        if self.wake.locked():
            self.wake.release()

    def outcome(self) -> SubmitResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class _Coalescer:
    def __init__(self, c: Client, max_tasks: int, max_bytes: int, calls: int) -> None:
        self.c = c
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.calls = calls
        self.mu = threading.Lock()
        self.inflight = 0
        self.queue: List[_Pending] = []
        self.off = False
        self.gathering = 0  # callers expected back while the slot is held (_hand_on)
        self.gather_until = 0.0

    def submit(self, body: bytes, retry: str) -> SubmitResult:
        if self.off:
            return self.c._submit_one(body, retry)
        p = _Pending(body, retry)
        with self.mu:
            alone = self.inflight < self.calls and not self.queue
            if alone:
                self.inflight += 1
            else:
                self.queue.append(p)
                if self.gathering and len(self.queue) >= self.gathering:
                    self._lead()  # the crowd is back: its batch goes now
        if alone:
            crowd = 1
            try:
                return self.c._submit_one(body, retry)
            finally:
                with self.mu:
                    crowd = 1 + len(self.queue)
                self._hand_on(crowd)
        while True:
            timeout = -1.0
            with self.mu:
                if p.done or p.leader:
                    break
                if self.gathering and self.queue and self.queue[0] is p:
                    timeout = self.gather_until - time.monotonic()
                    if timeout <= 0:
                        self._lead()  # the rest of the crowd is not coming
                        continue
            p.wake.acquire(timeout=timeout)
        if p.done:
            return p.outcome()
        with self.mu:
            group = self._take()
        try:
            self._send(group)
        finally:
            self._hand_on(len(group))
        return p.outcome()

    def _take(self) -> List[_Pending]:
        n, size = 0, _BATCH_FRAME
        while n < len(self.queue) and n < self.max_tasks:
            add = len(self.queue[n].body) + (1 if n else 0)
            if n and size + add > self.max_bytes:
                break
            size += add
            n += 1
        group, self.queue = self.queue[:n], self.queue[n:]
        return group

    def _lead(self) -> None:
        """Makes the first queued submit the leader of the next batch, on the
        slot held for it. Called with mu held."""
        self.gathering = 0
        self.queue[0].leader = True
        self.queue[0].signal()

    def _hand_on(self, crowd: int) -> None:
        """Frees the slot of a call that served crowd callers, or hands it on.

        Submits queued: the first leads them. None queued after a crowd was
        served: the slot stays held while the callers just answered come
        back with their next submits (threads take a while to wake), until
        as many are queued or 2 ms have passed; freed at once, the first of
        them would find the slot free and go alone, and the others would
        wait for that call before their batch went. A lone caller's slot is
        freed at once.
        """
        with self.mu:
            if self.queue and not self.queue[0].leader:
                self._lead()
            elif crowd > 1 and not self.queue:
                self.gathering = crowd
                self.gather_until = time.monotonic() + 0.002
            else:
                self.inflight -= 1

    def _send(self, group: List[_Pending]) -> None:
        try:
            if len(group) == 1:
                self._one(group[0])
                return
            retry = _ALWAYS if all(p.retry == _ALWAYS for p in group) else _UNSENT
            try:
                items = self.c._batch_call([p.body for p in group], retry)
            except APIError as e:
                if e.status in (400, 401, 403, 404, 405, 413):
                    if e.status in (404, 405):
                        self.off = True
                    # Refused whole, nothing written: each as a single submit, for its own answer.
                    for p in group:
                        self._one(p)
                    return
                raise
            for p, it in zip(group, items):
                r = _batch_result(it)
                if r.error is not None:
                    p.error = r.error
                else:
                    p.result = SubmitResult(cast(Task, r.task), r.created)
        except BaseException as e:  # every caller's error, as each single submit's would have been
            for p in group:
                if p.result is None and p.error is None:
                    p.error = e
        finally:
            with self.mu:
                for p in group:
                    p.done = True
                    p.signal()

    def _one(self, p: _Pending) -> None:
        try:
            p.result = self.c._submit_one(p.body, p.retry)
        except Exception as e:
            p.error = e
