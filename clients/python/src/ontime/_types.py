"""The bodies of ontime's HTTP API v1, generated from apiv1/openapi.json
by scripts/gen_types.py: do not edit; run it again after the document changes."""
# fmt: off
from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union


class _TaskRequestRequired(TypedDict):
    topic: str
    """1–64 of A-Z a-z 0-9 _ . -"""


class TaskRequest(_TaskRequestRequired, total=False):
    """A task to submit. `due_at` and `delay` are exclusive; with neither the task is due now. A past `due_at` means as soon as possible."""
    key: str
    """At most one live task per topic and key: a resubmit returns the existing task (200) and writes nothing. Also the shard key; ≤ 255 bytes."""
    due_at: str
    """RFC 3339 time, e.g. 2026-11-23T18:00:00Z; at most 10 years ahead; a past one means now."""
    delay: str
    """A Go duration from now: 30s, 1h30m."""
    payload: Any
    """Any JSON value, ≤ delivery.max_payload_bytes (1 MiB by default)."""
    target: str
    """http(s)://… a webhook; mq://BROKER/ADDRESS a broker. Empty: the topic's default target (the config's topics.NAME.target), stored on the task; else the Go handler for the topic on a live node. A task no node could deliver (neither) is refused: 400 on field target."""
    max_attempts: int
    """Attempts before the task is dead; 0 or absent: its topic's max_attempts, else delivery.max_attempts."""
    if_exists: Literal["keep", "replace"]
    """When the key names a live task: keep (default) returns it unchanged (200); replace updates it with this request's fields like a PATCH (200; 409 once it is running). A final task (done, dead, cancelled) keeps its key retention.key_hold (10m) after it ended: meanwhile a resubmit with keep returns it (200) with key_held_until, and nothing is written; a resubmit with replace makes a new task (201), which the same replace sent again finds live (200); after the hold any submit makes a new task (201)."""
    retry: 'Retry'
    """The task's own retry policy; absent: its topic's, else the node's."""
    priority: int
    """0 (lowest) to 9: orders the task among those due at once, in a backlog (docs/topics.md, "Priorities"). Never makes a task early; a task is overtaken only by tasks of higher priority due less than (the difference of priorities) × 1 minute after it. Absent: the topic's default priority, else 0."""


class _TaskRequired(TypedDict):
    id: str
    """26 characters; sorts by creation; carries the shard hash."""
    topic: str
    due_at: str
    """When the next attempt is due. Retries move it."""
    first_due_at: str
    """The due time the task was submitted with; retries do not move it."""
    payload: Any
    """The JSON value submitted (null when none)."""
    max_attempts: int
    status: Literal["pending", "claimed", "running", "done", "dead", "cancelled"]
    attempts: int
    """Deliveries started so far."""
    created_at: str
    priority: int
    """0 (lowest) to 9 (docs/topics.md, "Priorities")."""


class Task(_TaskRequired, total=False):
    """A stored task: the answer of every task route."""
    key: str
    """The key it was submitted with; absent when none."""
    moved_by: Literal["retry", "update", "requeue"]
    """What last set due_at since the submit: retry (a delivery failed, was deferred or snoozed: last_error says which), update (PATCH, or a submit with if_exists: replace) or requeue (of the dead task, by its ID or its topic). Absent when nothing did (and for tasks stored before schema version 10, where it was not recorded)."""
    target: str
    """Absent for a Go handler registered for the topic (a task submitted without one, of a topic with a default target, shows that)."""
    last_error: str
    """Why the latest attempt failed, or why the task waits without one (no live node handles its topic, a breaker is open …); absent when none did."""
    result: Any
    """What the delivery that made the task done answered: a webhook's 2xx answer with a JSON body (Content-Type application/json or …+json, at most delivery.max_result_bytes, 4 KiB by default), or the value a Go handler gave Delivery.SetResult. Kept with the task until retention.done; absent when none."""
    updated_at: str
    """When the task last changed; of a final task (done, dead, cancelled), when it ended."""
    key_held_until: str
    """Only in the answer of a submit (alone or in a batch) whose key is held by this task although it is final (done, dead, cancelled): it ended less than retention.key_hold ago, so nothing was written and nothing will be delivered for this submit. The key takes a new task from this time on; a submit with if_exists: replace makes one at once."""
    retry: 'Retry'
    """The task's own retry policy, when it was given one."""
    next_attempt_at: str
    """When the next attempt is due (due_at), for a pending or claimed task that was attempted or moved; absent for a new task as submitted, and for one running or final."""
    next_attempt_reason: str
    """Why the next attempt is due then, e.g. "retry: attempt 3 of 5 after: webhook answered HTTP 503, Retry-After 30s", "requeued: attempt 1 of 25"; set with next_attempt_at."""
    outbox: 'TaskOutbox'
    """Only in GET /v1/tasks/{id}, for a task relayed from an outbox message (config outboxes:) whose row is still in its table, read from it on the node answering (absent when that node does not relay the outbox or cannot read the table within 2 s)."""


