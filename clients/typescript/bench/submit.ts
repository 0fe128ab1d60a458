// Submit rate of this client against a node: `workers` loops submitting
// keyed tasks (due in an hour, so nothing is delivered meanwhile) for
// `secs` seconds. Prints one JSON line. Run by bench/clients (the Go
// driver that puts the three clients side by side):
//   node dist/bench/submit.js URL WORKERS SECS [coalesce|nocoalesce]
import { Client } from "../src/index.js";

const [url, workersArg, secsArg, co] = process.argv.slice(2);
if (!url) throw new Error("usage: submit.js URL WORKERS SECS [coalesce|nocoalesce]");
const workers = Number(workersArg ?? "1");
const secs = Number(secsArg ?? "2");
const c = new Client(url, { coalesce: co !== "nocoalesce" });
const run = `ts${process.pid}x${Date.now().toString(36)}`;
let seq = 0;
const submitOne = () => c.submit({ topic: "bench.clients", key: `${run}-${seq++}`, delay: "1h", target: "http://127.0.0.1:9/h", payload: { n: seq } });

// Warm up: connections open, JIT done.
for (let i = 0; i < 500; i++) await submitOne();
let done = 0;
const cpu0 = process.cpuUsage();
const start = process.hrtime.bigint();
const until = start + BigInt(Math.round(secs * 1e9));
await Promise.all(
  Array.from({ length: workers }, async () => {
    while (process.hrtime.bigint() < until) {
      await submitOne();
      done++;
    }
  }),
);
const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
const cpu = process.cpuUsage(cpu0);
// CPU time of this process per submit (user + system, µs): what the client costs, whatever the machine's load.
console.log(JSON.stringify({ client: "typescript", workers, tasks: done, secs: elapsed, rate: done / elapsed, cpu_us: (cpu.user + cpu.system) / done }));
c.close();
