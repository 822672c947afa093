// The client of Doppel's admin API. Every call goes through one entry of
// OPERATIONS, which a test holds to the /openapi.json a Doppel serves.

import { DoppelError, InvalidURL, NotFound, RevisionRequired, TimedOut, UnexpectedAnswer, Unreachable, readError } from "./errors.js";

/** One endpoint as /openapi.json names it, with the query parameters and
 * body fields the client sends and the answer fields it reads. */
export interface Operation {
  id: string;
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: readonly string[];
  body?: readonly string[];
  answer?: readonly string[];
}

const ops = [
  { id: "listProxies", method: "GET", path: "/api/v1/proxies", answer: ["proxies"] },
  { id: "createProxy", method: "POST", path: "/api/v1/proxies", body: ["proxy"], answer: ["revision", "proxy"] },
  { id: "readProxy", method: "GET", path: "/api/v1/proxies/{name}", answer: ["revision", "proxy"] },
  { id: "updateProxy", method: "PUT", path: "/api/v1/proxies/{name}", body: ["revision", "proxy"], answer: ["revision", "proxy"] },
  { id: "deleteProxy", method: "DELETE", path: "/api/v1/proxies/{name}" },
  { id: "listCounters", method: "GET", path: "/api/v1/proxies/{name}/counters", query: ["session"], answer: ["counters"] },
  { id: "resetCounters", method: "DELETE", path: "/api/v1/proxies/{name}/counters", query: ["session"] },
  { id: "recordProxy", method: "POST", path: "/api/v1/proxies/{name}/record",
    body: ["match", "session", "since", "local", "apply", "revision"] },
  { id: "createSession", method: "POST", path: "/api/v1/sessions", body: ["id", "ttl", "proxies"],
    answer: ["id", "expires_at", "revision", "ttl", "proxies"] },
  { id: "listSessions", method: "GET", path: "/api/v1/sessions", answer: ["sessions"] },
  { id: "deleteSession", method: "DELETE", path: "/api/v1/sessions/{id}" },
  { id: "status", method: "GET", path: "/api/v1/status" },
  { id: "listRequests", method: "GET", path: "/api/v1/requests",
    query: ["proxy", "mock", "method", "path", "session", "since", "limit", "local"], answer: ["requests"] },
  { id: "clearRequests", method: "DELETE", path: "/api/v1/requests", query: ["proxy"] },
  { id: "verifyRequests", method: "POST", path: "/api/v1/requests/verify",
    body: ["match", "count", "gaps_ms", "same_header", "local", "partial"], answer: ["matched", "gaps_ms"] },
] as const satisfies readonly Operation[];

type OpId = (typeof ops)[number]["id"];

/** The endpoints the client calls, by operation id. */
export const OPERATIONS: Readonly<Record<OpId, Operation>> = Object.freeze(
  Object.fromEntries(ops.map((o) => [o.id, o])) as Record<OpId, Operation>,
);

/** The fields of a verification's 409 answer that VerificationFailed carries. */
export const VERIFY_FAILURE_FIELDS = ["message", "code", "matched", "gaps_ms", "requests", "requests_omitted"] as const;

export type JSONObject = Record<string, any>;

/** A count or a gap: exactly n, or a {min, max} with either end open. */
export type Range = number | { min?: number; max?: number };

export interface ClientOptions {
  /** Sent as `Bearer <token>`; without one the caller is anonymous. */
  token?: string;
  /** The header the token travels in (default Authorization, which
   * Doppel accepts beside admin.auth.header). */
  tokenHeader?: string;
  /** The document's server.session_header (default X-Doppel-Session). */
  sessionHeader?: string;
  /** Milliseconds a call may take (default 10000). */
  timeoutMs?: number;
}

/** The journal's filters; path is a regular expression, since an entry's
 * id or an RFC 3339 time. */
export interface RequestFilters {
  proxy?: string | string[];
  mock?: string;
  method?: string;
  path?: string;
  session?: string;
  since?: string;
  limit?: number;
  local?: boolean;
}

export interface VerifyOptions {
  /** Which entries: proxy, mock, method, path, session, headers. */
  match: JSONObject;
  count?: Range;
  gapsMs?: Range;
  sameHeader?: string;
  partial?: boolean;
  local?: boolean;
}

export interface RecordOptions {
  match?: string;
  session?: string;
  since?: string;
  apply?: boolean;
  revision?: string;
  local?: boolean;
}

/** A live session: requests carrying headers get its overlay. */
export interface Session {
  id: string;
  /** The header to send: {[sessionHeader]: id}. */
  headers: Record<string, string>;
  /** The answer of createSession: id, expires_at, revision, ttl, proxies. */
  info: JSONObject;
  /** Ends it; one that already ended or expired is left as it is. */
  end(): Promise<void>;
}

/** Calls one Doppel's admin API, such as http://127.0.0.1:8081. Every
 * failure rejects with a DoppelError. */
