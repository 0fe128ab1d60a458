// Calls to an http:// node as HTTP/1.1 over kept-alive node:net sockets:
// the default for http:// nodes (https:// and a caller's own agent go
// through node:http(s)). node:http's ClientRequest and IncomingMessage
// (streams, events, header objects, an agent's bookkeeping) cost about
// three times what the call itself does: on a loaded 2-core machine a loop
// of keyed submits through node:http took 520–690 µs of CPU each and made
// 130–240/s; over these connections 100–260 µs and 290–1,600/s (the Go
// client in the same run: 95–140 µs, 820–2,100/s). The protocol
// spoken is the small part of HTTP/1.1 a node answers with: a status line,
// headers, a body of Content-Length bytes, chunked, or up to the close;
// the Java client's Http1Transport does the same for the same reason.
//
// Each request is written in one write (head and body in one string) on an
// idle connection (the most recent first) or a new one, up to maxSockets;
// beyond that it waits for a connection to be free. Idle connections do not
// keep the process alive (unref), and one the node closes while idle is
// dropped.

import * as net from "node:net";

export interface H1Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A failed exchange; unsent: the request cannot have reached the node (the connection was never made). */
export class H1Error extends Error {
  constructor(
    message: string,
    readonly unsent: boolean,
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const MAX_HEAD = 64 << 10;
const MAX_BODY = 64 << 20;
const CRLF2 = Buffer.from("\r\n\r\n");

type Done = (err: Error | undefined, a?: H1Answer) => void;

// One connection and the answer it is reading.
class Conn {
  readonly sock: net.Socket;
  private done: Done | null = null;
  private head = true; // reading a head (or between answers)
  private buf: Buffer | null = null;
  private status = 0;
  private headers: Record<string, string> = {};
  private noBody = false;
  private bodyLen = -1; // Content-Length; -1 chunked or to the close
  private chunked = false;
  private chunks: Buffer[] = [];
  private got = 0;
  private keep = true;
  private connected = false;
  closed = false;

  constructor(
    private readonly pool: Http1Pool,
    host: string,
    port: number,
  ) {
    // onread: the bytes are read into the pool's buffer and handed over
    // here, without the stream machinery of "data" events (a fifth of a
    // sequential submit's CPU); what is kept is copied out.
    this.sock = net.connect({
      host,
      port,
      noDelay: true,
      onread: {
        buffer: pool.readBuf,
        callback: (n: number, b: Uint8Array) => {
          const d = Buffer.allocUnsafe(n);
          d.set(b.subarray(0, n));
          this.onData(d);
          return true;
        },
      },
    });
    this.sock.once("connect", () => {
      this.connected = true;
    });
    this.sock.on("error", (e: NodeJS.ErrnoException) => this.onClose(e));
    this.sock.on("close", () => this.onClose(undefined));
  }

  send(req: string, head: boolean, done: Done): void {
    this.done = done;
    this.head = true;
    this.noBody = head;
    this.sock.ref();
    this.sock.write(req);
  }

  /** Ends the exchange in progress with err and closes the connection. */
  abort(err: Error): void {
    const d = this.done;
    this.done = null;
    this.sock.destroy();
    d?.(err);
  }

  private onClose(e: NodeJS.ErrnoException | undefined): void {
    if (!this.closed) {
      this.closed = true;
      this.sock.destroy();
      this.pool.closed(this);
    }
    const d = this.done;
    if (d === null) return;
    if (e === undefined && !this.head && this.bodyLen < 0 && !this.chunked) {
      // A body that runs to the close has ended.
      this.done = null;
      this.keep = false;
      return d(undefined, this.answer());
    }
    this.done = null;
    // Nothing was sent on a connection that was never made (refused, no
    // route, no such host): the request waited in the socket's buffer.
    d(new H1Error(e?.message || "socket hang up", !this.connected, e?.code ?? "ECONNRESET", { cause: e }));
  }

  private fail(msg: string): void {
    this.abort(new H1Error(`reading the answer: ${msg}`, false, "EPROTO"));
  }

  private onData(d: Buffer): void {
    if (this.done === null) {
      // Bytes nobody asked for: the connection is out of step.
      this.sock.destroy();
      return;
    }
    if (!this.head && !this.chunked) {
      this.body(d);
      return;
    }
    this.buf = this.buf === null || this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    while (this.done !== null && this.buf.length > 0) {
      if (this.head) {
        const i = this.buf.indexOf(CRLF2);
        if (i < 0) {
          if (this.buf.length > MAX_HEAD) this.fail("head longer than 64 KiB");
          return;
        }
        const text = this.buf.toString("latin1", 0, i);
        this.buf = this.buf.subarray(i + 4);
        if (!this.parseHead(text)) return;
        if (this.head) continue; // 1xx: the answer's head follows
        if (!this.chunked) {
          const rest = this.buf;
          this.buf = null;
          this.body(rest);
          return;
        }
      }
      if (!this.chunkStep()) return;
    }
  }

  // parseHead reads a status line and headers; false after a failure.
  private parseHead(text: string): boolean {
    const lines = text.split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? "");
    if (!m) {
      this.fail(`not an HTTP/1 status line: ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`);
      return false;
    }
    const status = Number(m[2]);
    if (status >= 100 && status < 200) return true; // 100 Continue, 103: another head follows
    const h: Record<string, string> = {};
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i]!;
      const c = l.indexOf(":");
      if (c <= 0) continue;
      const k = l.slice(0, c).trim().toLowerCase();
      const v = l.slice(c + 1).trim();
      h[k] = h[k] === undefined ? v : h[k] + ", " + v;
    }
    this.status = status;
    this.headers = h;
    this.head = false;
    this.chunks = [];
    this.got = 0;
    const conn = (h["connection"] ?? "").toLowerCase();
    this.keep = m[1] === "1" ? !conn.includes("close") : conn.includes("keep-alive");
    this.chunked = false;
    this.bodyLen = -1;
    if (this.noBody || status === 204 || status === 304) {
      this.bodyLen = 0;
    } else if ((h["transfer-encoding"] ?? "").toLowerCase().includes("chunked")) {
      this.chunked = true;
      this.chunkState = 0;
    } else if (h["content-length"] !== undefined) {
      const n = Number(h["content-length"]);
      if (!/^\d+$/.test(h["content-length"]) || n > MAX_BODY) {
        this.fail(`Content-Length ${JSON.stringify(h["content-length"])}`);
        return false;
      }
      this.bodyLen = n;
    } else {
      this.keep = false; // the body runs to the close
    }
    return true;
  }

  // body takes bytes of a Content-Length (or to-the-close) body.
  private body(d: Buffer): void {
    if (this.bodyLen < 0) {
      if (d.length > 0) this.chunks.push(d);
      this.got += d.length;
      if (this.got > MAX_BODY) this.fail("body larger than 64 MiB");
      return;
    }
    const need = this.bodyLen - this.got;
    if (d.length > need) {
      this.fail("more bytes than Content-Length");
      return;
    }
    if (d.length > 0) this.chunks.push(d);
    this.got += d.length;
    if (this.got === this.bodyLen) this.finish();
  }

  // chunkState: 0 size line, 1 data (chunkLeft bytes, then CRLF), 2 trailers.
  private chunkState = 0;
  private chunkLeft = 0;

  // chunkStep consumes what it can of this.buf; false when it needs more bytes (or ended).
  private chunkStep(): boolean {
    const b = this.buf!;
    switch (this.chunkState) {
      case 0: {
        const i = b.indexOf("\r\n");
        if (i < 0) {
          if (b.length > 1024) this.fail("chunk size line too long");
          return false;
        }
        const size = parseInt(b.toString("latin1", 0, i).split(";")[0]!.trim(), 16);
        if (!Number.isFinite(size) || size < 0) {
          this.fail("bad chunk size");
          return false;
        }
        this.buf = b.subarray(i + 2);
        if (size === 0) {
          this.chunkState = 2;
        } else {
          if (this.got + size > MAX_BODY) {
            this.fail("body larger than 64 MiB");
            return false;
          }
          this.chunkLeft = size;
          this.chunkState = 1;
        }
        return true;
      }
      case 1: {
        if (this.chunkLeft > 0) {
          const n = Math.min(this.chunkLeft, b.length);
          this.chunks.push(b.subarray(0, n));
          this.got += n;
          this.chunkLeft -= n;
          this.buf = b.subarray(n);
          return this.buf.length > 0;
        }
        if (b.length < 2) return false;
        this.buf = b.subarray(2);
        this.chunkState = 0;
        return true;
      }
      default: {
        // Trailers: lines up to an empty one.
        const i = b.indexOf("\r\n");
        if (i < 0) return false;
        this.buf = b.subarray(i + 2);
        if (i === 0) {
          this.finish();
          return false;
        }
        return true;
      }
    }
  }

  private answer(): H1Answer {
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.got);
    this.chunks = [];
    return { status: this.status, headers: this.headers, body };
  }

  private finish(): void {
    const d = this.done!;
    this.done = null;
    const a = this.answer();
    const extra = this.buf !== null && this.buf.length > 0;
    this.buf = null;
    this.head = true;
    this.chunked = false;
    if (!this.keep || extra) this.sock.destroy();
    else this.pool.release(this);
    d(undefined, a);
  }
}

