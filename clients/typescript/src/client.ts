// The client of ontime's HTTP API v1 for Node.js. Bodies are the types
// openapi-typescript generates from apiv1/openapi.json (src/openapi.ts,
// `npm run gen`); calls to an http:// node go over kept-alive node:net
// sockets (src/http1.ts), to an https:// node (or through a caller's agent)
// over node:http(s).

import { randomBytes } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";

import { APIError, makeError, NetworkError, OntimeError, statusOf, type ErrorCode } from "./errors.js";
import { H1Error, Http1Pool } from "./http1.js";
import type { components, operations } from "./openapi.js";

type S = components["schemas"];
export type TaskRequest = S["TaskRequest"];
export type Task = S["Task"];
export type TaskPatch = S["TaskPatch"];
export type BatchTask = S["BatchTask"];
/** One answer of submitBatchMinimal: the task's ID and status (created, or found by its key), or the error that kept it from being written. */
export type BatchRef = S["BatchRef"];
export type ListPage = S["ListPage"];
export type ErrorDetail = S["ErrorDetail"];
export type ScheduleRequest = S["ScheduleRequest"];
export type Schedule = S["Schedule"];
export type Topic = S["Topic"];
export type TopicList = S["TopicList"];
export type Job = S["Job"];
export type JobRun = S["JobRun"];
export type Outbox = S["Outbox"];
export type ClusterView = S["ClusterView"];
export type Status = S["Status"];
/** The filters of list: topic, key (with topic), status, limit, cursor, due_after, due_before. */
export type ListOptions = NonNullable<operations["listTasks"]["parameters"]["query"]>;
/** The filters of jobRuns: item, limit. */
export type JobRunsOptions = NonNullable<operations["listJobRuns"]["parameters"]["query"]>;

/** The most tasks one POST /v1/tasks:batch may carry. */
export const MAX_BATCH = 1000;

export interface ClientOptions {
  /** Bearer token (auth.tokens). */
  token?: string;
  /** Time allowed for one attempt of a call, ms; default 30,000. */
  timeoutMs?: number;
  /** Retries after a network error or a 503 (see README); default 3. 0: none. */
  retries?: number;
  /** First retry's backoff, doubled each time, with jitter; default 100 ms. */
  retryBaseMs?: number;
  /** Cap of one wait between attempts, a 503's Retry-After included; default 5,000 ms. A longer Retry-After is not waited for. */
  retryMaxMs?: number;
  /**
   * A submit without a key is given one (`auto-` and 22 random characters)
   * so that a retry after a lost answer finds the task the first attempt
   * wrote instead of writing another. Default true. With false a keyless
   * submit is retried only when nothing was sent (connection refused).
   */
  autoKey?: boolean;
  /** How concurrent submits share POST /v1/tasks:batch calls; false: each submit alone. Default on. */
  coalesce?: boolean | CoalesceOptions;
  /**
   * The agent for the calls: they then go through node:http(s). Default:
   * an http:// node is called over up to 64 kept-alive connections of the
   * client's own (node:http's machinery costs several times what a call
   * does), an https:// node through a keep-alive agent of 64 sockets.
   */
  agent?: http.Agent;
  /** PEM CA certificates to trust for an https:// node. */
  ca?: string | Buffer;
  /** Headers sent with every call. */
  headers?: Record<string, string>;
}

export interface CoalesceOptions {
  /** Tasks in one batch call: 1 to 1,000; default 1,000. */
  maxTasks?: number;
  /** Request body bytes of one batch call: 4 KiB to 64 MiB; default 1 MiB. */
  maxBytes?: number;
  /** Batch calls in flight at once: 1 to 64; default 1. */
  calls?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal;
  /** Sent as X-Request-Id: the node's log and audit lines carry it. */
  requestId?: string;
}

/** A submit's answer: the task, and whether this submit wrote it (201) or its topic and key named it already (200). */
export interface SubmitResult {
  task: Task;
  created: boolean;
}

/** One entry's answer of submitBatch: its task, or the error that kept it from being written. */
export type BatchResult = { task: BatchTask; created: boolean; error?: undefined } | { task?: undefined; created: false; error: APIError };

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** How a call may be retried: "always" (idempotent), "unsent" (only when nothing reached the node). */
type Retry = "always" | "unsent";

