"""Doppel's errors: one class per code of its closed set, all DoppelError.

The admin API answers the first group of codes; the proxy listener the
second, which a client under test sees in its own answers (read_error reads
them there). Failures that are not Doppel's answer at all (a bad URL, a
refused connection, a timeout, an answer that is not JSON) have classes of
their own with ``code`` None.
"""

import json
from typing import Any, Dict, List, Optional, Tuple, Type


class DoppelError(Exception):
    """An error of a call to Doppel, or an error answer of Doppel's.

    ``code`` is one of the closed set (``REVISION_MISMATCH``, ...) or None
    when the answer was not Doppel's envelope; ``status`` is the answer's
    HTTP status (None when there was no answer); ``message`` is Doppel's,
    for people; ``operation`` names the API operation as /openapi.json
    does; ``url`` is what was called (it never holds the token).
    """

    code: Optional[str] = None

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None,
                 operation: Optional[str] = None, url: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        self.operation = operation
        self.url = url

    def __str__(self) -> str:
        where = "doppel " + self.operation if self.operation else "doppel"
        if self.code is None:
            return "%s: %s" % (where, self.message)
        return "%s: %s (%s %s)" % (where, self.message, self.status, self.code)


# Failures that are not an answer of Doppel's.

class InvalidURL(DoppelError):
    """The admin URL is not an http or https URL with a host."""


class Unreachable(DoppelError):
    """Nothing answered at the URL: refused, unknown host, reset."""


class TimedOut(DoppelError):
    """No answer within the client's timeout."""


class UnexpectedAnswer(DoppelError):
    """An answer that is not what the API documents: not JSON, or an error
    that is not Doppel's envelope (a gateway's 502 page)."""


# The admin API's codes.

class ConfigInvalid(DoppelError):
    """400: the request or its document breaks a rule; one line per violation."""
    code = "CONFIG_INVALID"


class Unauthorized(DoppelError):
    """401: no token, or an unknown one."""
    code = "UNAUTHORIZED"


class Forbidden(DoppelError):
    """403: the token may not do this."""
    code = "FORBIDDEN"


class NotFound(DoppelError):
    """404: no such proxy, file or session."""
    code = "NOT_FOUND"


class MethodNotAllowed(DoppelError):
    """405."""
    code = "METHOD_NOT_ALLOWED"


class Conflict(DoppelError):
    """409: the name is taken, or the store kept moving."""
    code = "CONFLICT"


class RevisionMismatch(DoppelError):
    """409: the revision is not the current one: read again, reapply, retry."""
    code = "REVISION_MISMATCH"


class UploadTooLarge(DoppelError):
    """413."""
    code = "UPLOAD_TOO_LARGE"


class TemplateNotDeclared(DoppelError):
    """422: no mock names the file."""
    code = "TEMPLATE_NOT_DECLARED"


class RevisionRequired(DoppelError):
    """428: no revision sent."""
    code = "REVISION_REQUIRED"


class StoreError(DoppelError):
    """500: the store failed."""
    code = "STORE_ERROR"


class VerificationFailed(DoppelError):
    """409: a verified condition did not hold. ``matched`` counts the entries
    that match, ``requests`` are the newest 100 of them (oldest first),
    ``gaps_ms`` the milliseconds between them."""
    code = "VERIFICATION_FAILED"

    def __init__(self, message: str, *, matched: int = 0, requests: Optional[List[Dict[str, Any]]] = None,
                 gaps_ms: Optional[List[float]] = None, requests_omitted: int = 0,
                 **kw: Any) -> None:
        super().__init__(message, **kw)
        self.matched = matched
        self.requests = requests or []
        self.gaps_ms = gaps_ms or []
        self.requests_omitted = requests_omitted


class DashboardNotBuilt(DoppelError):
    """503."""
    code = "DASHBOARD_NOT_BUILT"


class TooManySubscribers(DoppelError):
    """429: 16 streams of the journal per caller, 256 in all."""
    code = "TOO_MANY_SUBSCRIBERS"


class ReplicaUnavailable(DoppelError):
    """503: a fleet-wide verification could not read a live replica's journal."""
    code = "REPLICA_UNAVAILABLE"


# The proxy listener's codes.

class InvalidRequestPath(DoppelError):
    """400."""
    code = "INVALID_REQUEST_PATH"


class InvalidRequestBody(DoppelError):
    """400."""
    code = "INVALID_REQUEST_BODY"


class ProxyNotResolved(DoppelError):
    """404."""
    code = "PROXY_NOT_RESOLVED"


class RequestTimeout(DoppelError):
    """408: the client under test was too slow sending its request."""
    code = "REQUEST_TIMEOUT"


class NoProxiesConfigured(DoppelError):
    """503."""
    code = "NO_PROXIES_CONFIGURED"


class LossInjected(DoppelError):
    """The configured loss status: a loss fault fired."""
    code = "LOSS_INJECTED"


class TemplateRenderError(DoppelError):
    """500."""
    code = "TEMPLATE_RENDER_ERROR"


class TemplateNotFound(DoppelError):
    """500."""
    code = "TEMPLATE_NOT_FOUND"


class BodyExtractionError(DoppelError):
    """500."""
    code = "BODY_EXTRACTION_ERROR"


class InternalError(DoppelError):
    """500."""
    code = "INTERNAL_ERROR"


class RenderBudgetExhausted(DoppelError):
    """503."""
    code = "RENDER_BUDGET_EXHAUSTED"


class UpstreamError(DoppelError):
    """502."""
    code = "UPSTREAM_ERROR"


class UpstreamTimeout(DoppelError):
    """504."""
    code = "UPSTREAM_TIMEOUT"


_CLASSES: Tuple[Type[DoppelError], ...] = (
    ConfigInvalid, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict,
    RevisionMismatch, UploadTooLarge, TemplateNotDeclared, RevisionRequired, StoreError,
    VerificationFailed, DashboardNotBuilt, TooManySubscribers, ReplicaUnavailable,
    InvalidRequestPath, InvalidRequestBody, ProxyNotResolved, RequestTimeout,
    NoProxiesConfigured, LossInjected, TemplateRenderError, TemplateNotFound,
    BodyExtractionError, InternalError, RenderBudgetExhausted, UpstreamError, UpstreamTimeout,
)
#: code -> its class, for every code of the closed set.
BY_CODE: Dict[str, Type[DoppelError]] = {c.code: c for c in _CLASSES if c.code is not None}


def read_error(status: int, body: Any, *, operation: Optional[str] = None,
               url: Optional[str] = None) -> Optional[DoppelError]:
    """Reads an answer as Doppel's error envelope, of the admin API or of the
    proxy listener (a loss, a mock that failed to render) as a client under
    test received it. ``body`` is bytes, text or the decoded JSON. Returns
    None when it is not the envelope, such as an upstream's own error."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if not isinstance(body, dict) or body.get("status") != "error" or not isinstance(body.get("code"), str):
        return None
    code, message = body["code"], str(body.get("message", ""))
    cls = BY_CODE.get(code, DoppelError)
    kw: Dict[str, Any] = dict(status=status, code=code, operation=operation, url=url)
    if cls is VerificationFailed:
        return VerificationFailed(message, matched=int(body.get("matched") or 0),
                                  requests=list(body.get("requests") or []),
                                  gaps_ms=list(body.get("gaps_ms") or []),
                                  requests_omitted=int(body.get("requests_omitted") or 0), **kw)
    return cls(message, **kw)