class BatchRequest(TypedDict):
    tasks: List['TaskRequest']
    """The tasks, each as the body of POST /v1/tasks. The node is lenient here: an entry that is not a valid TaskRequest fails alone, its item in the answer carrying the error, and the others are written."""


class BatchItemError(TypedDict):
    error: 'ErrorDetail'
    created: Literal[False]


BatchItem = Union['BatchTask', 'BatchItemError']


class _BatchTaskRequired(TypedDict):
    id: str
    """26 characters; sorts by creation; carries the shard hash."""
    topic: str
    due_at: str
    """When the next attempt is due. Retries move it."""
    first_due_at: str
    """The due time the task was submitted with; retries do not move it."""
    payload: Any
    """The JSON value submitted (null when none)."""
    max_attempts: int
    status: Literal["pending", "claimed", "running", "done", "dead", "cancelled"]
    attempts: int
    """Deliveries started so far."""
    created_at: str
    created: bool
    """true: this submit wrote the task (a single submit's 201); false: its topic and key named a live or recently ended task already (200: nothing written, or with if_exists: replace the live task updated)."""
    priority: int
    """0 (lowest) to 9 (docs/topics.md, "Priorities")."""


class BatchTask(_BatchTaskRequired, total=False):
    """A task of a batch answer: the task's view (Task) and created."""
    key: str
    """The key it was submitted with; absent when none."""
    moved_by: Literal["retry", "update", "requeue"]
    """What last set due_at since the submit: retry (a delivery failed, was deferred or snoozed: last_error says which), update (PATCH, or a submit with if_exists: replace) or requeue (of the dead task, by its ID or its topic). Absent when nothing did (and for tasks stored before schema version 10, where it was not recorded)."""
    target: str
    """Absent for a Go handler registered for the topic (a task submitted without one, of a topic with a default target, shows that)."""
    last_error: str
    """Why the latest attempt failed, or why the task waits without one (no live node handles its topic, a breaker is open …); absent when none did."""
    result: Any
    """What the delivery that made the task done answered: a webhook's 2xx answer with a JSON body (Content-Type application/json or …+json, at most delivery.max_result_bytes, 4 KiB by default), or the value a Go handler gave Delivery.SetResult. Kept with the task until retention.done; absent when none."""
    updated_at: str
    """When the task last changed; of a final task (done, dead, cancelled), when it ended."""
    key_held_until: str
    """Only in the answer of a submit (alone or in a batch) whose key is held by this task although it is final (done, dead, cancelled): it ended less than retention.key_hold ago, so nothing was written and nothing will be delivered for this submit. The key takes a new task from this time on; a submit with if_exists: replace makes one at once."""
    retry: 'Retry'
    """The task's own retry policy, when it was given one."""
    next_attempt_at: str
    """When the next attempt is due (due_at), for a pending or claimed task that was attempted or moved; absent for a new task as submitted, and for one running or final."""
    next_attempt_reason: str
    """Why the next attempt is due then, e.g. "retry: attempt 3 of 5 after: webhook answered HTTP 503, Retry-After 30s", "requeued: attempt 1 of 25"; set with next_attempt_at."""


