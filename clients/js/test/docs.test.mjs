// The retry test of docs/typescript.md, run as written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { SHOP, TOKEN } from "./shop.mjs";

const docs = fileURLToPath(new URL("../../../docs/typescript.md", import.meta.url));

test("the documented retry test passes", async (t) => {
  if (!existsSync(docs)) return t.skip("not in Doppel's repository");
  const code = /## A retry test[\s\S]*?```js\n([\s\S]*?)```/.exec(readFileSync(docs, "utf8"))[1];
  assert.ok(code.trim().split("\n").filter((l) => l.trim()).length <= 16, "the retry test has grown");
  // In the package's folder, so that it imports the package by its name.
  const file = fileURLToPath(new URL(`./.docs-retry-${process.pid}.mjs`, import.meta.url));
  const dir = mkdtempSync(`${tmpdir()}/doppel-docs-`);
  t.after(() => { rmSync(file, { force: true }); rmSync(dir, { recursive: true, force: true }); });
  writeFileSync(file, code);
  writeFileSync(`${dir}/doppel.yaml`, SHOP.replace(TOKEN, "my-test-token-0123456789abcdefghij"));
  // Without NODE_TEST_CONTEXT, which would make it report to this run.
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const { stdout } = await promisify(execFile)(process.execPath, ["--test", "--test-reporter=tap", file], { cwd: dir, env }).catch((e) => {
    assert.fail(`the documented test failed:\n${e.stdout}${e.stderr}`);
  });
  assert.match(stdout, /# pass 1\b/);
  assert.match(stdout, /# fail 0\b/);
});
