// Fails when src/openapi.ts is not what `npm run gen` makes of
// apiv1/openapi.json now: the committed types must follow the document.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "ontime-gen-"));
try {
  const out = join(dir, "openapi.ts");
  execFileSync(process.execPath, ["node_modules/openapi-typescript/bin/cli.js", "../../apiv1/openapi.json", "-o", out], { stdio: ["ignore", "ignore", "inherit"] });
  if (readFileSync(out, "utf8") !== readFileSync("src/openapi.ts", "utf8")) {
    console.error("src/openapi.ts is not current with apiv1/openapi.json: run `npm run gen` in clients/typescript and commit it");
    process.exit(1);
  }
  console.log("src/openapi.ts is current with apiv1/openapi.json");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