class BatchResponse(TypedDict):
    tasks: List['BatchItem']


class BatchMinimalResponse(TypedDict):
    """The answer of POST /v1/tasks:batch with Prefer: return=minimal: one item per task, in order."""
    tasks: List['BatchRef']


class BatchRefVariant0(TypedDict):
    id: str
    """26 characters; sorts by creation; carries the shard hash."""
    status: Literal["pending", "claimed", "running", "done", "dead", "cancelled"]
    created: bool


class BatchRefError(TypedDict):
    error: 'ErrorDetail'
    created: Literal[False]


BatchRef = Union['BatchRefVariant0', 'BatchRefError']


class _ListPageRequired(TypedDict):
    tasks: List['Task']


class ListPage(_ListPageRequired, total=False):
    next_cursor: str
    """Present when there may be more: pass it as ?cursor= for the next page."""


class _ErrorDetailRequired(TypedDict):
    code: Literal["invalid", "too_large", "not_found", "conflict", "unauthorized", "forbidden", "unavailable", "internal"]
    """What programs branch on; the set is closed."""
    message: str
    """For people."""


class ErrorDetail(_ErrorDetailRequired, total=False):
    field: str
    """The input at fault when one is: a JSON field, a query parameter, `id`."""


class ErrorBody(TypedDict):
    """The body of every 4xx and 5xx answer, 404 and 405 included."""
    error: 'ErrorDetail'


class ClusterView(TypedDict):
    node: str
    """The node that answered."""
    coordinator: Literal["none", "database", "etcd", "redis", "zookeeper"]
    leader: str
    term: int
    nodes: Optional[List['ClusterNode']]
    items: Optional[List['ClusterItem']]


class _ClusterNodeRequired(TypedDict):
    id: str
    addr: str
    heartbeat: str
    live: bool
    items: int
    """Sharding items it owns."""


class ClusterNode(_ClusterNodeRequired, total=False):
    topics: List[str]
    """The topics it has Go handlers for: tasks without a target of these topics are accepted while it is live. Absent when none."""
    started: str
    """When the node's process started, from its registration. Absent when unknown."""
    version: str
    """The node's build version (module version and VCS revision, as ontime_build_info labels it), from its registration (ontime_nodes.version, etcd's member value). Absent for a node of an earlier version."""
    zone: str
    """The node's cluster.zone. Absent when none."""


class _ClusterItemRequired(TypedDict):
    item: str
    """database.table.segment"""
    owner: str
    """Empty when unassigned."""
    lag_seconds: float
    """How far past due the item's oldest pending task is; 0 when none is."""


class ClusterItem(_ClusterItemRequired, total=False):
    zone: str
    """The zone of the item's database (store.zones): the item goes to a live node of that zone while there is one. Absent when none."""


class Status(TypedDict):
    status: str


class _ScheduleTaskRequired(TypedDict):
    topic: str
    """1–64 of A-Z a-z 0-9 _ . -"""


class ScheduleTask(_ScheduleTaskRequired, total=False):
    """The task each fire time becomes."""
    payload: Any
    """Any JSON value, ≤ delivery.max_payload_bytes (1 MiB by default)."""
    target: str
    """http(s)://… a webhook; mq://BROKER/ADDRESS a broker. Empty: the topic's default target when a task is made, else its Go handler; a task made while no live node handles the topic waits, unattempted, for one."""
    max_attempts: int
    """Attempts before the task is dead; 0 or absent: delivery.max_attempts."""


class _ScheduleRequestRequired(TypedDict):
    cron: str
    """5 fields (minute first), 6 with seconds first, `@every 10s` (whole seconds, ≥ 1s), or a descriptor such as `@hourly`."""
    task: 'ScheduleTask'


