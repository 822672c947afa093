// A real fetch retry loop, honouring Retry-After, through a loss that
// fails the first two attempts of each Idempotency-Key; then verified.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readError, startDoppel, VerificationFailed } from "@doppelproxy/client";
import { SHOP, TOKEN } from "./shop.mjs";

// Retries a 503 up to `retries` times, waiting what Retry-After says.
async function postWithRetries(url, init, retries) {
  for (let attempt = 0; ; attempt++) {
    const resp = await fetch(url, init);
    if (resp.status !== 503 || attempt === retries) return resp;
    await resp.arrayBuffer();
    const wait = Number(resp.headers.get("Retry-After") ?? "0");
    await new Promise((r) => setTimeout(r, wait * 1000));
  }
}

let doppel;
before(async () => { doppel = await startDoppel({ config: SHOP, token: TOKEN }); });
after(() => doppel?.stop());

test("the retries pass on the third attempt after Retry-After, and verify says so", async () => {
  const resp = await postWithRetries(doppel.proxyUrl + "/orders", {
    method: "POST", headers: { "Idempotency-Key": "order-7", "Content-Type": "application/json" },
    body: JSON.stringify({ item: 7 }),
  }, 3);
  assert.equal(resp.status, 201);
  assert.deepEqual(await resp.json(), { created: true });

  const got = await doppel.client.verify({
    match: { path: "^/orders$", headers: { "Idempotency-Key": "^order-7$" } },
    count: 3, gapsMs: { min: 1000 }, sameHeader: "Idempotency-Key",
  });
  assert.equal(got.matched, 3);
  assert.equal(got.gaps_ms.length, 2);
  assert.ok(Math.min(...got.gaps_ms) >= 1000, `gaps ${got.gaps_ms}`);
  const entries = await doppel.client.requests({ path: "^/orders$" });
  assert.deepEqual(entries.map((e) => e.status), [503, 503, 201]);

  // The conditions are sent: gaps the retries did not leave fail.
  await assert.rejects(doppel.client.verify({ match: { path: "^/orders$" }, gapsMs: { min: 5000 } }), VerificationFailed);
});

test("a client that gives up too soon fails the verification", async () => {
  const resp = await postWithRetries(doppel.proxyUrl + "/orders", {
    method: "POST", headers: { "Idempotency-Key": "order-8" },
  }, 1);
  assert.equal(resp.status, 503);
  assert.equal(readError(resp.status, await resp.text())?.code, "LOSS_INJECTED");

  await assert.rejects(
    doppel.client.verify({ match: { path: "^/orders$", headers: { "Idempotency-Key": "^order-8$" } }, count: 3, sameHeader: "Idempotency-Key" }),
    (e) => {
      assert.ok(e instanceof VerificationFailed, String(e));
      assert.equal(e.code, "VERIFICATION_FAILED");
      assert.equal(e.status, 409);
      assert.equal(e.matched, 2);
      assert.deepEqual(e.requests.map((r) => r.status), [503, 503]);
      assert.match(e.message, /count/);
      return true;
    });

  // Five attempts in all, but not of one key.
  await doppel.client.verify({ match: { path: "^/orders$" }, count: 5 });
  await assert.rejects(doppel.client.verify({ match: { path: "^/orders$" }, count: 5, sameHeader: "Idempotency-Key" }), VerificationFailed);
});
