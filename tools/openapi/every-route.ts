// A program that calls every route of apiv1/openapi.json through the
// types openapi-typescript generates from it (gen/schema.d.ts, made by
// `npm run gen`), as a user of a generated client would. `npm run check`
// type-checks it (tsc --noEmit): a change to the document that breaks such
// programs fails CI — a payload that no longer takes any JSON value, a
// batch entry that no longer is a TaskRequest, a field renamed or made
// required. A route added to the document fails too until it is called
// here (Routes below must have every path and method).
//
// It is only type-checked, never run.
import type { components, paths } from "./gen/schema.d.ts";

type Method = "get" | "put" | "post" | "delete" | "patch";
// The methods a path has: openapi-typescript writes `put?: never` for the others.
type MethodsOf<P extends keyof paths> = {
  [M in Method]: [NonNullable<paths[P][M]>] extends [never] ? never : M;
}[Method];
type Op<P extends keyof paths, M extends MethodsOf<P>> = NonNullable<paths[P][M]>;

type JSONBody<T> = T extends { content: { "application/json": infer B } } ? B : never;
type Body<P extends keyof paths, M extends MethodsOf<P>> =
  Op<P, M> extends { requestBody: infer R } ? JSONBody<R> : Op<P, M> extends { requestBody?: infer R } ? JSONBody<NonNullable<R>> : never;
type Params<P extends keyof paths, M extends MethodsOf<P>> = Op<P, M> extends { parameters: infer X } ? X : never;
// What a success answers: the union of the 2xx bodies.
type Ok<P extends keyof paths, M extends MethodsOf<P>> = Op<P, M> extends { responses: infer R }
  ? { [C in keyof R]: C extends 200 | 201 | 202 ? JSONBody<R[C]> : never }[keyof R]
  : never;
type ErrorBody = components["schemas"]["ErrorBody"];

// The shape of a generated client's call (as openapi-fetch has it).
type Args<P extends keyof paths, M extends MethodsOf<P>> = {
  params?: Params<P, M>;
  body?: Body<P, M>;
};
declare function call<P extends keyof paths, M extends MethodsOf<P>>(
  path: P,
  method: M,
  args: Args<P, M>,
): Promise<{ data: Ok<P, M>; status: number } | { error: ErrorBody; status: number }>;
declare function ok<T>(r: Promise<{ data: T; status: number } | { error: ErrorBody; status: number }>): Promise<T>;

// Every path with every one of its methods.
type Routes = { [P in keyof paths]: { [M in MethodsOf<P>]: () => Promise<void> } };

const later = "2030-01-01T00:00:00Z";
const taskRequest: components["schemas"]["TaskRequest"] = {
  topic: "order.cancel",
  key: "order-42",
  delay: "30m",
  target: "https://shop.example/hooks/cancel",
  payload: { order: 42, items: [1, 2], note: null },
  max_attempts: 5,
  priority: 7,
  retry: { schedule: ["10s", "1m", "10m"], jitter: 0.1 },
  if_exists: "replace",
};

function useTask(t: components["schemas"]["Task"]): string {
  const p: unknown = t.payload;
  return [t.id, t.topic, t.key ?? "", t.status, t.due_at, t.first_due_at, t.created_at, t.updated_at, String(t.attempts), String(t.max_attempts), String(p)].join();
}

