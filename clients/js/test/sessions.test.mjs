// Sessions: an overlay in force only for requests carrying its header.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { NotFound, startDoppel } from "@doppelproxy/client";
import { SHOP, TOKEN } from "./shop.mjs";

let doppel;
before(async () => { doppel = await startDoppel({ config: SHOP, token: TOKEN }); });
after(() => doppel?.stop());

const get = async (url, headers = {}) => {
  const r = await fetch(url, { headers });
  return [r.status, await r.text()];
};

test("a session's mock answers its own requests only, until it ends", async () => {
  const c = doppel.client;
  const s = await c.session({ shop: { mocks: [{ name: "closed", request: { method: "GET", url: "^/catalog$" },
    response: { status: 503, body: "closed" } }] } }, { ttl: 60 });
  assert.match(s.id, /^[A-Za-z0-9_-]{22}$/);
  assert.deepEqual(s.headers, { "X-Doppel-Session": s.id });
  assert.equal(s.info.ttl, 60);
  assert.deepEqual((await c.sessions()).map((x) => x.id), [s.id]);

  assert.deepEqual(await get(doppel.proxyUrl + "/catalog", s.headers), [503, "closed"]);
  assert.deepEqual(await get(doppel.proxyUrl + "/catalog"), [200, "catalog"]);
  const mine = await c.requests({ session: s.id });
  assert.deepEqual(mine.map((e) => e.status), [503]);
  await c.verify({ match: { session: s.id, path: "^/catalog$" }, count: 1 });

  await s.end();
  assert.deepEqual(await c.sessions(), []);
  assert.deepEqual(await get(doppel.proxyUrl + "/catalog", s.headers), [200, "catalog"]);
  await s.end(); // ended already: left as it is
  await assert.rejects(c.endSession(s.id), NotFound);
});
