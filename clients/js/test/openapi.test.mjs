// The client against the /openapi.json a Doppel serves: every route,
// method and field it uses must be there, and its errors the closed set.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as doppelClient from "@doppelproxy/client";
import { byCode, DoppelError, OPERATIONS, VERIFY_FAILURE_FIELDS, startDoppel } from "@doppelproxy/client";
import { SHOP, TOKEN } from "./shop.mjs";

let doppel, doc;
before(async () => {
  doppel = await startDoppel({ config: SHOP, token: TOKEN });
  doc = await (await fetch(doppel.adminUrl + "/openapi.json")).json();
});
after(() => doppel?.stop());

function resolve(schema) {
  while (schema && "$ref" in schema) {
    schema = schema.$ref.replace(/^#\//, "").split("/").reduce((node, part) => node[part], doc);
  }
  return schema ?? {};
}

// The property names a schema allows, over its alternatives.
function properties(schema) {
  schema = resolve(schema);
  const names = new Set(Object.keys(schema.properties ?? {}));
  for (const alt of [...(schema.oneOf ?? []), ...(schema.anyOf ?? []), ...(schema.allOf ?? [])]) {
    for (const n of properties(alt)) names.add(n);
  }
  return names;
}

const missing = (want, have) => want.filter((f) => !have.has(f));

test("each operation is served as the client calls it", () => {
  for (const op of Object.values(OPERATIONS)) {
    const path = doc.paths[op.path];
    assert.ok(path, `${op.id}: ${op.path} is not in /openapi.json`);
    const operation = path[op.method.toLowerCase()];
    assert.ok(operation, `${op.id}: ${op.method} ${op.path} is not in /openapi.json`);
    assert.equal(operation.operationId, op.id);

    const params = new Set([...(operation.parameters ?? []), ...(path.parameters ?? [])]
      .map(resolve).filter((p) => p.in === "query").map((p) => p.name));
    assert.deepEqual(missing(op.query ?? [], params), [], `${op.id}: query parameters`);
    if (op.body) {
      const body = properties(operation.requestBody.content["application/json"].schema);
      assert.deepEqual(missing(op.body, body), [], `${op.id}: body fields`);
    }
    if (op.answer) {
      const ok = operation.responses["200"] ?? operation.responses["201"];
      const answer = properties(ok.content["application/json"].schema);
      assert.deepEqual(missing(op.answer, answer), [], `${op.id}: answer fields`);
    }
  }
});

test("a failed verification carries what VerificationFailed reads", () => {
  const op = doc.paths["/api/v1/requests/verify"].post;
  const failure = properties(op.responses["409"].content["application/json"].schema);
  assert.deepEqual(missing([...VERIFY_FAILURE_FIELDS], failure), []);
});

test("there is one error class per code, exported under its name", () => {
  const codes = resolve({ $ref: "#/components/schemas/ErrorBody" }).properties.code.enum;
  assert.deepEqual(Object.keys(byCode).sort(), [...codes].sort());
  for (const [code, Cls] of Object.entries(byCode)) {
    assert.equal(Cls.code, code);
    assert.ok(new Cls("x") instanceof DoppelError);
    assert.equal(new Cls("x").code, code);
    assert.equal(doppelClient[Cls.name], Cls);
  }
});

test("a proxy document has the fields the client fills", () => {
  // updateProxy reads name; createProxy and updateProxy default type.
  const fields = properties({ $ref: "#/components/schemas/ProxyConfig" });
  assert.deepEqual(missing(["name", "type"], fields), []);
});

test("the checked-in document is the one served", (t) => {
  const checkedIn = fileURLToPath(new URL("../../../internal/admin/testdata/openapi.json", import.meta.url));
  if (!existsSync(checkedIn)) return t.skip("not in Doppel's repository");
  assert.deepEqual(Object.keys(JSON.parse(readFileSync(checkedIn, "utf8")).paths).sort(), Object.keys(doc.paths).sort());
});
