// Submitting, reading and cancelling tasks. Run against `ontime serve`:
// node dist/examples/submit.js
import { Client, NotFoundError } from "../src/index.js";

const c = new Client({ baseUrl: process.env["ONTIME_SERVER"] ?? "http://127.0.0.1:7070", token: process.env["ONTIME_TOKEN"] });
const { task, created } = await c.submit({
  topic: "order.cancel",
  key: "order-42",
  delay: "30m",
  target: "https://shop.example/hooks/cancel",
  payload: { order: 42 },
});
console.log(created ? "created" : "already there", task.id, task.due_at);
await c.updateByKey("order.cancel", "order-42", { delay: "1h" });
await c.cancelByKey("order.cancel", "order-42");
try {
  await c.get("01jdnosuchtaskxxxxxxxxxxxx");
} catch (e) {
  if (!(e instanceof NotFoundError)) throw e;
}
c.close();