const SOLO_BYTES = 64 << 10;
const BATCH_FRAME = '{"tasks":[]}'.length;
// Errors of a connection that never carried the request.
const UNSENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

class AttemptError extends Error {
  constructor(
    message: string,
    readonly unsent: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

function bound(name: string, v: number | undefined, lo: number, hi: number, def: number): number {
  if (v === undefined) return def;
  if (!Number.isInteger(v) || v < lo || v > hi) throw new RangeError(`${name}: ${v} is not an integer between ${lo} and ${hi}`);
  return v;
}

const enc = encodeURIComponent;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[^\r\n\0]*$/;
// Headers that frame a call: the client sets them.
const FRAMING = new Set(["content-length", "transfer-encoding", "connection"]);

/** Client talks to one ontime node (or a load balancer in front of several). */
export class Client {
  readonly baseUrl: string;
  private readonly mod: typeof http | typeof https;
  // The parts of baseUrl, parsed once: a URL string given to request() is
  // parsed again on every call.
  private readonly hostname: string;
  private readonly port: number;
  private readonly prefix: string;
  private readonly agent: http.Agent | undefined;
  private readonly pool: Http1Pool | undefined;
  private readonly headers: Record<string, string>;
  // The pool's requests' fixed header lines (Host, the headers above).
  private readonly headLines: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly autoKey: boolean;
  private co: Coalescer | undefined;

  /**
   * new Client({ baseUrl: "http://127.0.0.1:7070", token }), or
   * new Client("http://127.0.0.1:7070", { token }).
   */
  constructor(options: ClientOptions & { baseUrl: string });
  constructor(baseUrl: string, options?: ClientOptions);
  constructor(first: string | (ClientOptions & { baseUrl: string }), second: ClientOptions = {}) {
    const options: ClientOptions = typeof first === "string" ? second : first;
    const baseURL = typeof first === "string" ? first : first?.baseUrl;
    if (typeof baseURL !== "string") throw new TypeError("baseUrl: give the node's URL, such as http://127.0.0.1:7070");
    let u: URL;
    try {
      u = new URL(baseURL);
    } catch {
      throw new TypeError(`baseUrl: ${JSON.stringify(baseURL)} is not an http(s) URL such as http://127.0.0.1:7070`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.host) {
      throw new TypeError(`baseUrl: ${JSON.stringify(baseURL)} is not an http(s) URL such as http://127.0.0.1:7070`);
    }
    this.baseUrl = baseURL.replace(/\/+$/, "");
    this.mod = u.protocol === "https:" ? https : http;
    this.hostname = u.hostname.replace(/^\[|\]$/g, "");
    this.port = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
    this.prefix = u.pathname.replace(/\/+$/, "");
    if (options.agent === undefined && u.protocol === "http:") {
      this.pool = new Http1Pool(this.hostname, this.port, 64);
    } else {
      this.agent =
        options.agent ??
        new https.Agent({ keepAlive: true, maxSockets: 64, ...(options.ca ? { ca: options.ca } : {}) });
    }
    this.headers = { accept: "application/json" };
    for (const [k, v] of Object.entries(options.headers ?? {})) {
      if (!TOKEN.test(k)) throw new TypeError(`headers: ${JSON.stringify(k)} is not a header name`);
      if (typeof v !== "string" || !HEADER_VALUE.test(v)) throw new TypeError(`headers.${k}: not a header value (a string without CR, LF or NUL)`);
      if (FRAMING.has(k.toLowerCase())) throw new TypeError(`headers.${k}: set by the client for each call`);
      for (const have of Object.keys(this.headers)) if (have.toLowerCase() === k.toLowerCase()) delete this.headers[have];
      this.headers[k] = v;
    }
    if (options.token) {
      if (!HEADER_VALUE.test(options.token)) throw new TypeError("token: not a header value (a string without CR, LF or NUL)");
      this.headers["authorization"] = "Bearer " + options.token;
    }
    let lines = Object.keys(this.headers).some((k) => k.toLowerCase() === "host") ? "" : `host: ${u.host}\r\n`;
    for (const [k, v] of Object.entries(this.headers)) lines += `${k}: ${v}\r\n`;
    this.headLines = lines;
    this.timeoutMs = bound("timeoutMs", options.timeoutMs, 1, 3_600_000, 30_000);
    this.retries = bound("retries", options.retries, 0, 100, 3);
    this.retryBaseMs = bound("retryBaseMs", options.retryBaseMs, 0, 60_000, 100);
    this.retryMaxMs = bound("retryMaxMs", options.retryMaxMs, 0, 3_600_000, 5_000);
    this.autoKey = options.autoKey ?? true;
    const co = options.coalesce ?? true;
    if (co !== false) {
      const o = co === true ? {} : co;
      this.co = new Coalescer(
        this,
        bound("coalesce.maxTasks", o.maxTasks, 1, MAX_BATCH, MAX_BATCH),
        bound("coalesce.maxBytes", o.maxBytes, 4 << 10, 64 << 20, 1 << 20),
        bound("coalesce.calls", o.calls, 1, 64, 1),
      );
    }
  }

  /** Closes the idle keep-alive connections (the agent's, when the client made it). */
  close(): void {
    if (this.pool) this.pool.destroy();
    else this.agent?.destroy();
  }

  // ---- tasks ----

  /**
   * Stores a task; created is false when its topic and key named a task
   * already. Submits made while others are in flight share
   * POST /v1/tasks:batch calls, each answered as its own POST /v1/tasks.
   */
  async submit(task: TaskRequest, opts: CallOptions = {}): Promise<SubmitResult> {
    const keyed = this.keyed(task);
    const body = JSON.stringify(keyed);
    const retry: Retry = keyed.key ? "always" : "unsent";
    if (this.co && Buffer.byteLength(body) <= Math.min(SOLO_BYTES, this.co.maxBytes - BATCH_FRAME) && !opts.signal && !opts.requestId) {
      return this.co.submit(body, retry);
    }
    return this.submitOne(body, retry, opts);
  }

  /** @internal POST /v1/tasks with one task's JSON. */
  async submitOne(body: string, retry: Retry, opts: CallOptions = {}): Promise<SubmitResult> {
    const a = await this.call("POST", "/v1/tasks", body, retry, opts);
    return { task: parse<Task>(a), created: a.status === 201 };
  }

  /**
   * Stores any number of tasks: POST /v1/tasks:batch calls of up to 1,000
   * (chunkSize) each, one after the other. One answer per task, in order;
   * an entry that is not valid fails alone (its error set), the others are
   * written. A call that fails whole throws, and the chunks before it stay
   * written.
   */
  async submitBatch(tasks: readonly TaskRequest[], opts: CallOptions & { chunkSize?: number } = {}): Promise<BatchResult[]> {
    const out: BatchResult[] = [];
    for (const { bodies, retry } of this.chunks(tasks, opts.chunkSize)) {
      const items = await this.batchCall(bodies, retry, opts);
      for (const it of items) out.push(batchResult(it));
    }
    return out;
  }

  // chunks are the batch calls' shares of tasks, chunkSize each: their
  // bodies (each task given a key first when autoKey is on), and how the
  // call may be retried (always when every task has a key).
  private chunks(tasks: readonly TaskRequest[], chunkSize: number | undefined): { bodies: string[]; retry: Retry }[] {
    const chunk = bound("chunkSize", chunkSize, 1, MAX_BATCH, MAX_BATCH);
    const out: { bodies: string[]; retry: Retry }[] = [];
    for (let i = 0; i < tasks.length; i += chunk) {
      const part = tasks.slice(i, i + chunk).map((t) => this.keyed(t));
      const retry: Retry = part.every((t) => typeof t === "object" && t !== null && t.key) ? "always" : "unsent";
      out.push({ bodies: part.map((t) => JSON.stringify(t)), retry });
    }
    return out;
  }

  /**
   * submitBatch answered with each task's ID and status instead of its
   * whole view (Prefer: return=minimal, RFC 7240): for a caller that keeps
   * only the IDs; the answer is about an eighth of the size. One answer
   * per task, in order: { id, status, created }, or { error, created:
   * false } for an entry that is not valid (an ErrorDetail, as the node
   * sent it). A node older than the preference answers whole views; their
   * IDs and statuses are returned all the same.
   */
  async submitBatchMinimal(tasks: readonly TaskRequest[], opts: CallOptions & { chunkSize?: number } = {}): Promise<BatchRef[]> {
    const out: BatchRef[] = [];
    for (const { bodies, retry } of this.chunks(tasks, opts.chunkSize)) {
      const { a, items } = await this.batchPost(bodies, retry, opts, PREFER_MINIMAL);
      if (minimalApplied(a)) {
        for (const it of items as BatchRef[]) out.push(it);
      } else {
        for (const it of items as S["BatchItem"][]) out.push(batchRef(it));
      }
    }
    return out;
  }

  /** @internal one POST /v1/tasks:batch of these task bodies. */
  async batchCall(bodies: readonly string[], retry: Retry, opts: CallOptions = {}): Promise<S["BatchItem"][]> {
    return (await this.batchPost(bodies, retry, opts)).items as S["BatchItem"][];
  }

  // batchPost is one POST /v1/tasks:batch of these task bodies, with
  // these headers besides the client's; one item per body.
  private async batchPost(bodies: readonly string[], retry: Retry, opts: CallOptions, headers?: Readonly<Record<string, string>>): Promise<{ a: Answer; items: unknown[] }> {
    const a = await this.call("POST", "/v1/tasks:batch", '{"tasks":[' + bodies.join(",") + "]}", retry, opts, headers);
    const items: unknown = parse<{ tasks?: unknown }>(a).tasks;
    if (!Array.isArray(items) || items.length !== bodies.length) {
      throw new OntimeError(`decoding the answer: ${Array.isArray(items) ? items.length : "no"} items for ${bodies.length} tasks`);
    }
    return { a, items };
  }

  /** Returns a task by its ID. */
  get(id: string, opts?: CallOptions): Promise<Task> {
    return this.json("GET", `/v1/tasks/${enc(id)}`, undefined, "always", opts);
  }

  /** Changes a pending or claimed task. */
  update(id: string, patch: TaskPatch, opts?: CallOptions): Promise<Task> {
    return this.json("PATCH", `/v1/tasks/${enc(id)}`, patch, "always", opts);
  }

  /** Cancels a pending or claimed task. */
  cancel(id: string, opts?: CallOptions): Promise<Task> {
    return this.json("DELETE", `/v1/tasks/${enc(id)}`, undefined, "always", opts);
  }

  /** Returns a dead task to pending, due now. */
  requeue(id: string, opts?: CallOptions): Promise<Task> {
    return this.json("POST", `/v1/tasks/${enc(id)}:requeue`, undefined, "unsent", opts);
  }

  /** Returns the task a key names in a topic: its live task, else the one that ended last. */
  getByKey(topic: string, key: string, opts?: CallOptions): Promise<Task> {
    return this.json("GET", keyPath(topic, key), undefined, "always", opts);
  }

  /** Changes the live task a key names. */
  updateByKey(topic: string, key: string, patch: TaskPatch, opts?: CallOptions): Promise<Task> {
    return this.json("PATCH", keyPath(topic, key), patch, "always", opts);
  }

  /** Cancels the live task a key names. */
  cancelByKey(topic: string, key: string, opts?: CallOptions): Promise<Task> {
    return this.json("DELETE", keyPath(topic, key), undefined, "always", opts);
  }

  /** One page of tasks in creation order; next_cursor, when set, asks for the next. */
  list(options: ListOptions = {}, opts?: CallOptions): Promise<ListPage> {
    return this.json("GET", "/v1/tasks" + query(options), undefined, "always", opts);
  }

  /** Every task the filters keep, page after page (options.limit: the page size). */
  async *listAll(options: ListOptions = {}, opts?: CallOptions): AsyncGenerator<Task, void, undefined> {
    let cursor = options.cursor;
    for (;;) {
      const page = await this.list(cursor ? { ...options, cursor } : options, opts);
      yield* page.tasks;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  // ---- topics ----

  /** Every topic that has tasks or is paused: counts per status, oldest due time, paused. */
  topics(opts?: CallOptions): Promise<TopicList> {
    return this.json("GET", "/v1/topics", undefined, "always", opts);
  }

  /** Stops delivery of a topic, cluster wide; its tasks wait. */
  pauseTopic(topic: string, opts?: CallOptions): Promise<Topic> {
    return this.json("POST", `/v1/topics/${enc(topic)}:pause`, undefined, "always", opts);
  }

  /** Resumes delivery of a topic. */
  resumeTopic(topic: string, opts?: CallOptions): Promise<Topic> {
    return this.json("POST", `/v1/topics/${enc(topic)}:resume`, undefined, "always", opts);
  }

  /** Moves every dead task of a topic back to pending; returns how many. */
  async requeueTopic(topic: string, opts?: CallOptions): Promise<number> {
    const r = await this.json<S["TopicRequeue"]>("POST", `/v1/topics/${enc(topic)}:requeue`, undefined, "always", opts);
    return r.requeued;
  }

  // ---- schedules ----

  /** Creates a schedule; a schedule of that name is a ConflictError. */
  createSchedule(s: ScheduleRequest, opts?: CallOptions): Promise<Schedule> {
    return this.json("POST", "/v1/schedules", s, "unsent", opts);
  }

  /** Creates or replaces the schedule name; created tells which. */
  async putSchedule(name: string, s: ScheduleRequest, opts?: CallOptions): Promise<{ schedule: Schedule; created: boolean }> {
    const a = await this.call("PUT", `/v1/schedules/${enc(name)}`, JSON.stringify(s), "always", opts);
    return { schedule: parse<Schedule>(a), created: a.status === 201 };
  }

  getSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    return this.json("GET", `/v1/schedules/${enc(name)}`, undefined, "always", opts);
  }

  async listSchedules(opts?: CallOptions): Promise<Schedule[]> {
    return (await this.json<S["ScheduleList"]>("GET", "/v1/schedules", undefined, "always", opts)).schedules;
  }

  deleteSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    return this.json("DELETE", `/v1/schedules/${enc(name)}`, undefined, "unsent", opts);
  }

  pauseSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    return this.json("POST", `/v1/schedules/${enc(name)}:pause`, undefined, "always", opts);
  }

  resumeSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    return this.json("POST", `/v1/schedules/${enc(name)}:resume`, undefined, "always", opts);
  }

  /** Makes the schedule's task now; created is false when the node found it made already. */
  async triggerSchedule(name: string, opts?: CallOptions): Promise<SubmitResult> {
    const a = await this.call("POST", `/v1/schedules/${enc(name)}:trigger`, undefined, "unsent", opts);
    return { task: parse<Task>(a), created: a.status === 201 };
  }

  // ---- scan jobs, outboxes ----

  async jobs(opts?: CallOptions): Promise<S["JobList"]["jobs"]> {
    return (await this.json<S["JobList"]>("GET", "/v1/jobs", undefined, "always", opts)).jobs;
  }

  job(name: string, opts?: CallOptions): Promise<Job> {
    return this.json("GET", `/v1/jobs/${enc(name)}`, undefined, "always", opts);
  }

  /** A job's latest runs, newest first. */
  async jobRuns(name: string, options: JobRunsOptions = {}, opts?: CallOptions): Promise<JobRun[]> {
    return (await this.json<S["JobRunList"]>("GET", `/v1/jobs/${enc(name)}/runs` + query(options), undefined, "always", opts)).runs;
  }

  /** Starts a run of the job now. */
  triggerJob(name: string, opts?: CallOptions): Promise<Job> {
    return this.json("POST", `/v1/jobs/${enc(name)}:trigger`, undefined, "unsent", opts);
  }

  pauseJob(name: string, opts?: CallOptions): Promise<Job> {
    return this.json("POST", `/v1/jobs/${enc(name)}:pause`, undefined, "always", opts);
  }

  resumeJob(name: string, opts?: CallOptions): Promise<Job> {
    return this.json("POST", `/v1/jobs/${enc(name)}:resume`, undefined, "always", opts);
  }

  async outboxes(opts?: CallOptions): Promise<Outbox[]> {
    return (await this.json<S["OutboxList"]>("GET", "/v1/outboxes", undefined, "always", opts)).outboxes;
  }

  // ---- operations ----

  /** The cluster as the node sees it: nodes, leader, sharding items. */
  cluster(opts?: CallOptions): Promise<ClusterView> {
    return this.json("GET", "/v1/cluster", undefined, "always", opts);
  }

  /** GET /healthz: the process is alive. */
  health(opts?: CallOptions): Promise<Status> {
    return this.json("GET", "/healthz", undefined, "always", opts);
  }

  /** GET /readyz: the node serves (an UnavailableError when not, after the retries). */
  ready(opts?: CallOptions): Promise<Status> {
    return this.json("GET", "/readyz", undefined, "always", opts);
  }

  /** GET /metrics: Prometheus text. */
  async metrics(opts?: CallOptions): Promise<string> {
    return (await this.call("GET", "/metrics", undefined, "always", opts)).body.toString("utf8");
  }

  /** GET /v1/openapi.json: the API's OpenAPI 3.1 document. */
  openapi(opts?: CallOptions): Promise<Record<string, unknown>> {
    return this.json("GET", "/v1/openapi.json", undefined, "always", opts);
  }

  // ---- transport ----

  private keyed(t: TaskRequest): TaskRequest {
    if (!this.autoKey || typeof t !== "object" || t === null || t.key) return t;
    return { ...t, key: "auto-" + randomBytes(16).toString("base64url") };
  }

  private async json<T>(method: string, path: string, body: unknown, retry: Retry, opts?: CallOptions): Promise<T> {
    return parse<T>(await this.call(method, path, body === undefined ? undefined : JSON.stringify(body), retry, opts));
  }

  /**
   * One call, with its retries: after a network error when retry is
   * "always" (or nothing was sent), and after a 503 whose Retry-After is
   * within retryMaxMs. An error answer throws its APIError. headers are
   * sent besides the client's (a name the client sends too is sent with
   * this value instead).
   */
  async call(method: string, path: string, body: string | undefined, retry: Retry, opts: CallOptions = {}, headers?: Readonly<Record<string, string>>): Promise<Answer> {
    for (let attempt = 0; ; attempt++) {
      let wait: number;
      try {
        const a = await this.attempt(method, path, body, opts, headers);
        if (a.status < 400) return a;
        const err = errorOf(a);
        if (a.status !== 503 || attempt >= this.retries) throw err;
        wait = err.retryAfterMs ?? this.backoff(attempt);
        if (wait > this.retryMaxMs) throw err;
      } catch (e) {
        if (!(e instanceof AttemptError)) throw e;
        if (attempt >= this.retries || !(retry === "always" || e.unsent)) {
          throw new NetworkError(`${method} ${path}: ${e.message}${attempt > 0 ? ` (after ${attempt + 1} attempts)` : ""}`, { cause: e.cause ?? e });
        }
        wait = this.backoff(attempt);
      }
      await sleep(wait, opts.signal);
    }
  }

  // headLinesWith is headLines with these headers added, each replacing
  // the client's of that name.
  private headLinesWith(extra: Readonly<Record<string, string>>): string {
    const names = new Set(Object.keys(extra).map((k) => k.toLowerCase()));
    let lines = this.headLines;
    if (Object.keys(this.headers).some((k) => names.has(k.toLowerCase()))) {
      lines = lines
        .split("\r\n")
        .filter((l) => l !== "" && !names.has(l.slice(0, l.indexOf(":")).toLowerCase()))
        .map((l) => l + "\r\n")
        .join("");
    }
    for (const [k, v] of Object.entries(extra)) lines += `${k}: ${v}\r\n`;
    return lines;
  }

  private backoff(attempt: number): number {
    const d = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** attempt);
    return d / 2 + Math.random() * (d / 2);
  }

