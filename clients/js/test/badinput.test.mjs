// Bad input rejects with a DoppelError naming the URL, never a bare
// TypeError: a wrong URL, a refused connection, an answer that is not
// JSON or not Doppel's, no answer in time.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Client, DoppelError, InvalidURL, TimedOut, UnexpectedAnswer, Unreachable } from "@doppelproxy/client";

let server, base;
const sockets = new Set();
before(async () => {
  server = createServer((req, res) => {
    if (req.url.startsWith("/slow/")) return; // never answers
    if (req.url.startsWith("/html/")) {
      res.writeHead(502, { "Content-Type": "text/html" });
      return res.end("<html>Bad Gateway</html>");
    }
    if (req.url.startsWith("/partial/")) {
      res.writeHead(200, { "Content-Type": "application/json" });
      return res.end('{"nothing": 1}');
    }
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.end("hello, not JSON");
  });
  server.on("connection", (s) => { sockets.add(s); s.on("close", () => sockets.delete(s)); });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => { for (const s of sockets) s.destroy(); server.close(); });

const rejectsWith = (Cls, pattern) => (e) => {
  assert.ok(e instanceof Cls, `${e?.name}: ${e?.message}`);
  assert.ok(e instanceof DoppelError);
  assert.match(e.message, pattern);
  return true;
};

test("a URL that is not an http URL with a host", async () => {
  for (const bad of ["not a url", "ftp://127.0.0.1:1", "http://127.0.0.1:1/?q=1"]) {
    await assert.rejects(new Client(bad).status(), rejectsWith(InvalidURL, new RegExp(bad.replace(/[?.*]/g, "\\$&"))));
  }
});

test("a refused connection", async () => {
  const probe = createServer();
  await new Promise((r) => probe.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${probe.address().port}`;
  await new Promise((r) => probe.close(r));
  await assert.rejects(new Client(url).proxies(),
    (e) => rejectsWith(Unreachable, /ECONNREFUSED/)(e) && e.message.includes(url + "/api/v1/proxies") && e.status === 0);
});

test("an answer that is not JSON, or not the one documented", async () => {
  await assert.rejects(new Client(base).status(),
    (e) => rejectsWith(UnexpectedAnswer, /answered 200 with something that is not JSON: "hello, not JSON"/)(e) && e.url === base + "/api/v1/status");
  await assert.rejects(new Client(base + "/partial").proxies(), rejectsWith(UnexpectedAnswer, /without proxies/));
  await assert.rejects(new Client(base + "/html").proxies(),
    (e) => rejectsWith(UnexpectedAnswer, /answered 502, not Doppel's error envelope: "<html>Bad Gateway<\/html>"/)(e) && e.status === 502);
});

test("no answer within the timeout", { timeout: 5000 }, async () => {
  const started = Date.now();
  await assert.rejects(new Client(base + "/slow", { timeoutMs: 200 }).status(),
    rejectsWith(TimedOut, new RegExp(`no answer from ${base}/slow/api/v1/status within 200 ms`)));
  assert.ok(Date.now() - started < 3000);
});

test("the token is never in a message", async () => {
  const secret = "js-client-tests-secret-token";
  await assert.rejects(new Client(base + "/html", { token: secret }).status(), (e) => !e.message.includes(secret) && !String(e.url).includes(secret));
  await assert.rejects(new Client(`http://user:${secret}@127.0.0.1:1`).status(), (e) => e instanceof InvalidURL && !e.message.includes(secret) && !String(e.url).includes(secret));
});

test("an empty name is refused before anything is sent", async () => {
  await assert.rejects(new Client(base).proxy(""), (e) => e instanceof DoppelError && /name is a non-empty string/.test(e.message));
});