export class Client {
  readonly adminUrl: string;
  readonly sessionHeader: string;
  readonly timeoutMs: number;
  #token?: string;
  #tokenHeader: string;
  #bad?: DoppelError;

  constructor(adminUrl: string, options: ClientOptions = {}) {
    this.adminUrl = String(adminUrl).replace(/\/+$/, "");
    this.#token = options.token;
    this.#tokenHeader = options.tokenHeader ?? "Authorization";
    this.sessionHeader = options.sessionHeader ?? "X-Doppel-Session";
    this.timeoutMs = options.timeoutMs ?? 10_000;
    // Reported by every call, as the Go client does, so that a test's
    // setup does not throw before its assertions run.
    this.#bad = checkURL(this.adminUrl);
  }

  /** The proxies in force that the caller may read, each {revision, proxy}. */
  async proxies(): Promise<{ revision: string; proxy: JSONObject }[]> {
    return (await this.#call("listProxies")).proxies;
  }

  /** One proxy in canonical form and the revision an update must carry. */
  async proxy(name: string): Promise<{ proxy: JSONObject; revision: string }> {
    const out = await this.#call("readProxy", { params: { name } });
    return { proxy: out.proxy, revision: out.revision };
  }

  /** Adds a proxy (type http unless it says otherwise); resolves to its revision. */
  async createProxy(p: JSONObject): Promise<string> {
    return (await this.#call("createProxy", { body: { proxy: withType(p) }, want: [201] })).revision;
  }

  /** Replaces the proxy named p.name if its revision is still revision
   * (compare-and-swap); resolves to the new one. Stale: RevisionMismatch. */
  async updateProxy(p: JSONObject, revision: string): Promise<string> {
    if (!revision) {
      // Sent as it is, the answer would be 428 all the same; saying so
      // here names the argument.
      throw new RevisionRequired("updateProxy: an update carries the revision it is based on: pass the one proxy() returned",
        { status: 428, operation: "updateProxy" });
    }
    const out = await this.#call("updateProxy", { params: { name: p?.name }, body: { revision, proxy: withType(p) } });
    return out.revision;
  }

  /** Removes a proxy and its template files. */
  async deleteProxy(name: string): Promise<void> {
    await this.#call("deleteProxy", { params: { name }, want: [204] });
  }

  /** A proxy's fault counters; with a session id, that session's. */
  async counters(proxy: string, session?: string): Promise<JSONObject[]> {
    return (await this.#call("listCounters", { params: { name: proxy }, query: { session } })).counters;
  }

  /** Starts a proxy's counts again (a session's, with its id). */
  async resetCounters(proxy: string, session?: string): Promise<void> {
    await this.#call("resetCounters", { params: { name: proxy }, query: { session }, want: [204] });
  }

  /** The mocks the journal's forwarded exchanges of proxy make; with
   * apply (and the proxy's revision) they are appended to it. Resolves
   * to the answer's body. */
  async record(proxy: string, options: RecordOptions = {}): Promise<JSONObject> {
    return this.#call("recordProxy", { params: { name: proxy }, body: dropUndefined({ ...options }) });
  }

  /** Starts a session laying `proxies` (proxy name -> {mocks, loss, ...})
   * over the document; it is in force when this resolves. */
  async session(proxies: JSONObject, options: { ttl?: number; id?: string } = {}): Promise<Session> {
    const info = await this.#call("createSession", {
      body: dropUndefined({ id: options.id, ttl: options.ttl ?? 600, proxies }), want: [201] });
    const id: string = info.id;
    return {
      id, info, headers: { [this.sessionHeader]: id },
      end: async () => {
        try {
          await this.endSession(id);
        } catch (e) {
          if (!(e instanceof NotFound)) throw e;
        }
      },
    };
  }

  /** The live sessions whose every proxy the caller may read. */
  async sessions(): Promise<JSONObject[]> {
    return (await this.#call("listSessions")).sessions;
  }

  /** Ends a session at once; NotFound once it ended or expired. */
  async endSession(id: string): Promise<void> {
    await this.#call("deleteSession", { params: { id }, want: [204] });
  }

  /** The journal's entries, oldest first, that the filters select. */
  async requests(filters: RequestFilters = {}): Promise<JSONObject[]> {
    const allowed = OPERATIONS.listRequests.query!;
    const unknown = Object.keys(filters).filter((k) => !allowed.includes(k));
    if (unknown.length) {
      throw new DoppelError(`requests() takes the filters ${allowed.join(", ")}, not ${unknown.join(", ")}`,
        { code: "INVALID_ARGUMENT", operation: "listRequests" });
    }
    return (await this.#call("listRequests", { query: filters as JSONObject })).requests;
  }

  /** Forgets the journal's entries of the proxies named, or of every
   * proxy the caller may update when none is. */
  async clearRequests(...proxies: string[]): Promise<void> {
    await this.#call("clearRequests", { query: { proxy: proxies }, want: [204] });
  }

  /** Checks the journal: the entries match selects number count, come
   * gapsMs apart and share one value of sameHeader. Resolves to the
   * answer's body ({matched, gaps_ms, ...}); a condition that does not
   * hold rejects with VerificationFailed (.matched, .requests). */
  async verify(v: VerifyOptions): Promise<JSONObject> {
    const body: JSONObject = { match: v.match };
    if (v.count !== undefined) body.count = range(v.count);
    if (v.gapsMs !== undefined) body.gaps_ms = range(v.gapsMs);
    if (v.sameHeader) body.same_header = v.sameHeader;
    if (v.partial) body.partial = true;
    if (v.local) body.local = true;
    return this.#call("verifyRequests", { body });
  }

  /** {uptime_seconds, revision, proxies, replica, fleet}. */
  async status(): Promise<JSONObject> {
    return this.#call("status");
  }

  async #call(opId: OpId, k: { params?: Record<string, unknown>; query?: JSONObject; body?: unknown; want?: number[] } = {}): Promise<any> {
    const op = OPERATIONS[opId];
    const init = { operation: op.id };
    if (this.#bad) throw this.#bad;
    let path = op.path;
    for (const [name, value] of Object.entries(k.params ?? {})) {
      if (typeof value !== "string" || value === "") {
        throw new DoppelError(`${op.id}: the ${name} is a non-empty string, not ${JSON.stringify(value)}`,
          { ...init, code: "INVALID_ARGUMENT" });
      }
      path = path.replace(`{${name}}`, encodeURIComponent(value));
    }
    let url = this.adminUrl + path;
    const q = new URLSearchParams();
    for (const [key, v] of Object.entries(k.query ?? {})) {
      for (const one of Array.isArray(v) ? v : [v]) {
        if (one === undefined || one === null || one === false) continue;
        q.append(key, String(one));
      }
    }
    if ([...q].length) url += "?" + q.toString();
    const headers: Record<string, string> = { Accept: "application/json" };
    if (k.body !== undefined) headers["Content-Type"] = "application/json";
    if (this.#token) headers[this.#tokenHeader] = "Bearer " + this.#token;
    const where = { ...init, url };

    let status: number, raw: string;
    try {
      const resp = await fetch(url, {
        method: op.method, headers, redirect: "manual",
        body: k.body === undefined ? undefined : JSON.stringify(k.body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      status = resp.status;
      raw = await resp.text();
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      if (err.name === "TimeoutError" || err.name === "AbortError") {
        throw new TimedOut(`${op.id}: no answer from ${url} within ${this.timeoutMs} ms`, where);
      }
      const why = err.cause?.code ?? err.cause?.message ?? err.message;
      throw new Unreachable(`${op.id}: cannot reach ${url}: ${why}`, where);
    }
    if (!(k.want ?? [200]).includes(status)) {
      const e = readError(status, raw, where);
      if (e) {
        e.message = `${op.id}: ${e.message} (${status} ${e.code})`;
        throw e;
      }
      throw new UnexpectedAnswer(`${op.id}: ${url} answered ${status}, not Doppel's error envelope: ${snippet(raw)}`,
        { ...where, status });
    }
    if (status === 204 || raw === "") return undefined;
    let out: unknown;
    try {
      out = JSON.parse(raw);
    } catch {
      throw new UnexpectedAnswer(`${op.id}: ${url} answered ${status} with something that is not JSON: ${snippet(raw)}`,
        { ...where, status });
    }
    const missing = (op.answer ?? []).filter((f) => typeof out !== "object" || out === null || !(f in out));
    if (typeof out !== "object" || out === null || Array.isArray(out) || missing.length) {
      throw new UnexpectedAnswer(`${op.id}: ${url} answered ${status} without ${missing.join(", ") || "an object"}, `
        + `which the API documents: ${snippet(raw)}`, { ...where, status });
    }
    return out;
  }
}

function checkURL(adminUrl: string): DoppelError | undefined {
  let u: URL;
  try {
    u = new URL(adminUrl);
  } catch {
    return new InvalidURL(`the admin URL ${JSON.stringify(adminUrl)} is not a URL`, { url: adminUrl });
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    return new InvalidURL(`the admin URL ${JSON.stringify(adminUrl)} is not http or https`, { url: adminUrl });
  }
  if (u.search || u.hash) {
    return new InvalidURL(`the admin URL ${JSON.stringify(adminUrl)} may not have a query or a fragment`, { url: adminUrl });
  }
  if (u.username || u.password) {
    return new InvalidURL(`the admin URL may not carry credentials: pass {token}`, { url: u.origin });
  }
  return undefined;
}

function withType(p: JSONObject): JSONObject {
  return { type: "http", ...p };
}

function range(r: Range): JSONObject {
  return typeof r === "number" ? { min: r, max: r } : { ...r };
}

function dropUndefined(o: JSONObject): JSONObject {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function snippet(raw: string): string {
  const s = raw.trim();
  if (!s) return "an empty body";
  return JSON.stringify(s.length <= 200 ? s : s.slice(0, 200) + "…");
}
