// The client's HTTP/1.1 connections (src/http1.ts) against a server that
// answers as HTTP/1.1 servers may: Content-Length, chunked, a body up to
// the close, Connection: close, a 100 Continue first; one that closes an
// idle connection, and one that never answers.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, test } from "node:test";

import { Client, NetworkError } from "../src/index.js";

// A server that answers each request with the next of `answers` (raw bytes,
// cycled), records the requests and counts connections.
class RawServer {
  answers: string[] = [];
  requests: string[] = [];
  conns = 0;
  url = "";
  private n = 0;
  private socks = new Set<net.Socket>();
  private server = net.createServer((s) => {
    this.conns++;
    this.socks.add(s);
    s.on("close", () => this.socks.delete(s));
    let buf = "";
    s.on("data", (d) => {
      buf += d.toString("latin1");
      for (;;) {
        const i = buf.indexOf("\r\n\r\n");
        if (i < 0) return;
        const m = /content-length: (\d+)/i.exec(buf.slice(0, i));
        const end = i + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < end) return;
        this.requests.push(buf.slice(0, end));
        buf = buf.slice(end);
        const a = this.answers[this.n++ % this.answers.length]!;
        if (a === "hang") continue;
        if (a.endsWith("<close>")) {
          s.end(a.slice(0, -"<close>".length));
          return;
        }
        s.write(a);
      }
    });
  });

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  closeIdle(): void {
    for (const s of this.socks) s.end();
  }

  async stop(): Promise<void> {
    for (const s of this.socks) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const json = (status: number, body: string, extra = "") => `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

let srv: RawServer;
before(async () => {
  srv = new RawServer();
  await srv.start();
});
after(async () => srv.stop());

test("framings: Content-Length, chunked, to the close, 100 Continue, Connection: close", async () => {
  const c = new Client(srv.url, { token: "t0k", headers: { "X-Extra": "1" } });
  try {
    const big = JSON.stringify({ status: "ok", pad: "é".repeat(100_000) });
    const chunked = `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n` + [big.slice(0, 7), big.slice(7, 50_000), big.slice(50_000)].map((p) => `${Buffer.byteLength(p).toString(16)};ext=1\r\n${p}\r\n`).join("") + "0\r\ntrailer: x\r\n\r\n";
    srv.answers = [
      json(200, '{"status":"ok"}'),
      chunked,
      "HTTP/1.1 100 Continue\r\n\r\n" + json(200, '{"status":"continued"}'),
      json(200, '{"status":"closing"}', "connection: close\r\n"),
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"status":"to the close"}<close>',
      json(200, '{"status":"after"}'),
    ];
    const conns0 = srv.conns;
    assert.equal((await c.health()).status, "ok");
    assert.equal(((await c.health()) as { pad?: string }).pad, "é".repeat(100_000));
    assert.equal((await c.health()).status, "continued");
    assert.equal(srv.conns - conns0, 1, "one kept-alive connection");
    assert.equal((await c.health()).status, "closing");
    assert.equal((await c.health()).status, "to the close");
    assert.equal((await c.health()).status, "after");
    assert.equal(srv.conns - conns0, 3, "a new connection after each close");
    const r = srv.requests.at(-1)!;
    assert.match(r, /^GET \/healthz HTTP\/1\.1\r\n/);
    assert.match(r, /\r\nhost: 127\.0\.0\.1:\d+\r\n/);
    assert.match(r, /\r\nauthorization: Bearer t0k\r\n/);
    assert.match(r, /\r\nX-Extra: 1\r\n/);
  } finally {
    c.close();
  }
});

test("a body is sent with its length, in one request", async () => {
  const c = new Client(srv.url, { coalesce: false });
  try {
    srv.answers = [json(201, '{"id":"t1","status":"pending"}')];
    const r = await c.submit({ topic: "t", key: "ké", target: "http://x/", payload: { a: "ü" } });
    assert.equal(r.created, true);
    const req = srv.requests.at(-1)!;
    const body = req.slice(req.indexOf("\r\n\r\n") + 4);
    assert.equal(Number(/content-length: (\d+)/.exec(req)![1]), Buffer.byteLength(Buffer.from(body, "latin1").toString()));
    assert.deepEqual(JSON.parse(Buffer.from(body, "latin1").toString()).payload, { a: "ü" });
  } finally {
    c.close();
  }
});

test("a connection the server closed while idle is not used again", async () => {
  const c = new Client(srv.url);
  try {
    srv.answers = [json(200, '{"status":"ok"}')];
    await c.health();
    srv.closeIdle();
    await new Promise((r) => setTimeout(r, 50));
    const conns0 = srv.conns;
    assert.equal((await c.health()).status, "ok");
    assert.equal(srv.conns - conns0, 1);
  } finally {
    c.close();
  }
});

test("no answer within the timeout, a refused connection, a header that is not one", async () => {
  const c = new Client(srv.url, { timeoutMs: 200, retries: 0 });
  try {
    srv.answers = ["hang"];
    await assert.rejects(c.health(), (e: unknown) => e instanceof NetworkError && /no answer within 200 ms/.test(e.message));
  } finally {
    c.close();
  }
  const gone = net.createServer();
  await new Promise<void>((r) => gone.listen(0, "127.0.0.1", r));
  const port = (gone.address() as net.AddressInfo).port;
  await new Promise<void>((r) => gone.close(() => r()));
  // Refused: nothing was sent, so even a keyless submit is retried (then fails).
  const r = new Client(`http://127.0.0.1:${port}`, { retries: 1, retryBaseMs: 1, autoKey: false, coalesce: false });
  await assert.rejects(r.submit({ topic: "t", target: "http://x/" }), (e: unknown) => e instanceof NetworkError && /after 2 attempts/.test(e.message));
  assert.throws(() => new Client(srv.url, { headers: { "x-a": "1\r\nx-b: 2" } }), /headers\.x-a/);
  assert.throws(() => new Client(srv.url, { headers: { "content-length": "1" } }), /headers\.content-length/);
  await assert.rejects(new Client(srv.url).health({ requestId: "a\nb" }), /requestId/);
});