class ScheduleRequest(_ScheduleRequestRequired, total=False):
    """A schedule to create or put."""
    name: str
    """1–64 of A-Z a-z 0-9 _ . -"""
    time_zone: str
    """IANA name; default UTC. A wall-clock fire time the zone skips (DST) does not fire; one it repeats fires once."""
    misfire: Literal["skip", "fire_once"]
    """What becomes of missed fire times: those 2 × cluster.lease_ttl old (the misfire threshold) that no node made into tasks yet (every node down), or whose tasks made ahead had not started yet (every node down after they were made, or delivery that far behind). skip delivers none of them and goes on with the next one; fire_once delivers one for all of them: the task made ahead for the last of them, or a task due at once keyed by the last of them. A task made ahead and passed over ends cancelled, its last_error saying why. Default skip."""
    paused: bool


class _ScheduleRequired(TypedDict):
    name: str
    """1–64 of A-Z a-z 0-9 _ . -"""
    cron: str
    """5 fields (minute first), 6 with seconds first, `@every 10s` (whole seconds, ≥ 1s), or a descriptor such as `@hourly`."""
    time_zone: str
    """IANA name; default UTC. A wall-clock fire time the zone skips (DST) does not fire; one it repeats fires once."""
    task: 'ScheduleTask'
    misfire: Literal["skip", "fire_once"]
    """What becomes of missed fire times: those 2 × cluster.lease_ttl old (the misfire threshold) that no node made into tasks yet (every node down), or whose tasks made ahead had not started yet (every node down after they were made, or delivery that far behind). skip delivers none of them and goes on with the next one; fire_once delivers one for all of them: the task made ahead for the last of them, or a task due at once keyed by the last of them. A task made ahead and passed over ends cancelled, its last_error saying why. Default skip."""
    paused: bool
    scheduled_until: str
    """Every fire time up to it has been made into a task or passed over by the misfire policy."""
    created_at: str
    updated_at: str


class Schedule(_ScheduleRequired, total=False):
    """A stored schedule."""
    next_fire_at: str
    """The first fire time after now; absent when paused or when the expression never fires again."""


class ScheduleList(TypedDict):
    schedules: List['Schedule']


class _JobIndexRequired(TypedDict):
    table: str
    ok: bool
    """An index starts with the where columns followed by the key."""


class JobIndex(_JobIndexRequired, total=False):
    """What a SQL job found when it EXPLAINed its fetch on its first table."""
    index: str
    warning: str
    plan: str
    """The engine's EXPLAIN output."""
    ddl: str
    """A statement that creates the index the fetch needs, on the job's engine (when `ok` is false)."""


class _JobItemRequired(TypedDict):
    item: str
    """`db.table.segment` (SQL jobs) or the item's index (Go jobs)."""


class JobItem(_JobItemRequired, total=False):
    owner: str
    """The node the coordinator assigned it to."""
    holder: str
    """The node that last ran it."""
    run_id: str
    """An unfinished run, resumed from cursor by the next holder."""
    cursor: str
    """The last key done, as JSON."""
    last_fire: str


class _JobRequired(TypedDict):
    name: str
    kind: Literal["sql", "go"]
    cron: str
    misfire: Literal["skip", "fire_once"]
    overlap: Literal["skip"]
    paused: bool
    items: int
    """Number of sharding items."""
    state: Literal["ok", "broken", "unchecked"]
    """`broken`: the database refuses a statement of the SQL job (a table or column that does not exist, a typo in `on_success.set`, a value a column refuses); it runs nothing until the statement passes again, checked at a trigger at most every 10 s. `unchecked`: its source did not answer when the statements were to be checked; it runs nothing until a check passes. Go jobs are `ok`."""


class Job(_JobRequired, total=False):
    """A scan job."""
    time_zone: str
    next_fire: str
    target: str
    """A SQL job's process.target."""
    index: 'JobIndex'
    error: str
    """A broken job's statement (`fetch`, `on_success`, `retry_column`), table and the database's message; an unchecked job's unreachable source."""
    broken_since: str
    """When the job broke."""
    item_states: List['JobItem']
    """GET /v1/jobs/{name} only."""


