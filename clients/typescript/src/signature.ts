// Checking ontime's webhook signature in a receiver.
//
// A webhook call carries Ontime-Signature: t=<unix seconds>,v2=<hex>[,v2=<hex>…][,v1=<hex>]
// where v2 = HMAC-SHA256(secret, t + "." + target + "." + body), target being
// the task's target URL exactly as submitted (query included). During a
// secret rotation the call carries one v2 per secret. v1 (HMAC of
// t + "." + body, not bound to the target) is sent only when the node has
// delivery.signature_v1 on, for receivers not yet moved to v2: a v1
// signature is valid at every receiver sharing the secret, so it is
// refused unless acceptV1 is set.

import { createHmac, timingSafeEqual } from "node:crypto";

export interface VerifyOptions {
  /** Refuse timestamps further than this from now (replays); default 300 s. */
  toleranceSec?: number;
  /** The time to check against, in seconds since the epoch; default now. */
  nowSec?: number;
  /** Also accept the v1 scheme (not bound to the target); default false. */
  acceptV1?: boolean;
}

/**
 * verifySignature reports whether header (the Ontime-Signature value)
 * holds a valid signature of body for target by one of secrets.
 *
 * @param header  the Ontime-Signature header (req.headers["ontime-signature"])
 * @param target  the URL this receiver was given to ontime as the task's target, exactly
 *                as submitted; several when the receiver is known by several
 * @param body    the raw request body, before any JSON parsing
 * @param secrets the secret, or several during a rotation (new and old)
 */
export function verifySignature(
  header: string | string[] | undefined,
  target: string | readonly string[],
  body: Uint8Array | string,
  secrets: string | readonly string[],
  options: VerifyOptions = {},
): boolean {
  if (Array.isArray(header)) header = header.join(",");
  if (typeof header !== "string" || header === "") return false;
  const tolerance = options.toleranceSec ?? 300;
  const now = options.nowSec ?? Date.now() / 1000;
  let ts: string | undefined;
  const v2: Buffer[] = [];
  const v1: Buffer[] = [];
  for (const part of header.split(",")) {
    const i = part.indexOf("=");
    if (i < 0) continue;
    const key = part.slice(0, i).trim();
    const value = part.slice(i + 1).trim();
    if (key === "t") ts = value;
    else if ((key === "v2" || key === "v1") && /^[0-9a-f]{64}$/.test(value)) (key === "v2" ? v2 : v1).push(Buffer.from(value, "hex"));
  }
  if (ts === undefined || !/^[0-9]{1,15}$/.test(ts)) return false;
  if (Math.abs(now - Number(ts)) > tolerance) return false;
  const raw = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const targets = typeof target === "string" ? [target] : target;
  const keys = typeof secrets === "string" ? [secrets] : secrets;
  let ok = false;
  // Every comparison is made, whatever matched: the time taken does not
  // tell which secret or signature was right.
  for (const secret of keys) {
    if (secret === "") continue;
    for (const t of targets) {
      const want = createHmac("sha256", secret).update(ts + "." + t + ".").update(raw).digest();
      for (const sig of v2) ok = timingSafeEqual(want, sig) || ok;
    }
    if (options.acceptV1) {
      const want = createHmac("sha256", secret).update(ts + ".").update(raw).digest();
      for (const sig of v1) ok = timingSafeEqual(want, sig) || ok;
    }
  }
  return ok;
}
