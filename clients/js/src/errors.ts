// The errors of the client: one class per code of Doppel's closed set
// (client/errors.go lists them), and four for a call that got no answer
// of Doppel's at all. Every one is a DoppelError with .code and .status.

/** An error of a call to Doppel, or an error answer of Doppel's. */
export class DoppelError extends Error {
  /** One of the closed set (REVISION_MISMATCH, ...), or the client's own
   * (UNREACHABLE, TIMED_OUT, UNEXPECTED_ANSWER, INVALID_URL). */
  readonly code: string;
  /** The answer's HTTP status; 0 when there was no answer. */
  readonly status: number;
  /** The API operation, as /openapi.json names it (updateProxy, ...). */
  readonly operation?: string;
  /** The URL called. Never carries the token. */
  readonly url?: string;

  constructor(message: string, init: { code?: string; status?: number; operation?: string; url?: string } = {}) {
    super(message);
    this.name = new.target.name;
    this.code = init.code ?? (new.target as unknown as { code?: string }).code ?? "";
    this.status = init.status ?? 0;
    this.operation = init.operation;
    this.url = init.url;
  }
}

type Init = { status?: number; operation?: string; url?: string };

function coded(code: string) {
  return class extends DoppelError {
    static readonly code = code;
    constructor(message: string, init: Init = {}) {
      super(message, { ...init, code });
    }
  };
}

// The client's own: no answer of Doppel's.
/** The admin URL is not an http or https URL with a host. */
export class InvalidURL extends coded("INVALID_URL") {}
/** Nothing answered at the URL: refused, unknown host, reset. */
export class Unreachable extends coded("UNREACHABLE") {}
/** No answer within the client's timeout. */
export class TimedOut extends coded("TIMED_OUT") {}
/** An answer that is not what the API documents: not JSON, or an error
 * that is not Doppel's envelope (a gateway's 502 page). */
export class UnexpectedAnswer extends coded("UNEXPECTED_ANSWER") {}

// The admin API's codes.
/** 400: the request or its document breaks a rule; one line per violation. */
export class ConfigInvalid extends coded("CONFIG_INVALID") {}
/** 401: no token, or an unknown one. */
export class Unauthorized extends coded("UNAUTHORIZED") {}
/** 403: the token may not do this. */
export class Forbidden extends coded("FORBIDDEN") {}
/** 404: no such proxy, file or session. */
export class NotFound extends coded("NOT_FOUND") {}
/** 405. */
export class MethodNotAllowed extends coded("METHOD_NOT_ALLOWED") {}
/** 409: the name is taken, or the store kept moving. */
export class Conflict extends coded("CONFLICT") {}
/** 409: the revision is not the current one: read again, reapply, retry. */
export class RevisionMismatch extends coded("REVISION_MISMATCH") {}
/** 413. */
export class UploadTooLarge extends coded("UPLOAD_TOO_LARGE") {}
/** 422: no mock names the file. */
export class TemplateNotDeclared extends coded("TEMPLATE_NOT_DECLARED") {}
/** 428: no revision sent. */
export class RevisionRequired extends coded("REVISION_REQUIRED") {}
/** 500: the store failed. */
export class StoreError extends coded("STORE_ERROR") {}
/** 503. */
export class DashboardNotBuilt extends coded("DASHBOARD_NOT_BUILT") {}
/** 429: 16 streams of the journal per caller, 256 in all. */
export class TooManySubscribers extends coded("TOO_MANY_SUBSCRIBERS") {}
/** 503: a fleet-wide verification could not read a live replica's journal. */
export class ReplicaUnavailable extends coded("REPLICA_UNAVAILABLE") {}

/** 409: a verified condition did not hold. */
export class VerificationFailed extends coded("VERIFICATION_FAILED") {
  /** How many entries match. */
  matched = 0;
  /** The milliseconds between consecutive matched entries. */
  gapsMs: number[] = [];
  /** The matched entries, oldest first: the newest 100 of them. */
  requests: Record<string, unknown>[] = [];
  /** How many older matched entries are not in requests. */
  requestsOmitted = 0;
}

// The proxy listener's codes, which a client under test sees in its own
// answers: readError reads them there.
export class InvalidRequestPath extends coded("INVALID_REQUEST_PATH") {}
export class InvalidRequestBody extends coded("INVALID_REQUEST_BODY") {}
export class ProxyNotResolved extends coded("PROXY_NOT_RESOLVED") {}
export class RequestTimeout extends coded("REQUEST_TIMEOUT") {}
export class NoProxiesConfigured extends coded("NO_PROXIES_CONFIGURED") {}
/** The configured loss status. */
export class LossInjected extends coded("LOSS_INJECTED") {}
export class TemplateRenderError extends coded("TEMPLATE_RENDER_ERROR") {}
export class TemplateNotFound extends coded("TEMPLATE_NOT_FOUND") {}
export class BodyExtractionError extends coded("BODY_EXTRACTION_ERROR") {}
export class InternalError extends coded("INTERNAL_ERROR") {}
export class RenderBudgetExhausted extends coded("RENDER_BUDGET_EXHAUSTED") {}
export class UpstreamError extends coded("UPSTREAM_ERROR") {}
export class UpstreamTimeout extends coded("UPSTREAM_TIMEOUT") {}

/** The class of each code of Doppel's closed set. */
export const byCode: Readonly<Record<string, new (message: string, init?: Init) => DoppelError>> = Object.freeze(
  Object.fromEntries(
    [
      ConfigInvalid, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict, RevisionMismatch,
      UploadTooLarge, TemplateNotDeclared, RevisionRequired, StoreError, VerificationFailed,
      DashboardNotBuilt, TooManySubscribers, ReplicaUnavailable,
      InvalidRequestPath, InvalidRequestBody, ProxyNotResolved, RequestTimeout, NoProxiesConfigured,
      LossInjected, TemplateRenderError, TemplateNotFound, BodyExtractionError, InternalError,
      RenderBudgetExhausted, UpstreamError, UpstreamTimeout,
    ].map((c) => [c.code, c]),
  ),
);

/**
 * Reads an answer as Doppel's error envelope {"status":"error","message",
 * "code"}: the admin API's, or the proxy listener's as a client under test
 * received it (a loss, an unresolved request). Undefined when the body is
 * not the envelope, such as an upstream's own error.
 */
export function readError(status: number, body: string | Record<string, unknown>, init: Init = {}): DoppelError | undefined {
  let env: unknown = body;
  if (typeof body === "string") {
    try {
      env = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof env !== "object" || env === null) return undefined;
  const e = env as Record<string, unknown>;
  if (e.status !== "error" || typeof e.code !== "string" || e.code === "") return undefined;
  const message = typeof e.message === "string" ? e.message : "";
  const Cls = byCode[e.code];
  const err = Cls ? new Cls(message, { ...init, status }) : new DoppelError(message, { ...init, status, code: e.code });
  if (err instanceof VerificationFailed) {
    err.matched = typeof e.matched === "number" ? e.matched : 0;
    err.gapsMs = Array.isArray(e.gaps_ms) ? (e.gaps_ms as number[]) : [];
    err.requests = Array.isArray(e.requests) ? (e.requests as Record<string, unknown>[]) : [];
    err.requestsOmitted = typeof e.requests_omitted === "number" ? e.requests_omitted : 0;
  }
  return err;
}
