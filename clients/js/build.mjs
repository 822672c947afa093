// The prepare script: builds dist/ with TypeScript. `npm install` of this
// folder from another project runs it without installing the folder's
// dev dependencies, so it installs them first when they are missing.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, "node_modules", "typescript", "bin", "tsc");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: here, stdio: "inherit" });

if (!existsSync(tsc) || !existsSync(join(here, "node_modules", "@types", "node"))) {
  // The npm running this script, whichever it is.
  const npm = process.env.npm_execpath;
  const args = ["ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"];
  if (npm && npm.endsWith(".js")) run(process.execPath, [npm, ...args]);
  else run(process.platform === "win32" ? "npm.cmd" : "npm", args);
}
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
