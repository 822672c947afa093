// startDoppel: the binary on a document, on free loopback ports.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StartFailed, startDoppel } from "@doppelproxy/client";
import { SHOP, TOKEN } from "./shop.mjs";

test("it serves the document on ports of its own until stop() sends SIGTERM", async () => {
  const one = await startDoppel({ config: SHOP, token: TOKEN });
  const two = await startDoppel({ config: SHOP });
  try {
    assert.match(one.proxyUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(one.proxyUrl, two.proxyUrl);
    assert.notEqual(one.adminUrl, one.proxyUrl);
    assert.ok(one.client instanceof Client);
    const resp = await fetch(one.proxyUrl + "/catalog");
    assert.equal(await resp.text(), "catalog");
    assert.equal((await one.client.proxy("shop")).proxy.name, "shop");
  } finally {
    assert.equal(await two.stop(), 0);
  }
  // SIGTERM is a clean stop: a request in flight is answered, the status
  // is 0, and the listener is gone. Called twice, both resolve to it.
  await one.client.session({ shop: { latency: { percentage: 1.0, min: 0.5, max: 0.5 } } }, { id: "slow-catalog-0123456789" });
  const inFlight = fetch(one.proxyUrl + "/catalog", { headers: { "X-Doppel-Session": "slow-catalog-0123456789" } });
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(await Promise.all([one.stop(), one.stop()]), [0, 0]);
  assert.equal(await (await inFlight).text(), "catalog");
  await assert.rejects(fetch(one.proxyUrl + "/catalog"));
  assert.equal(await one.stop(), 0); // twice is harmless
});

test("an invalid document rejects at once with Doppel's violations", async () => {
  const started = Date.now();
  await assert.rejects(startDoppel({ config: "proxies:\n  - name: a\n    url: nope\n" }), (e) => {
    assert.ok(e instanceof StartFailed, String(e));
    assert.equal(e.code, "START_FAILED");
    assert.match(e.message, /exited with status 1/);
    assert.match(e.message, /proxies\[0\]\.url: url must be absolute/);
    return true;
  });
  assert.ok(Date.now() - started < 5000, "it waited for a timeout");
});

test("no binary says where it looked", async (t) => {
  const saved = { bin: process.env.DOPPEL_BIN, path: process.env.PATH };
  t.after(() => {
    process.env.PATH = saved.path;
    if (saved.bin === undefined) delete process.env.DOPPEL_BIN; else process.env.DOPPEL_BIN = saved.bin;
  });
  process.env.DOPPEL_BIN = "/nonexistent/doppel";
  await assert.rejects(startDoppel({ config: SHOP }), (e) => e instanceof StartFailed && /DOPPEL_BIN is "\/nonexistent\/doppel"/.test(e.message));

  delete process.env.DOPPEL_BIN;
  process.env.PATH = "/nonexistent-a:/nonexistent-b";
  await assert.rejects(startDoppel({ config: SHOP }),
    (e) => e instanceof StartFailed && /DOPPEL_BIN is not set/.test(e.message) && /PATH \(\/nonexistent-a:\/nonexistent-b\)/.test(e.message));
});

test("without DOPPEL_BIN the doppel on PATH is run", async (t) => {
  const bin = process.env.DOPPEL_BIN;
  if (!bin) return t.skip("DOPPEL_BIN is not set: nothing to put on PATH");
  const dir = mkdtempSync(join(tmpdir(), "doppel-test-"));
  symlinkSync(bin, join(dir, "doppel"));
  const saved = process.env.PATH;
  t.after(() => { process.env.PATH = saved; process.env.DOPPEL_BIN = bin; rmSync(dir, { recursive: true, force: true }); });
  delete process.env.DOPPEL_BIN;
  process.env.PATH = `/nonexistent-a:${dir}`;
  const d = await startDoppel({ config: SHOP });
  assert.equal(await (await fetch(d.proxyUrl + "/catalog")).text(), "catalog");
  assert.equal(await d.stop(), 0);
});

test("a binary that cannot be run says so", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "doppel-test-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const bin = join(dir, "doppel");
  writeFileSync(bin, "#!/bin/sh\nexit 0\n");
  chmodSync(bin, 0o644);
  await assert.rejects(startDoppel({ config: SHOP, binary: bin }),
    (e) => e instanceof StartFailed && e.message.startsWith(`cannot run ${bin}: `) && /EACCES/.test(e.message));
  chmodSync(bin, 0o755);
  await assert.rejects(startDoppel({ config: SHOP, binary: bin }),
    (e) => e instanceof StartFailed && e.message.startsWith(`${bin} exited with status 0 before it was ready`));
});
