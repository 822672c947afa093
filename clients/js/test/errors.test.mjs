// Typed errors: each code of Doppel's closed set is a class of its own,
// all DoppelError with .code and .status.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Client, ConfigInvalid, Conflict, DoppelError, NotFound, RevisionMismatch, RevisionRequired, Unauthorized, startDoppel } from "@doppelproxy/client";
import { SHOP, TOKEN } from "./shop.mjs";

let doppel;
before(async () => { doppel = await startDoppel({ config: SHOP, token: TOKEN }); });
after(() => doppel?.stop());

const EXTRA = { name: "extra", url: "http://127.0.0.1:12/", resolve: { type: "header", header: "X-Backend" } };

const isError = (Cls, code, status) => (e) => {
  assert.ok(e instanceof Cls, `${e?.name}: ${e?.message}`);
  assert.ok(e instanceof DoppelError);
  assert.equal(e.name, Cls.name);
  assert.equal(e.code, code);
  assert.equal(e.status, status);
  return true;
};

test("an update with a stale revision is RevisionMismatch, and the current one passes", async () => {
  const c = doppel.client;
  const { proxy, revision } = await c.proxy("shop");
  assert.equal(proxy.name, "shop");
  const next = await c.updateProxy({ ...proxy, url: "http://127.0.0.1:10/" }, revision);
  assert.notEqual(next, revision);
  await assert.rejects(c.updateProxy({ ...proxy, url: "http://127.0.0.1:11" }, revision),
    isError(RevisionMismatch, "REVISION_MISMATCH", 409));
  assert.equal((await c.proxy("shop")).proxy.url, "http://127.0.0.1:10/");
});

test("a proxy that is not there is NotFound", async () => {
  await assert.rejects(doppel.client.proxy("nowhere"), isError(NotFound, "NOT_FOUND", 404));
  await assert.rejects(doppel.client.deleteProxy("nowhere"), isError(NotFound, "NOT_FOUND", 404));
});

test("create, list and delete a proxy; a taken name is Conflict; a bad one ConfigInvalid", async () => {
  const c = doppel.client;
  const rev = await c.createProxy(EXTRA);
  assert.match(rev, /\S/);
  assert.deepEqual((await c.proxies()).map((p) => p.proxy.name), ["shop", "extra"]);
  await assert.rejects(c.createProxy(EXTRA), isError(Conflict, "CONFLICT", 409));
  await assert.rejects(c.createProxy({ name: "bad", url: "not a url" }), isError(ConfigInvalid, "CONFIG_INVALID", 400));
  await c.deleteProxy("extra");
  assert.deepEqual((await c.proxies()).map((p) => p.proxy.name), ["shop"]);
});

test("no token is Unauthorized, and the message is Doppel's", async () => {
  await assert.rejects(new Client(doppel.adminUrl).createProxy({ name: "x", url: "http://127.0.0.1:12" }),
    (e) => isError(Unauthorized, "UNAUTHORIZED", 401)(e) && /createProxy/.test(e.message));
});

test("status, counters and record answer as documented", async () => {
  const c = doppel.client;
  const st = await c.status();
  assert.ok(Array.isArray(st.proxies) || typeof st.proxies === "object");
  await fetch(doppel.proxyUrl + "/orders", { method: "POST", headers: { "Idempotency-Key": "k" } }).then((r) => r.arrayBuffer());
  assert.equal((await c.counters("shop")).length, 1);
  await c.resetCounters("shop");
  assert.equal((await c.counters("shop")).length, 0);
  const preview = await c.record("shop", { match: "^/orders$" });
  assert.ok(Array.isArray(preview.mocks));
});

test("an update without a revision is RevisionRequired before anything is sent", async () => {
  const { proxy } = await doppel.client.proxy("shop");
  await assert.rejects(doppel.client.updateProxy(proxy, ""), isError(RevisionRequired, "REVISION_REQUIRED", 428));
});
