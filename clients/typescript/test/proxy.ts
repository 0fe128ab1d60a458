// A proxy in front of the test node that can lose answers and answer 503,
// so the client's retries are tested against the real node behind it; and
// that can drop the Prefer header, as a node older than it would ignore it.

import * as http from "node:http";
import type { AddressInfo } from "node:net";

export interface Seen {
  method: string;
  path: string;
  body: string;
  /** The request's Prefer header, as the client sent it. */
  prefer?: string | undefined;
  /** The answer's Preference-Applied header. */
  applied?: string | null | undefined;
}

export class FaultyProxy {
  /** The next this many requests are forwarded, and their answer dropped (the connection reset). */
  dropAnswers = 0;
  /** The next this many requests are answered 503 with this Retry-After, not forwarded. */
  unavailable = 0;
  retryAfter = "0";
  /** Requests go to the node without their Prefer header. */
  dropPrefer = false;
  readonly seen: Seen[] = [];
  private server: http.Server;
  url = "";

  constructor(private readonly upstream: string) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const prefer = req.headers["prefer"];
    const seen: Seen = { method: req.method ?? "", path: req.url ?? "", body: body.toString(), prefer: Array.isArray(prefer) ? prefer.join(", ") : prefer };
    this.seen.push(seen);
    if (this.unavailable > 0) {
      this.unavailable--;
      res.writeHead(503, { "content-type": "application/json", "retry-after": this.retryAfter });
      res.end(JSON.stringify({ error: { code: "unavailable", message: "proxy: try again" } }));
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "connection" && !(this.dropPrefer && k === "prefer")) headers[k] = v;
    const up = await fetch(this.upstream + (req.url ?? "/"), { method: req.method ?? "GET", headers, body: body.length > 0 ? body : null });
    const answer = Buffer.from(await up.arrayBuffer());
    seen.applied = up.headers.get("preference-applied");
    if (this.dropAnswers > 0) {
      this.dropAnswers--;
      req.socket.destroy(); // the node did the work; the caller never hears of it
      return;
    }
    const out: Record<string, string> = {};
    up.headers.forEach((v, k) => {
      if (k !== "content-length" && k !== "connection" && k !== "keep-alive" && k !== "transfer-encoding") out[k] = v;
    });
    res.writeHead(up.status, out);
    res.end(answer);
  }
}