class JobList(TypedDict):
    jobs: List['Job']


class _JobRunRequired(TypedDict):
    id: str
    job: str
    item: str
    node: str
    trigger: Literal["cron", "manual", "misfire", "resume"]
    started_at: str
    rows_fetched: int
    rows_processed: int
    rows_failed: int
    rows_left: int
    """Rows that failed max_attempts times: no longer fetched."""
    status: Literal["running", "done", "failed", "moved", "paused", "lost"]


class JobRun(_JobRunRequired, total=False):
    """One run of one item of a job."""
    fire_at: str
    ended_at: str
    cursor: str
    error: str


class JobRunList(TypedDict):
    runs: List['JobRun']


class TaskPatch(TypedDict, total=False):
    """A change to a pending or claimed task; fields left out stay as they are. `due_at` and `delay` are exclusive. A task moved later is never delivered at its old time; one moved earlier is delivered at its new time, never before."""
    due_at: str
    """RFC 3339 time, e.g. 2026-11-23T18:00:00Z; at most 10 years ahead; a past one means now."""
    delay: str
    """A Go duration from now: 30s, 1h30m."""
    payload: Any
    """Any JSON value, ≤ delivery.max_payload_bytes (1 MiB by default)."""
    target: str
    """http(s)://… a webhook; mq://BROKER/ADDRESS a broker. Empty: the topic's default target, else its Go handler on a live node; 400 on field target when neither."""
    max_attempts: int
    """Attempts before the task is dead."""
    retry: 'Retry'
    """Replaces the task's own retry policy; {} removes it (its topic's applies again)."""


class TopicCounts(TypedDict):
    """Tasks per status, zeros included."""
    pending: int
    claimed: int
    running: int
    done: int
    dead: int
    cancelled: int


class _TopicRequired(TypedDict):
    topic: str
    counts: 'TopicCounts'
    """Tasks per status, zeros included."""
    oldest_due_at: Optional[str]
    """The earliest due time of the topic's pending tasks; null when it has none."""
    paused: bool
    """The topic delivers nothing, cluster wide; its tasks wait."""
    known: bool
    """The topic has tasks (of any status). False in the answer of a pause: no task of this name exists yet; the pause holds back the topic's first tasks when they come (check the name). False in the answer of a resume: the pause, if any, is removed and the topic is no longer listed."""


class Topic(_TopicRequired, total=False):
    settings: 'TopicSettings'
    """The topic's effective settings: what its tasks without values of their own get."""
    sources: 'TopicSources'
    dynamic: 'TopicSettings'
    """What PUT /v1/topics/{topic} set; absent when nothing."""
    limits: 'TopicLimits'


class TopicList(TypedDict):
    topics: List['Topic']
    counted_at: str
    """When the counts were taken: the node recounts in the background every few seconds, so they are a few seconds old."""


class TopicRequeue(TypedDict):
    requeued: int


class OutboxList(TypedDict):
    outboxes: List['Outbox']


class Outbox(TypedDict):
    name: str
    driver: Literal["mysql", "postgres", "sqlite"]
    tables: List['OutboxTable']
    """One per (database, table), in database then table order."""


class _OutboxTableRequired(TypedDict):
    database: int
    """The index of the DSN in the outbox's databases."""
    table: str
    waiting: int
    """Rows not relayed yet (or waiting to be tried again)."""
    in_flight: int
    """Rows relayed into a task that has not ended; later messages of their key wait for it."""
    set_aside: int
    """Malformed rows, never to become a task; they hold back nothing."""
    oldest_age_seconds: float
    """Age of the oldest waiting or in-flight row; 0 when none."""
    held_keys: int
    """Keys whose first unfinished message is failing (its task failed an attempt, or it could not be relayed yet): it holds back that key's later messages, and only those."""
    held_sample: List['OutboxRowError']
    set_aside_sample: List['OutboxRowError']
    relayed: int
    """Messages this node made tasks of."""
    relayed_per_second: float
    """The same over the last minute."""
    failures: int
    """Messages this node set aside or could not relay yet."""


