// Verify ontime's webhook signature (Ontime-Signature, v2) in Node.js.
//
// Built-in crypto only. Copy verify() into your receiver:
//
//   const ok = verify(req.headers["ontime-signature"],
//     "https://shop.example/hooks/cancel", // the target URL you gave ontime
//     rawBody,                             // a Buffer, before any JSON parsing
//     ["new-secret", "old-secret"]);       // several during a rotation
"use strict";
const crypto = require("crypto");

function verify(header, target, body, secrets, toleranceSec = 300, nowSec = Date.now() / 1000) {
  let ts = null;
  const sigs = [];
  for (const part of header.split(",")) {
    const i = part.indexOf("=");
    if (i < 0) continue;
    const key = part.slice(0, i).trim();
    const value = part.slice(i + 1).trim();
    if (key === "t") ts = value;
    else if (key === "v2" && /^[0-9a-f]{64}$/.test(value)) sigs.push(Buffer.from(value, "hex"));
  }
  if (ts === null || !/^[0-9]+$/.test(ts) || sigs.length === 0) return false;
  if (Math.abs(nowSec - Number(ts)) > toleranceSec) return false;
  const signed = Buffer.concat([Buffer.from(ts + "." + target + "."), body]);
  let ok = false;
  for (const secret of secrets) {
    const want = crypto.createHmac("sha256", secret).update(signed).digest();
    for (const sig of sigs) ok = crypto.timingSafeEqual(want, sig) || ok;
  }
  return ok;
}

module.exports = { verify };

if (require.main === module) {
  // Test harness: node verify.js HEADER TARGET SECRET... < body; exit 0 when valid.
  const [header, target, ...secrets] = process.argv.slice(2);
  const chunks = [];
  process.stdin.on("data", (c) => chunks.push(c));
  process.stdin.on("end", () => process.exit(verify(header, target, Buffer.concat(chunks), secrets) ? 0 : 1));
}
