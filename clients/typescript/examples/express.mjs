// A webhook receiver on Express (npm install express @ontimehq/client).
// express.raw keeps the body as bytes: the signature is over the raw body,
// so verify before parsing it.
import express from "express";
import { verifySignature } from "@ontimehq/client";

const TARGET = "https://shop.example/hooks/cancel"; // the target given to ontime, exactly as submitted
const SECRETS = process.env.ONTIME_WEBHOOK_SECRET.split(","); // "new,old" during a rotation

const app = express();
app.post("/hooks/cancel", express.raw({ type: "application/json" }), (req, res) => {
  if (!verifySignature(req.get("Ontime-Signature"), TARGET, req.body, SECRETS)) {
    return res.status(401).send("bad signature");
  }
  const task = JSON.parse(req.body.toString("utf8"));
  // … cancel order task.payload.order; a repeated delivery carries the same task.id
  res.sendStatus(204);
});
app.listen(8080);
