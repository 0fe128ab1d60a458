// A webhook receiver on Node's http module that accepts only calls signed
// by ontime. Run: ONTIME_WEBHOOK_SECRET=… node dist/examples/receiver-http.js
// and submit tasks with target http://127.0.0.1:8080/hooks/cancel.
import * as http from "node:http";

import { verifySignature } from "../src/index.js";

// The URL given to ontime as the tasks' target, exactly as submitted: the
// v2 signature covers it, so a call signed for another receiver fails here.
const TARGET = process.env["TARGET"] ?? "http://127.0.0.1:8080/hooks/cancel";
// Several during a rotation: "new,old".
const SECRETS = (process.env["ONTIME_WEBHOOK_SECRET"] ?? "").split(",").filter(Boolean);

http
  .createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks); // verify the raw bytes, before parsing
      if (!verifySignature(req.headers["ontime-signature"], TARGET, body, SECRETS)) {
        res.writeHead(401).end("bad signature");
        return;
      }
      const task = JSON.parse(body.toString("utf8")) as { id: string; topic: string; key?: string; payload: unknown; attempt: number };
      console.log("task", task.id, task.topic, task.key, task.payload, "attempt", task.attempt);
      res.writeHead(204).end(); // any 2xx: done; anything else: ontime retries
    });
  })
  .listen(8080, "127.0.0.1");
