// The client against a live `ontime serve` (test/node.ts starts it).
import assert from "node:assert/strict";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  Client,
  ConflictError,
  ForbiddenError,
  InvalidError,
  NetworkError,
  NotFoundError,
  TooLargeError,
  UnauthorizedError,
  UnavailableError,
  verifySignature,
  type BatchRef,
  type Task,
} from "../src/index.js";
import { startNode, type TestNode } from "./node.js";
import { FaultyProxy } from "./proxy.js";

let node: TestNode;
let c: Client;
const later = () => new Date(Date.now() + 3_600_000).toISOString();
const uniq = (p: string) => `${p}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

before(async () => {
  node = await startNode();
  c = new Client({ baseUrl: node.url, token: node.adminToken });
});

after(async () => {
  c?.close();
  await node?.stop();
});

describe("tasks by ID", () => {
  test("submit, get, update, cancel", async () => {
    const topic = uniq("ts.id");
    const { task, created } = await c.submit({ topic, delay: "1h", payload: { order: 42, items: [1, 2] }, target: "http://127.0.0.1:9/h" });
    assert.equal(created, true);
    assert.equal(task.topic, topic);
    assert.equal(task.status, "pending");
    assert.deepEqual(task.payload, { order: 42, items: [1, 2] });
    assert.match(task.key ?? "", /^auto-/, "a keyless submit is given a key (retries find the task)");

    const got = await c.get(task.id);
    assert.equal(got.id, task.id);
    assert.deepEqual(got.payload, task.payload);

    const due = new Date(Date.now() + 7_200_000);
    due.setMilliseconds(0);
    const upd = await c.update(task.id, { due_at: due.toISOString(), payload: "text", max_attempts: 3 });
    assert.equal(new Date(upd.due_at).getTime(), due.getTime());
    assert.equal(upd.payload, "text");
    assert.equal(upd.max_attempts, 3);
    assert.equal(upd.moved_by, "update");

    const cancelled = await c.cancel(task.id);
    assert.equal(cancelled.status, "cancelled");
    await assert.rejects(c.update(task.id, { delay: "1m" }), ConflictError);
    await assert.rejects(c.requeue(task.id), ConflictError);
  });

  test("any JSON value as the payload", async () => {
    const topic = uniq("ts.payload");
    for (const payload of [null, true, 3.5, "s", [1, "x"], { a: { b: [null] } }]) {
      const { task } = await c.submit({ topic, delay: "1h", payload, target: "http://127.0.0.1:9/h" });
      assert.deepEqual((await c.get(task.id)).payload, payload);
    }
  });

  test("a resubmit of a key returns the live task", async () => {
    const topic = uniq("ts.dup");
    const a = await c.submit({ topic, key: "k1", delay: "1h", target: "http://127.0.0.1:9/h" });
    const b = await c.submit({ topic, key: "k1", delay: "2h", target: "http://127.0.0.1:9/h" });
    assert.equal(a.created, true);
    assert.equal(b.created, false);
    assert.equal(b.task.id, a.task.id);
    const r = await c.submit({ topic, key: "k1", delay: "3h", target: "http://127.0.0.1:9/h", if_exists: "replace" });
    assert.equal(r.created, false);
    assert.equal(r.task.moved_by, "update");
  });
});

describe("tasks by key", () => {
  test("get, update, cancel by topic and key (a key with / and spaces)", async () => {
    const topic = uniq("ts.key");
    const key = "order/42 ä?&#";
    const { task } = await c.submit({ topic, key, delay: "1h", target: "http://127.0.0.1:9/h" });
    assert.equal(task.key, key);
    assert.equal((await c.getByKey(topic, key)).id, task.id);
    const upd = await c.updateByKey(topic, key, { payload: { v: 2 } });
    assert.deepEqual(upd.payload, { v: 2 });
    const page = await c.list({ topic, key });
    assert.deepEqual(
      page.tasks.map((t) => t.id),
      [task.id],
    );
    assert.equal((await c.cancelByKey(topic, key)).status, "cancelled");
    await assert.rejects(c.getByKey(topic, "no-such-key"), NotFoundError);
  });
});

describe("batch", () => {
  test("a bad entry fails alone", async () => {
    const topic = uniq("ts.batch");
    const res = await c.submitBatch([
      { topic, delay: "1h", payload: { n: 1 }, target: "http://127.0.0.1:9/h" },
      { topic: "not a topic!", delay: "1h", target: "http://127.0.0.1:9/h" },
      { topic, delay: "soon", target: "http://127.0.0.1:9/h" },
      { topic, key: "b4", delay: "1h", target: "http://127.0.0.1:9/h" },
    ]);
    assert.equal(res.length, 4);
    assert.equal(res[0]!.created, true);
    assert.deepEqual(res[0]!.task!.payload, { n: 1 });
    assert.ok(res[1]!.error instanceof InvalidError);
    assert.equal(res[1]!.error.field, "topic");
    assert.equal(res[1]!.error.status, 400);
    assert.ok(res[2]!.error instanceof InvalidError);
    assert.equal(res[2]!.error.field, "delay");
    assert.equal(res[3]!.task!.key, "b4");
    assert.equal((await c.list({ topic })).tasks.length, 2);
  });

  test("minimal: IDs, statuses and each bad entry's error, in order; a node that ignores Prefer gives the same", async () => {
    const topic = uniq("ts.min");
    const proxy = new FaultyProxy(node.url);
    await proxy.start();
    // The client's own sockets, node:http through an agent, and a client
    // whose headers carry a Prefer of their own (the call's replaces it).
    const clients = [
      new Client(proxy.url, { token: node.adminToken }),
      new Client(proxy.url, { token: node.adminToken, agent: new http.Agent({ keepAlive: true }) }),
      new Client(proxy.url, { token: node.adminToken, headers: { Prefer: "return=representation" } }),
    ];
    const tasks = [
      { topic, key: "m1", delay: "1h", target: "http://127.0.0.1:9/h" },
      { topic: "not a topic!", delay: "1h", target: "http://127.0.0.1:9/h" },
      { topic, delay: "1h", payload: { n: 2 }, target: "http://127.0.0.1:9/h" },
      { topic, key: "m1", delay: "2h", target: "http://127.0.0.1:9/h" },
    ];
    try {
      const first = new Map<string, string>(); // the key m1's task, per client's run
      for (const [i, pc] of clients.entries()) {
        for (const drop of [false, true]) {
          proxy.dropPrefer = drop;
          const what = `client ${i}, ${drop ? "whole views" : "minimal"}`;
          const t = tasks.map((x) => ({ ...x, ...(x.key ? { key: `${x.key}.${i}` } : {}) }));
          const refs = await pc.submitBatchMinimal(t);
          const seen = proxy.seen.at(-1)!;
          assert.equal(seen.path, "/v1/tasks:batch", what);
          assert.equal(seen.prefer, "return=minimal", what);
          assert.equal(seen.applied, drop ? null : "return=minimal", what);
          assert.equal(refs.length, 4, what);
          for (const j of [0, 2, 3]) assert.deepEqual(Object.keys(refs[j]!).sort(), ["created", "id", "status"], `${what}: item ${j}`);
          const [a, bad, b, again] = refs as [
            Extract<BatchRef, { id: string }>,
            Extract<BatchRef, { error: unknown }>,
            Extract<BatchRef, { id: string }>,
            Extract<BatchRef, { id: string }>,
          ];
          assert.deepEqual(Object.keys(bad).sort(), ["created", "error"], what);
          assert.equal(bad.created, false, what);
          assert.equal(bad.error.code, "invalid", what);
          assert.equal(bad.error.field, "topic", what);
          assert.match(a.id, /^[0-9A-Za-z]{26}$/, what);
          assert.equal(a.status, "pending", what);
          assert.equal(b.status, "pending", what);
          assert.notEqual(a.id, b.id, what);
          // The second entry of key m1 finds the first's task.
          assert.equal(again.id, a.id, what);
          assert.equal(again.created, false, what);
          // The keyless entry is a new task each time (its own auto key).
          assert.equal(b.created, true, what);
          if (!drop) {
            assert.equal(a.created, true, what);
            first.set(`m1.${i}`, a.id);
          } else {
            // The same batch again: the key's task is found.
            assert.equal(a.created, false, what);
            assert.equal(a.id, first.get(`m1.${i}`), what);
          }
          // The IDs name the tasks sent, in order.
          const ta = await c.get(a.id);
          assert.equal(ta.key, `m1.${i}`, what);
          assert.equal(ta.status, a.status, what);
          const tb = await c.get(b.id);
          assert.deepEqual(tb.payload, { n: 2 }, what);
          assert.equal(tb.topic, topic, what);
        }
      }
      // Each client's key once, and a keyless task per call.
      assert.equal((await c.list({ topic })).tasks.length, clients.length * 3);
      // The helper splits as submitBatch does; the same answer above 1,000.
      proxy.dropPrefer = false;
      const big = Array.from({ length: 1500 }, (_, i) => ({ topic, key: `big${i}`, delay: "1h", target: "http://127.0.0.1:9/h" }));
      const refs = await clients[0]!.submitBatchMinimal(big, { chunkSize: 1000 });
      assert.equal(refs.length, 1500);
      assert.ok(refs.every((r) => "id" in r && r.created && r.status === "pending"));
      assert.equal((await c.get((refs[1234] as { id: string }).id)).key, "big1234");
      assert.deepEqual(
        proxy.seen.filter((s) => s.path === "/v1/tasks:batch").slice(-2).map((s) => [(JSON.parse(s.body) as { tasks: unknown[] }).tasks.length, s.applied]),
        [
          [1000, "return=minimal"],
          [500, "return=minimal"],
        ],
      );
    } finally {
      for (const pc of clients) pc.close();
      await proxy.stop();
    }
  });

  test("above 1,000 tasks the helper splits", async () => {
    const topic = uniq("ts.big");
    const proxy = new FaultyProxy(node.url);
    await proxy.start();
    const pc = new Client(proxy.url, { token: node.adminToken });
    try {
      const tasks = Array.from({ length: 2500 }, (_, i) => ({ topic, key: `k${i}`, delay: "1h", target: "http://127.0.0.1:9/h" }));
      const res = await pc.submitBatch(tasks);
      assert.equal(res.length, 2500);
      assert.ok(res.every((r, i) => r.created && r.task?.key === `k${i}`));
      assert.deepEqual(
        proxy.seen.filter((s) => s.path === "/v1/tasks:batch").map((s) => (JSON.parse(s.body) as { tasks: unknown[] }).tasks.length),
        [1000, 1000, 500],
      );
    } finally {
      pc.close();
      await proxy.stop();
    }
  });
});

describe("list", () => {
  test("pages", async () => {
    const topic = uniq("ts.page");
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await c.submit({ topic, delay: "1h", target: "http://127.0.0.1:9/h" })).task.id);
    const p1 = await c.list({ topic, limit: 3 });
    assert.equal(p1.tasks.length, 3);
    assert.ok(p1.next_cursor);
    const p2 = await c.list({ topic, limit: 3, cursor: p1.next_cursor });
    const p3 = await c.list({ topic, limit: 3, cursor: p2.next_cursor });
    assert.equal(p3.tasks.length, 1);
    assert.equal(p3.next_cursor, undefined);
    // Creation order; tasks made within one millisecond may be listed in any order among them.
    const sorted = (a: string[]) => [...a].sort();
    assert.deepEqual(sorted([...p1.tasks, ...p2.tasks, ...p3.tasks].map((t) => t.id)), sorted(ids));
    const all: Task[] = [];
    for await (const t of c.listAll({ topic, limit: 2 })) all.push(t);
    assert.deepEqual(sorted(all.map((t) => t.id)), sorted(ids));
    assert.equal((await c.list({ topic, status: "done" })).tasks.length, 0);
    await assert.rejects(c.list({ topic, limit: 5000 }), InvalidError);
  });
});

describe("topics", () => {
  test("list, pause, resume, requeue", async () => {
    const topic = uniq("ts.topic");
    await c.submit({ topic, delay: "1h", target: "http://127.0.0.1:9/h" });
    const paused = await c.pauseTopic(topic);
    assert.equal(paused.paused, true);
    const list = await c.topics();
    const t = list.topics.find((x) => x.topic === topic);
    assert.ok(t, "the topic is listed");
    assert.equal(t.paused, true);
    assert.equal((await c.resumeTopic(topic)).paused, false);
    assert.equal(await c.requeueTopic(topic), 0);
  });
});

describe("schedules", () => {
  test("create, get, list, put, pause, resume, trigger, delete", async () => {
    const name = uniq("ts-sched");
    const req = { cron: "0 3 * * *", task: { topic: "ts.sched", payload: { report: true }, target: "http://127.0.0.1:9/h" } };
    const s = await c.createSchedule({ name, ...req });
    assert.equal(s.name, name);
    await assert.rejects(c.createSchedule({ name, ...req }), ConflictError);
    assert.equal((await c.getSchedule(name)).cron, "0 3 * * *");
    assert.ok((await c.listSchedules()).some((x) => x.name === name));
    const put = await c.putSchedule(name, { ...req, cron: "@every 1h" });
    assert.equal(put.created, false);
    assert.equal(put.schedule.cron, "@every 1h");
    assert.equal((await c.pauseSchedule(name)).paused, true);
    assert.equal((await c.resumeSchedule(name)).paused, false);
    const trig = await c.triggerSchedule(name);
    assert.equal(trig.task.topic, "ts.sched");
    assert.deepEqual(trig.task.payload, { report: true });
    await c.deleteSchedule(name);
    await assert.rejects(c.getSchedule(name), NotFoundError);
    await assert.rejects(c.createSchedule({ name: uniq("bad"), cron: "not cron", task: { topic: "t" } }), (e: unknown) => e instanceof InvalidError && e.field === "cron");
  });
});

describe("jobs, outboxes, operations", () => {
  test("every other route", async () => {
    const jobs = await c.jobs();
    assert.deepEqual(
      jobs.map((j) => j.name),
      ["bills"],
    );
    assert.equal((await c.job("bills")).name, "bills");
    assert.ok(Array.isArray(await c.jobRuns("bills", { limit: 5 })));
    assert.equal((await c.pauseJob("bills")).paused, true);
    assert.equal((await c.resumeJob("bills")).paused, false);
    assert.equal((await c.triggerJob("bills")).name, "bills");
    await assert.rejects(c.job("nope"), NotFoundError);
    assert.deepEqual(await c.outboxes(), []);
    const cl = await c.cluster();
    assert.ok(cl.node);
    assert.equal((await c.health()).status, "ok");
    assert.equal((await c.ready()).status, "ready");
    assert.match(await c.metrics(), /ontime_/);
    assert.equal((await c.openapi())["openapi"], "3.1.0");
  });
});

describe("errors", () => {
  test("mapped to the error classes", async () => {
    await assert.rejects(c.get("01jdzzzzzzzzzzzzzzzzzzzzzz"), (e: unknown) => e instanceof NotFoundError && e.code === "not_found" && e.status === 404 && !!e.requestId);
    await assert.rejects(c.submit({ topic: "", target: "http://127.0.0.1:9/h" }), (e: unknown) => e instanceof InvalidError && e.field === "topic");
    await assert.rejects(c.submit({ topic: "t", delay: "1h", payload: "x".repeat(1_100_000), target: "http://127.0.0.1:9/h" }), TooLargeError);
    const anon = new Client(node.url);
    await assert.rejects(anon.list({ topic: "t" }), (e: unknown) => e instanceof UnauthorizedError && e.code === "unauthorized");
    anon.close();
    const reader = new Client(node.url, { token: node.readToken });
    await assert.rejects(reader.submit({ topic: "t", target: "http://127.0.0.1:9/h" }), ForbiddenError);
    await reader.list({ topic: "t" });
    reader.close();
    const down = new Client("http://127.0.0.1:9", { retries: 1, retryBaseMs: 1 });
    await assert.rejects(down.health(), NetworkError);
    down.close();
    assert.throws(() => new Client("ftp://x"), TypeError);
    assert.throws(() => new Client(node.url, { coalesce: { maxTasks: 5000 } }), RangeError);
  });
});

describe("retries", () => {
  test("a lost answer: the submit is sent again with the same key and finds its task", async () => {
    const proxy = new FaultyProxy(node.url);
    await proxy.start();
    const pc = new Client(proxy.url, { token: node.adminToken, retryBaseMs: 1 });
    try {
      const topic = uniq("ts.retry");
      proxy.dropAnswers = 1;
      const r = await pc.submit({ topic, delay: "1h", target: "http://127.0.0.1:9/h" });
      assert.equal(r.created, false, "the second attempt found the task the first wrote");
      const sent = proxy.seen.filter((s) => s.path === "/v1/tasks").map((s) => (JSON.parse(s.body) as { key: string }).key);
      assert.equal(sent.length, 2);
      assert.equal(sent[0], sent[1]);
      assert.equal((await c.list({ topic })).tasks.length, 1, "one task written");

      // Without a key (autoKey off) an answer lost after sending is not retried.
      const nk = new Client(proxy.url, { token: node.adminToken, retryBaseMs: 1, autoKey: false });
      proxy.dropAnswers = 1;
      await assert.rejects(nk.submit({ topic, delay: "1h", target: "http://127.0.0.1:9/h" }), NetworkError);
      nk.close();
    } finally {
      pc.close();
      await proxy.stop();
    }
  });

  test("503 with Retry-After is waited for, then an UnavailableError", async () => {
    const proxy = new FaultyProxy(node.url);
    await proxy.start();
    const pc = new Client(proxy.url, { token: node.adminToken, retries: 2 });
    try {
      proxy.unavailable = 2;
      proxy.retryAfter = "1";
      const t0 = Date.now();
      const r = await pc.submit({ topic: uniq("ts.503"), delay: "1h", target: "http://127.0.0.1:9/h" });
      assert.equal(r.created, true);
      assert.ok(Date.now() - t0 >= 1900, "waited Retry-After twice");
      proxy.unavailable = 10;
      proxy.retryAfter = "0";
      await assert.rejects(pc.get(r.task.id), (e: unknown) => e instanceof UnavailableError && e.retryAfterMs === 0);
      assert.equal(proxy.unavailable, 7, "three attempts (retries: 2)");
      proxy.unavailable = 1;
      proxy.retryAfter = "600";
      await assert.rejects(pc.get(r.task.id), UnavailableError); // too long to wait: given up at once
    } finally {
      pc.close();
      await proxy.stop();
    }
  });
});

describe("coalescing", () => {
  test("concurrent submits share batch calls, each answered as its own", async () => {
    const proxy = new FaultyProxy(node.url);
    await proxy.start();
    const pc = new Client(proxy.url, { token: node.adminToken });
    try {
      const topic = uniq("ts.co");
      const subs = Array.from({ length: 60 }, (_, i) =>
        pc.submit(i === 7 ? { topic: "bad topic", target: "http://127.0.0.1:9/h" } : { topic, key: `k${i % 50}`, delay: "1h", target: "http://127.0.0.1:9/h" }),
      );
      const res = await Promise.allSettled(subs);
      const bad = res[7]!;
      assert.equal(bad.status, "rejected");
      assert.ok(bad.reason instanceof InvalidError && bad.reason.status === 400);
      const ok = res.filter((r) => r.status === "fulfilled").map((r) => r.value);
      assert.equal(ok.length, 59);
      assert.equal(ok.filter((r) => r.created).length, 50, "k0…k49 created once each, the 9 repeats found");
      assert.ok(proxy.seen.filter((s) => s.path === "/v1/tasks:batch").length >= 1);
      assert.ok(proxy.seen.length < 10, `${proxy.seen.length} calls for 60 submits`);
    } finally {
      pc.close();
      await proxy.stop();
    }
  });
});

describe("webhook signatures", () => {
  test("a real delivery verifies (v2, rotation, v1 opt-in)", async () => {
    const got: { headers: http.IncomingHttpHeaders; body: Buffer; url: string }[] = [];
    const rcv = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        got.push({ headers: req.headers, body: Buffer.concat(chunks), url: req.url ?? "" });
        res.end();
      });
    });
    await new Promise<void>((r) => rcv.listen(0, "127.0.0.1", r));
    try {
      const target = `http://127.0.0.1:${(rcv.address() as AddressInfo).port}/hooks/cancel?order=42`;
      const { task } = await c.submit({ topic: uniq("ts.hook"), target, payload: { order: 42 } });
      const deadline = Date.now() + 20_000;
      while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.equal(got.length >= 1, true, "delivered");
      const d = got[0]!;
      const sig = d.headers["ontime-signature"];
      assert.ok(typeof sig === "string" && sig.includes("v2=") && sig.includes("v1="), String(sig));
      assert.equal(d.headers["ontime-task-id"], task.id);
      assert.equal(verifySignature(sig, target, d.body, node.secret), true);
      assert.equal(verifySignature(sig, ["https://other.example/", target], d.body, ["old-secret", node.secret]), true, "several targets and secrets");
      assert.equal(verifySignature(sig, target, d.body, "wrong-secret"), false);
      assert.equal(verifySignature(sig, "http://127.0.0.1:1/hooks/cancel", d.body, node.secret), false, "v2 is bound to the target");
      assert.equal(verifySignature(sig, "http://127.0.0.1:1/hooks/cancel", d.body, node.secret, { acceptV1: true }), true, "v1 is not");
      assert.equal(verifySignature(sig, target, Buffer.concat([d.body, Buffer.from(" ")]), node.secret), false, "body changed");
      assert.equal(verifySignature(sig, target, d.body, node.secret, { nowSec: Date.now() / 1000 + 3600 }), false, "too old");
      assert.equal(verifySignature(undefined, target, d.body, node.secret), false);
      assert.deepEqual((JSON.parse(d.body.toString()) as { payload: unknown }).payload, { order: 42 });
    } finally {
      rcv.closeAllConnections();
      await new Promise((r) => rcv.close(r));
    }
  });
});