class OutboxTable(_OutboxTableRequired, total=False):
    """One outbox table. The row counts, age and samples are read from the table (the same on every node); relayed, relayed_per_second and failures count what this node's relay did with the table since it started."""
    error: str
    """Set when the table could not be read; its counts are then zero."""


class _OutboxRowErrorRequired(TypedDict):
    id: int
    topic: str
    key: str
    created_at: str
    retries: int
    """The relay's tries, or the attempts of the message's task."""
    error: str


class OutboxRowError(_OutboxRowErrorRequired, total=False):
    task_id: str
    """The task of an in-flight message whose task failed an attempt (GET /v1/tasks/{id} shows what it holds back); absent when the message is not a task yet."""


class OperationFilter(TypedDict, total=False):
    """Every field set must hold; at least one must be set."""
    topic: str
    status: List[Literal["pending", "claimed", "running", "done", "dead", "cancelled"]]
    """Any of these statuses."""
    key_prefix: str
    """Keys that start with it, byte for byte (% and _ are plain characters)."""
    due_after: str
    """Due at or after."""
    due_before: str
    """Due before; after due_after."""
    error_contains: str
    """last_error contains it, case-sensitive."""


class _OperationRequestRequired(TypedDict):
    action: Literal["cancel", "requeue", "reschedule", "delete"]
    """cancel: pending and claimed tasks, as DELETE /v1/tasks/{id} (the key hold counts from the cancel). requeue: dead tasks back to pending, attempts reset (a dead task whose key a live task holds now is passed over). reschedule: pending tasks to due_at, delay from now, or shifted by shift. delete: pending, done, dead and cancelled tasks (claimed and running ones are being delivered: cancel those)."""
    filter: 'OperationFilter'


class OperationRequest(_OperationRequestRequired, total=False):
    due_at: str
    """reschedule (one of due_at, delay, shift) and requeue (optional; default now)."""
    delay: str
    """A Go duration from now (30s, 1h30m): as due_at."""
    shift: str
    """A Go duration, may be negative: reschedule moves each task's due time by it."""
    dry_run: bool
    """Count what would change; change nothing."""


class _OperationRequired(TypedDict):
    id: str
    action: Literal["cancel", "requeue", "reschedule", "delete"]
    filter: 'OperationFilter'
    dry_run: bool
    status: Literal["pending", "running", "done", "failed"]
    """failed: error says why; what it changed stays changed."""
    matched: int
    """Tasks the filter selected so far."""
    changed: int
    """Tasks the action changed so far (a dry run: would change)."""
    tables_done: int
    tables: int
    """Task tables to walk: databases × tables."""
    created_at: str


class Operation(_OperationRequired, total=False):
    due_at: str
    """The due time reschedule or requeue sets (delay made absolute at the submit)."""
    shift: str
    cursor: str
    """Where the walk was when last recorded: DB/TABLE/last task ID."""
    error: str
    owner: str
    """The node that runs (or ran) it."""
    started_at: str
    finished_at: str


class OperationList(TypedDict):
    operations: List['Operation']


class StoreStatus(TypedDict):
    databases: int
    """The databases the store records (M)."""
    tables: int
    """Task tables per database (N)."""
    epoch: int
    """Topology epoch: moves on with every change of the recorded list of databases."""
    expansion: Optional['StoreExpansion']
    """The expansion under way; null when there is none."""


class StoreExpandRequest(TypedDict, total=False):
    databases: List[str]
    """The new, empty databases (DSNs), as many as the store has; the first becomes the twin of store.databases[0]. Empty: resume the expansion under way."""
    cutover: bool
    """After the copy, switch the store to its 2M databases online (the nodes pause for it) and clean up; without it the expansion waits in phase copy."""
    nice: float
    """The copy and the cleanup sleep after each page this many times the page's own duration, leaving the databases to the live load (1: about half their time). 0: no sleep."""
    rate: int
    """At most this many rows copied or deleted per second. 0: no cap."""


