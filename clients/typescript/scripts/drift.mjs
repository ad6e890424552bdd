// Fails when src/schema.d.ts is not what openapi-typescript makes of ../../openapi.json.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const fresh = join(mkdtempSync(join(tmpdir(), "interlock-drift-")), "schema.d.ts");
execFileSync("npx", ["openapi-typescript", "../../openapi.json", "-o", fresh], { stdio: "ignore" });
if (readFileSync(fresh, "utf8") !== readFileSync("src/schema.d.ts", "utf8")) {
  console.error("src/schema.d.ts does not match openapi.json: run `npm run generate`");
  process.exit(1);
}
console.log("schema.d.ts matches openapi.json");