/** Kept-alive HTTP/1.1 connections to one host and port. */
export class Http1Pool {
  /** @internal every connection's read buffer: a read is copied out at once. */
  readonly readBuf = Buffer.allocUnsafe(64 << 10);
  private idle: Conn[] = [];
  private open = 0;
  private waiting: Array<(c: Conn) => void> = [];
  private destroyed = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly maxSockets: number,
  ) {}

  /**
   * Sends req (the request's head and body, whole) and reads the answer.
   * A timeout or an abort closes the connection.
   */
  request(req: string, isHead: boolean, timeoutMs: number, signal: AbortSignal | undefined): Promise<H1Answer> {
    return new Promise((resolve, reject) => {
      let conn: Conn | null = null;
      let settled = false;
      const done: Done = (err, a) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err === undefined) resolve(a!);
        else reject(err);
      };
      const timer = setTimeout(() => {
        const e = new H1Error(`no answer within ${timeoutMs} ms`, false, "ETIMEDOUT");
        if (conn) conn.abort(e);
        else done(e);
      }, timeoutMs);
      const onAbort = () => {
        const e = signal?.reason ?? new Error("aborted");
        if (conn) conn.abort(e);
        else done(e);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.take((c) => {
        if (settled) {
          this.release(c);
          return;
        }
        conn = c;
        c.send(req, isHead, done);
      });
    });
  }

  /** Closes every connection; calls in progress fail. */
  destroy(): void {
    this.destroyed = true;
    for (const c of this.idle) c.sock.destroy();
    this.idle = [];
  }

  private take(use: (c: Conn) => void): void {
    this.destroyed = false;
    for (;;) {
      const c = this.idle.pop();
      if (c === undefined) break;
      if (!c.closed) return use(c);
    }
    if (this.open < this.maxSockets) {
      this.open++;
      return use(new Conn(this, this.host, this.port));
    }
    this.waiting.push(use);
  }

  /** @internal c finished an exchange and may carry the next. */
  release(c: Conn): void {
    if (c.closed) return;
    if (this.destroyed) {
      c.sock.destroy();
      return;
    }
    const w = this.waiting.shift();
    if (w !== undefined) return w(c);
    c.sock.unref();
    this.idle.push(c);
  }

  /** @internal c's socket closed. */
  closed(c: Conn): void {
    this.open--;
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
    const w = this.waiting.shift();
    if (w !== undefined) {
      this.open++;
      w(new Conn(this, this.host, this.port));
    }
  }
}