export const routes: Routes = {
  "/v1/tasks": {
    post: async () => {
      useTask(await ok(call("/v1/tasks", "post", { body: taskRequest })));
      // Any JSON value as the payload: an object, an array, a string, a number, null.
      for (const payload of [{ n: 1 }, [1, "two"], "text", 3, null, true]) {
        await call("/v1/tasks", "post", { body: { topic: "t", payload, due_at: later } });
      }
    },
    get: async () => {
      const page = await ok(call("/v1/tasks", "get", { params: { query: { topic: "t", status: "pending", limit: 10, cursor: "c", due_after: later, due_before: later } } }));
      page.tasks.forEach(useTask);
      const next: string | undefined = page.next_cursor;
      void next;
    },
  },
  "/v1/tasks:batch": {
    post: async () => {
      const res = await ok(call("/v1/tasks:batch", "post", { body: { tasks: [taskRequest, { topic: "t", payload: { n: 1 } }, { topic: "t", payload: "x" }] } }));
      for (const item of res.tasks) {
        if ("error" in item && item.error) {
          const e: components["schemas"]["ErrorDetail"] = item.error;
          void [e.code, e.field, e.message];
        } else if ("topic" in item) {
          void [item.id, item.created, item.payload];
        } else if ("id" in item) {
          void [item.id, item.status, item.created]; // an item of a minimal answer
        }
      }
      const min = await ok(call("/v1/tasks:batch", "post", { params: { header: { Prefer: "return=minimal" } }, body: { tasks: [taskRequest] } }));
      for (const item of min.tasks) {
        if ("id" in item && !("topic" in item)) {
          void [item.id, item.status, item.created];
        }
      }
    },
  },
  "/v1/tasks/{id}": {
    get: async () => void useTask(await ok(call("/v1/tasks/{id}", "get", { params: { path: { id: "01jd" } } }))),
    delete: async () => void useTask(await ok(call("/v1/tasks/{id}", "delete", { params: { path: { id: "01jd" } } }))),
    patch: async () => void useTask(await ok(call("/v1/tasks/{id}", "patch", { params: { path: { id: "01jd" } }, body: { delay: "1h", payload: { n: 2 }, max_attempts: 3 } }))),
  },
  "/v1/tasks/{id}:requeue": {
    post: async () => void useTask(await ok(call("/v1/tasks/{id}:requeue", "post", { params: { path: { id: "01jd" } } }))),
  },
  "/v1/tasks/{id}:purge": {
    post: async () => void useTask(await ok(call("/v1/tasks/{id}:purge", "post", { params: { path: { id: "01jd" } } }))),
  },
  "/v1/topics/{topic}/keys/{key}": {
    get: async () => void useTask(await ok(call("/v1/topics/{topic}/keys/{key}", "get", { params: { path: { topic: "t", key: "k/1" } } }))),
    patch: async () => void useTask(await ok(call("/v1/topics/{topic}/keys/{key}", "patch", { params: { path: { topic: "t", key: "k" } }, body: { due_at: later, payload: [1] } }))),
    delete: async () => void useTask(await ok(call("/v1/topics/{topic}/keys/{key}", "delete", { params: { path: { topic: "t", key: "k" } } }))),
  },
  "/v1/schedules": {
    post: async () => {
      const s = await ok(call("/v1/schedules", "post", { body: { name: "nightly", cron: "0 2 * * *", time_zone: "Europe/Paris", misfire: "fire_once", task: { topic: "report", payload: { full: true }, target: "https://x.example/h" } } }));
      void [s.name, s.cron, s.paused];
    },
    get: async () => {
      const l = await ok(call("/v1/schedules", "get", {}));
      l.schedules.forEach((s) => void s.name);
    },
  },
  "/v1/schedules/{name}": {
    get: async () => void (await ok(call("/v1/schedules/{name}", "get", { params: { path: { name: "n" } } }))).cron,
    put: async () => void (await ok(call("/v1/schedules/{name}", "put", { params: { path: { name: "n" } }, body: { cron: "@every 10s", task: { topic: "t" } } }))).name,
    delete: async () => void (await ok(call("/v1/schedules/{name}", "delete", { params: { path: { name: "n" } } }))).name,
  },
  "/v1/schedules/{name}:pause": {
    post: async () => void (await ok(call("/v1/schedules/{name}:pause", "post", { params: { path: { name: "n" } } }))).paused,
  },
  "/v1/schedules/{name}:resume": {
    post: async () => void (await ok(call("/v1/schedules/{name}:resume", "post", { params: { path: { name: "n" } } }))).paused,
  },
  "/v1/schedules/{name}:trigger": {
    post: async () => void useTask(await ok(call("/v1/schedules/{name}:trigger", "post", { params: { path: { name: "n" } } }))),
  },
  "/v1/topics": {
    get: async () => {
      const l = await ok(call("/v1/topics", "get", {}));
      l.topics.forEach((t) => void [t.topic, t.counts.pending, t.counts.dead, t.paused, t.oldest_due_at]);
    },
  },
  "/v1/topics/{topic}:pause": {
    post: async () => void (await ok(call("/v1/topics/{topic}:pause", "post", { params: { path: { topic: "t" } } }))).paused,
  },
  "/v1/topics/{topic}:resume": {
    post: async () => void (await ok(call("/v1/topics/{topic}:resume", "post", { params: { path: { topic: "t" } } }))).known,
  },
  "/v1/topics/{topic}:requeue": {
    post: async () => void (await ok(call("/v1/topics/{topic}:requeue", "post", { params: { path: { topic: "t" } } }))).requeued,
  },
  "/v1/cluster": {
    get: async () => {
      const c = await ok(call("/v1/cluster", "get", {}));
      void [c.node, c.leader, (c.nodes ?? []).map((n) => n.id), (c.items ?? []).map((i) => i.owner)];
    },
  },
  "/v1/openapi.json": {
    get: async () => void (await ok(call("/v1/openapi.json", "get", {}))),
  },
  "/healthz": {
    get: async () => void (await ok(call("/healthz", "get", {}))).status,
  },
  "/readyz": {
    get: async () => void (await ok(call("/readyz", "get", {}))).status,
  },
  "/metrics": {
    get: async () => void (await call("/metrics", "get", {})),
  },
  "/v1/jobs": {
    get: async () => void (await ok(call("/v1/jobs", "get", {}))).jobs,
  },
  "/v1/jobs/{name}": {
    get: async () => void (await ok(call("/v1/jobs/{name}", "get", { params: { path: { name: "bills" } } }))).name,
  },
  "/v1/jobs/{name}/runs": {
    get: async () => void (await ok(call("/v1/jobs/{name}/runs", "get", { params: { path: { name: "bills" }, query: { item: "0", limit: 5 } } }))).runs,
  },
  "/v1/jobs/{name}:trigger": {
    post: async () => void (await ok(call("/v1/jobs/{name}:trigger", "post", { params: { path: { name: "bills" } } }))).name,
  },
  "/v1/jobs/{name}:pause": {
    post: async () => void (await ok(call("/v1/jobs/{name}:pause", "post", { params: { path: { name: "bills" } } }))).name,
  },
  "/v1/jobs/{name}:resume": {
    post: async () => void (await ok(call("/v1/jobs/{name}:resume", "post", { params: { path: { name: "bills" } } }))).name,
  },
  "/v1/outboxes": {
    get: async () => void (await ok(call("/v1/outboxes", "get", {}))).outboxes,
  },
  "/v1/topics/{topic}": {
    get: async () => void (await ok(call("/v1/topics/{topic}", "get", { params: { path: { topic: "t" } } }))).topic,
    put: async () => {
      const t = await ok(call("/v1/topics/{topic}", "put", { params: { path: { topic: "t" } }, body: { max_attempts: 5, retry: { backoff: "exponential", initial: "1s", max: "1h" }, priority: 3, rate: 100, concurrency: 8, timeout: "10s" } }));
      void [t.topic, t.settings, t.limits];
    },
  },
  "/v1/operations": {
    post: async () => {
      const op = await ok(call("/v1/operations", "post", { body: { action: "requeue", filter: { topic: "t", status: ["dead"], error_contains: "HTTP 503" }, dry_run: true } }));
      void [op.id, op.status, op.matched, op.changed];
    },
    get: async () => void (await ok(call("/v1/operations", "get", { params: { query: { limit: 10 } } }))).operations,
  },
  "/v1/operations/{id}": {
    get: async () => void (await ok(call("/v1/operations/{id}", "get", { params: { path: { id: "01jd" } } }))).status,
  },
  "/v1/store": {
    get: async () => {
      const st = await ok(call("/v1/store", "get", {}));
      void [st.databases, st.tables, st.epoch, st.expansion];
    },
  },
  "/v1/store:expand": {
    post: async () => {
      const st = await ok(call("/v1/store:expand", "post", { body: { databases: ["root@tcp(db3:3306)/ontime"], cutover: true } }));
      void [st.databases, st.epoch, st.expansion?.phase];
    },
  },
};
