// Starts a real `ontime serve` for the tests: SQLite in a temporary
// directory, two tokens (admin and read), a webhook secret with v1
// signatures on, a scan job whose table does not exist (its routes answer,
// its runs fail). The binary is $ONTIME_BIN, else built with `go build`
// from this repository.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface TestNode {
  url: string;
  adminToken: string;
  readToken: string;
  secret: string;
  stop(): Promise<void>;
  log(): string;
}

const here = dirname(fileURLToPath(import.meta.url));

export function repoRoot(): string {
  // dist/test/ → clients/typescript → repository root.
  let d = here;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(d, "go.mod")) && existsSync(join(d, "cmd", "ontime"))) return d;
    d = dirname(d);
  }
  throw new Error("cannot find the repository root (go.mod, cmd/ontime) above " + here);
}

let built: string | undefined;

export function ontimeBinary(): string {
  if (process.env["ONTIME_BIN"]) return resolve(process.env["ONTIME_BIN"]);
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "ontime-ts-bin-"));
    built = join(dir, "ontime");
    execFileSync("go", ["build", "-o", built, "./cmd/ontime"], { cwd: repoRoot(), stdio: ["ignore", "inherit", "inherit"] });
  }
  return built;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => res(port));
    });
  });
}

export async function startNode(): Promise<TestNode> {
  const dir = mkdtempSync(join(tmpdir(), "ontime-ts-node-"));
  const port = await freePort();
  const adminToken = "admin-" + Math.random().toString(36).slice(2).padEnd(20, "x");
  const readToken = "read-" + Math.random().toString(36).slice(2).padEnd(20, "x");
  const secret = "whsec-" + Math.random().toString(36).slice(2).padEnd(20, "y");
  writeFileSync(join(dir, "secret"), secret + "\n");
  const cfg = `data_dir: ${join(dir, "data")}
log_level: warn
store:
  tables: 2
  segments: 2
hot:
  window: 1s
delivery:
  webhook_secret_file: ${join(dir, "secret")}
  signature_v1: true
  retry_base: 50ms
  retry_max: 200ms
auth:
  tokens:
    - {name: admin, token_env: CLIENT_TEST_ADMIN_TOKEN, role: admin}
    - {name: reader, token_env: CLIENT_TEST_READ_TOKEN, role: read}
jobs:
  - name: bills
    cron: "@every 1h"
    source:
      driver: sqlite
      databases: ["${join(dir, "app.db")}"]
      table: bill
      key: id
      columns: [id, amount]
      where: {status: 0}
    process:
      target: http://127.0.0.1:9/bills
    on_success:
      set: {status: 1}
`;
  writeFileSync(join(dir, "ontime.yaml"), cfg);
  const proc: ChildProcess = spawn(ontimeBinary(), ["serve", "--config", join(dir, "ontime.yaml")], {
    // ontime serve refuses an ONTIME_* variable that is no config key
    // (ONTIME_BIN is the tests'): only ONTIME_LISTEN is passed.
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ONTIME_"))), ONTIME_LISTEN: `127.0.0.1:${port}`, CLIENT_TEST_ADMIN_TOKEN: adminToken, CLIENT_TEST_READ_TOKEN: readToken },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let logs = "";
  proc.stdout!.on("data", (c: Buffer) => (logs += c.toString()));
  proc.stderr!.on("data", (c: Buffer) => (logs += c.toString()));
  const exited = new Promise<void>((res) => proc.once("exit", () => res()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error("ontime serve exited: " + logs);
    try {
      const r = await fetch(url + "/readyz");
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error("ontime serve not ready within 60 s: " + logs);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    adminToken,
    readToken,
    secret,
    log: () => logs,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
