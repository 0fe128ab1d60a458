// Fails when openapi-typescript made a field of gen/schema.d.ts a type no
// value has: Record<string, never> is what an object schema without
// properties becomes (how `payload` and the batch entries were typed before
// they became {} and a $ref), so a program could never set such a field.
// The file's own top-level `webhooks` and `$defs` (none in the document)
// are that type legitimately.
import { readFileSync } from "node:fs";

const bad = readFileSync("gen/schema.d.ts", "utf8")
  .split("\n")
  .map((line, i) => ({ line, n: i + 1 }))
  .filter(({ line }) => line.includes("Record<string, never>") && !/^export type (webhooks|\$defs) = /.test(line));
for (const { line, n } of bad) console.error(`gen/schema.d.ts:${n}: ${line.trim()}`);
if (bad.length > 0) {
  console.error("a schema of apiv1/openapi.json types as Record<string, never>: give it properties, or make it {} (any JSON value)");
  process.exit(1);
}