  private attempt(method: string, path: string, body: string | undefined, opts: CallOptions, extra?: Readonly<Record<string, string>>): Promise<Answer> {
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
    if (opts.requestId !== undefined && !HEADER_VALUE.test(opts.requestId)) {
      return Promise.reject(new TypeError("requestId: not a header value (a string without CR, LF or NUL)"));
    }
    if (this.pool) {
      // The whole request in one string, written at once.
      let req = `${method} ${this.prefix}${path} HTTP/1.1\r\n${extra ? this.headLinesWith(extra) : this.headLines}`;
      if (opts.requestId) req += `x-request-id: ${opts.requestId}\r\n`;
      if (body !== undefined) req += `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      else req += method === "POST" || method === "PUT" || method === "PATCH" ? "content-length: 0\r\n\r\n" : "\r\n";
      return this.pool.request(req, method === "HEAD", this.timeoutMs, opts.signal).catch((e: unknown) => {
        if (e instanceof H1Error) throw new AttemptError(e.message, e.unsent, { cause: e.cause ?? e });
        throw e;
      });
    }
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { ...this.headers };
      for (const [k, v] of Object.entries(extra ?? {})) {
        for (const have of Object.keys(headers)) if (have.toLowerCase() === k.toLowerCase()) delete headers[have];
        headers[k] = v;
      }
      if (body !== undefined) {
        headers["content-type"] = "application/json";
        headers["content-length"] = Buffer.byteLength(body);
      }
      if (opts.requestId) headers["x-request-id"] = opts.requestId;
      const req = this.mod.request({ hostname: this.hostname, port: this.port, path: this.prefix + path, method, headers, agent: this.agent });
      let settled = false;
      const timer = setTimeout(() => req.destroy(new AttemptError(`no answer within ${this.timeoutMs} ms`, false)), this.timeoutMs);
      const onAbort = () => req.destroy(opts.signal?.reason ?? new Error("aborted"));
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      const done = (err: unknown, a?: Answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        if (err === undefined) resolve(a!);
        else reject(err);
      };
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (e instanceof AttemptError || (opts.signal?.aborted && e === opts.signal.reason)) return done(e);
        // A refused connection carried nothing; nor did a kept-alive one
        // the node had closed before this request was written on it.
        const unsent = (e.code !== undefined && UNSENT.has(e.code)) || (req.reusedSocket && e.code === "ECONNRESET" && !req.headersSent);
        done(new AttemptError(e.message || String(e.code), unsent, { cause: e }));
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => done(undefined, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", (e) => done(new AttemptError(e.message, false, { cause: e })));
      });
      req.end(body);
    });
  }
}

function keyPath(topic: string, key: string): string {
  return `/v1/topics/${enc(topic)}/keys/${enc(key)}`;
}

function query(o: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString().replace(/\+/g, "%20");
  return s ? "?" + s : "";
}

function parse<T>(a: Answer): T {
  try {
    return JSON.parse(a.body.toString("utf8")) as T;
  } catch (e) {
    throw new OntimeError(`decoding the answer (HTTP ${a.status}): ${(e as Error).message}`, { cause: e });
  }
}

function retryAfter(v: string | undefined): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

function errorOf(a: Answer): APIError {
  const rid = a.headers["x-request-id"] as string | undefined;
  const ra = retryAfter(a.headers["retry-after"] as string | undefined);
  try {
    const e = (JSON.parse(a.body.toString("utf8")) as S["ErrorBody"]).error;
    if (e && typeof e.message === "string" && e.message !== "") return makeError(a.status, e.code, e.message, e.field, rid, ra);
  } catch {
    // not the envelope: a proxy's page
  }
  return makeError(a.status, undefined, a.body.toString("utf8").trim().slice(0, 512) || `HTTP ${a.status}`, undefined, rid, ra);
}

function batchResult(it: S["BatchItem"]): BatchResult {
  if ("error" in it && it.error) {
    const e = it.error as ErrorDetail;
    return { created: false, error: makeError(statusOf(e.code as ErrorCode), e.code, e.message, e.field) };
  }
  const t = it as BatchTask;
  return { task: t, created: t.created === true };
}

// The Prefer header (RFC 7240) of submitBatchMinimal.
const PREFER_MINIMAL: Readonly<Record<string, string>> = { prefer: "return=minimal" };

// minimalApplied reports whether the answer's Preference-Applied header
// says return=minimal: else the node ignored the preference and answered
// the tasks' views.
function minimalApplied(a: Answer): boolean {
  const h = a.headers["preference-applied"];
  for (const v of Array.isArray(h) ? h : [h ?? ""]) {
    for (const pref of v.split(",")) {
      const [name = "", val = ""] = pref.split(";")[0]!.split("=");
      if (name.trim().toLowerCase() === "return" && val.trim().replace(/^"|"$/g, "").toLowerCase() === "minimal") return true;
    }
  }
  return false;
}

// batchRef is a whole view's item of a batch answer as a minimal one's.
function batchRef(it: S["BatchItem"]): BatchRef {
  if ("error" in it && it.error) return { error: it.error as ErrorDetail, created: false };
  const t = it as BatchTask;
  return { id: t.id, status: t.status, created: t.created === true };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// ---- coalescing ----
//
// Concurrent submits of one Client share POST /v1/tasks:batch calls, as the
// Go client's do (client/coalesce.go). There is no timer: a submit that
// finds fewer than `calls` batch calls in flight (and none queued) is sent
// at once, alone, as the plain POST /v1/tasks it always was; submits made
// while calls are in flight queue, and when a call returns, everything
// queued by then goes in one batch (up to maxTasks tasks and maxBytes of
// body). After a call that served a crowd the next batch is sent from
// setImmediate, once the callers the finished call resolved have run on
// and queued their next submits: 16 concurrent submitters in a loop then
// send batches of 16, one after the other.
//
// Each caller gets what a single submit would have given it: the task and
// created, or its entry's error as the APIError a single submit's answer
// makes. A batch the node refuses whole before writing anything (400, 401,
// 403, 404, 405, 413) is sent again as single submits, so their answers are
// the single ones; a 404 or 405 for the route turns coalescing off. Any
// other failure of the call (a network error after the retries, a 5xx) is
// every caller's error, as it would have been each single submit's.

interface Pending {
  body: string;
  bytes: number;
  retry: Retry;
  resolve: (r: SubmitResult) => void;
  reject: (e: unknown) => void;
}

class Coalescer {
  private inflight = 0;
  private queue: Pending[] = [];
  private scheduled = false;
  private off = false;

  constructor(
    private readonly c: Client,
    readonly maxTasks: number,
    readonly maxBytes: number,
    private readonly calls: number,
  ) {}

  submit(body: string, retry: Retry): Promise<SubmitResult> {
    if (this.off) return this.c.submitOne(body, retry);
    if (this.inflight < this.calls && this.queue.length === 0) {
      this.inflight++;
      return this.c.submitOne(body, retry).finally(() => this.release(this.queue.length > 0));
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ body, bytes: Buffer.byteLength(body), retry, resolve, reject });
      this.schedule();
    });
  }

  // release frees a call's slot. After a call that served a crowd (a
  // batch, or a single with submits queued behind it) the slot is freed
  // from setImmediate, once the callers it answered have run on and
  // queued their next submits: freed at once, the first of them would
  // find the slot free and go alone, and the others wait for that call
  // before their batch is sent. A lone caller's slot is freed at once.
  private release(crowd: boolean): void {
    if (!crowd) {
      this.inflight--;
      this.schedule();
      return;
    }
    setImmediate(() => {
      this.inflight--;
      this.pump();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inflight >= this.calls) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inflight < this.calls) {
      let n = 0;
      let bytes = BATCH_FRAME;
      while (n < this.queue.length && n < this.maxTasks) {
        const add = this.queue[n]!.bytes + (n > 0 ? 1 : 0);
        if (n > 0 && bytes + add > this.maxBytes) break;
        bytes += add;
        n++;
      }
      const group = this.queue.splice(0, n);
      this.inflight++;
      void this.send(group).finally(() => this.release(group.length > 1 || this.queue.length > 0));
    }
  }

  private async send(group: Pending[]): Promise<void> {
    if (group.length === 1) {
      const p = group[0]!;
      await this.c.submitOne(p.body, p.retry).then(p.resolve, p.reject);
      return;
    }
    const retry: Retry = group.every((p) => p.retry === "always") ? "always" : "unsent";
    let items: S["BatchItem"][];
    try {
      items = await this.c.batchCall(
        group.map((p) => p.body),
        retry,
      );
    } catch (e) {
      if (e instanceof APIError && [400, 401, 403, 404, 405, 413].includes(e.status)) {
        if (e.status === 404 || e.status === 405) this.off = true;
        // Refused whole, nothing written: each as a single submit, for its own answer.
        await Promise.all(group.map((p) => this.c.submitOne(p.body, p.retry).then(p.resolve, p.reject)));
        return;
      }
      for (const p of group) p.reject(e);
      return;
    }
    items.forEach((it, i) => {
      const r = batchResult(it);
      if (r.error) group[i]!.reject(r.error);
      else group[i]!.resolve({ task: r.task, created: r.created });
    });
  }
}