StoreExpansion = TypedDict('StoreExpansion', {'phase': Literal["copy", "cleanup"], 'from': int, 'to': int, 'since': str, 'tables': int, 'tables_copied': int, 'tables_cleaned': int, 'rows_copied': int, 'rows_deleted': int})


class Retry(TypedDict, total=False):
    """A retry policy: a backoff — exponential (initial·2^(n−1), at most max) or fixed (initial every time) — or an explicit schedule of waits, the last one repeated; jitter spreads each wait by ±that fraction. Fields left out take the node's (delivery.retry_base, delivery.retry_max, jitter 0.2). A receiver's Retry-After on 429 or 503 overrides the policy for that retry (at most delivery.retry_max)."""
    backoff: Literal["exponential", "fixed"]
    """Default exponential; not with schedule."""
    initial: str
    """The first wait (fixed: every wait), 1ms..24h; default delivery.retry_base."""
    max: str
    """Exponential's cap, 1ms..720h, at least initial; default delivery.retry_max."""
    jitter: float
    """Each wait is spread by ±jitter of itself; default 0.2."""
    schedule: List[str]
    """The waits before the 1st, 2nd … retry (1ms..720h each); the last repeats. Not with backoff, initial or max."""


class TopicSettings(TypedDict, total=False):
    """A topic's settings. As the body of PUT /v1/topics/{topic}: what the dynamic layer sets, replacing what an earlier PUT set ({} removes it). In a topic's view: its effective settings (settings) or its dynamic layer (dynamic). A task's own value wins over its topic's; the topic's PUT over its config (topics.NAME); the config over the node's (delivery.*)."""
    target: str
    """Default target of the topic's tasks submitted without one; judged as a task's target."""
    max_attempts: int
    """max_attempts of the topic's tasks submitted without one."""
    retry: 'Retry'
    priority: int
    """Priority of the topic's tasks submitted without one (higher first)."""
    rate: float
    """Most deliveries per second of the topic, cluster wide; 0 or absent: no limit."""
    concurrency: int
    """Most deliveries of the topic in flight, cluster wide; 0 or absent: no limit."""
    timeout: str
    """Bound of each delivery attempt (a webhook call, a Go handler's call), 10ms..1h; default delivery.timeout."""


class TopicSources(TypedDict):
    """Where each effective setting comes from: api (PUT /v1/topics/{topic}), config (topics.NAME) or node (the delivery section, or none)."""
    target: Literal["api", "config", "node"]
    max_attempts: Literal["api", "config", "node"]
    retry: Literal["api", "config", "node"]
    priority: Literal["api", "config", "node"]
    rate: Literal["api", "config", "node"]
    concurrency: Literal["api", "config", "node"]
    timeout: Literal["api", "config", "node"]


class TopicLimits(TypedDict):
    """A topic's cluster-wide limits (docs/topics.md, "Cluster-wide limits") as the answering node sees them; absent when the topic sets none."""
    rate: float
    """Calls per second, all nodes together; 0: no limit."""
    concurrency: int
    """Calls in flight, all nodes together; 0: no limit."""
    rate_share: float
    """What this node may use now: rate / live nodes without Redis; the whole rate with the Redis tier, shared call by call."""
    concurrency_share: int
    """Likewise for concurrency (without Redis each node has at least 1)."""
    throttled: int
    """Calls of this node that waited for a limit since it started."""


class TaskOutbox(TypedDict):
    """The outbox message a task was relayed from. A key's messages go one at a time: its later messages stay in the outbox table, not tasks yet, until this task ends (done, dead or cancelled); while it fails and retries they wait with it (ontime_outbox_held_keys counts such keys)."""
    outbox: str
    """The outbox's name (config outboxes:)."""
    database: int
    """Index of the message's database in the outbox's databases."""
    table: str
    message_id: int
    """The row's id in its table."""
    key: str
    """The message's key; empty when none."""
    holds_back: int
    """Later messages of the key waiting for this task to end; 0 once it has ended."""
