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

  /** The code of each subclass; the instances carry it as .code. */
  static readonly code: string = "";

  constructor(message: string, init: { code?: string; status?: number; operation?: string; url?: string } = {}) {
    super(message);
    this.name = new.target.name;
    this.code = init.code ?? (new.target as typeof DoppelError).code;
    this.status = init.status ?? 0;
    this.operation = init.operation;
    this.url = init.url;
  }
}

type Init = { status?: number; operation?: string; url?: string };

// The client's own: no answer of Doppel's.
/** The admin URL is not an http or https URL with a host. */
export class InvalidURL extends DoppelError {
  static readonly code = "INVALID_URL";
}
/** Nothing answered at the URL: refused, unknown host, reset. */
export class Unreachable extends DoppelError {
  static readonly code = "UNREACHABLE";
}
/** No answer within the client's timeout. */
export class TimedOut extends DoppelError {
  static readonly code = "TIMED_OUT";
}
/** An answer that is not what the API documents: not JSON, or an error
 * that is not Doppel's envelope (a gateway's 502 page). */
export class UnexpectedAnswer extends DoppelError {
  static readonly code = "UNEXPECTED_ANSWER";
}

// The admin API's codes.
/** 400: the request or its document breaks a rule; one line per violation. */
export class ConfigInvalid extends DoppelError {
  static readonly code = "CONFIG_INVALID";
}
/** 401: no token, or an unknown one. */
export class Unauthorized extends DoppelError {
  static readonly code = "UNAUTHORIZED";
}
/** 403: the token may not do this. */
export class Forbidden extends DoppelError {
  static readonly code = "FORBIDDEN";
}
/** 404: no such proxy, file or session. */
export class NotFound extends DoppelError {
  static readonly code = "NOT_FOUND";
}
/** 405. */
export class MethodNotAllowed extends DoppelError {
  static readonly code = "METHOD_NOT_ALLOWED";
}
/** 409: the name is taken, or the store kept moving. */
export class Conflict extends DoppelError {
  static readonly code = "CONFLICT";
}
/** 409: the revision is not the current one: read again, reapply, retry. */
export class RevisionMismatch extends DoppelError {
  static readonly code = "REVISION_MISMATCH";
}
/** 413. */
export class UploadTooLarge extends DoppelError {
  static readonly code = "UPLOAD_TOO_LARGE";
}
/** 422: no mock names the file. */
export class TemplateNotDeclared extends DoppelError {
  static readonly code = "TEMPLATE_NOT_DECLARED";
}
/** 428: no revision sent. */
export class RevisionRequired extends DoppelError {
  static readonly code = "REVISION_REQUIRED";
}
/** 500: the store failed. */
export class StoreError extends DoppelError {
  static readonly code = "STORE_ERROR";
}
/** 503. */
export class DashboardNotBuilt extends DoppelError {
  static readonly code = "DASHBOARD_NOT_BUILT";
}
/** 429: 16 streams of the journal per caller, 256 in all. */
export class TooManySubscribers extends DoppelError {
  static readonly code = "TOO_MANY_SUBSCRIBERS";
}
/** 503: a fleet-wide verification could not read a live replica's journal. */
export class ReplicaUnavailable extends DoppelError {
  static readonly code = "REPLICA_UNAVAILABLE";
}

/** 409: a verified condition did not hold. */
export class VerificationFailed extends DoppelError {
  static readonly code = "VERIFICATION_FAILED";
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
export class InvalidRequestPath extends DoppelError {
  static readonly code = "INVALID_REQUEST_PATH";
}
export class InvalidRequestBody extends DoppelError {
  static readonly code = "INVALID_REQUEST_BODY";
}
export class ProxyNotResolved extends DoppelError {
  static readonly code = "PROXY_NOT_RESOLVED";
}
export class RequestTimeout extends DoppelError {
  static readonly code = "REQUEST_TIMEOUT";
}
export class NoProxiesConfigured extends DoppelError {
  static readonly code = "NO_PROXIES_CONFIGURED";
}
/** The configured loss status. */
export class LossInjected extends DoppelError {
  static readonly code = "LOSS_INJECTED";
}
export class TemplateRenderError extends DoppelError {
  static readonly code = "TEMPLATE_RENDER_ERROR";
}
export class TemplateNotFound extends DoppelError {
  static readonly code = "TEMPLATE_NOT_FOUND";
}
export class BodyExtractionError extends DoppelError {
  static readonly code = "BODY_EXTRACTION_ERROR";
}
export class InternalError extends DoppelError {
  static readonly code = "INTERNAL_ERROR";
}
export class RenderBudgetExhausted extends DoppelError {
  static readonly code = "RENDER_BUDGET_EXHAUSTED";
}
export class UpstreamError extends DoppelError {
  static readonly code = "UPSTREAM_ERROR";
}
export class UpstreamTimeout extends DoppelError {
  static readonly code = "UPSTREAM_TIMEOUT";
}

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
