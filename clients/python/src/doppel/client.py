"""A client of Doppel's admin API, over urllib alone."""

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .errors import (InvalidURL, NotFound, RevisionRequired, TimedOut,
                     UnexpectedAnswer, Unreachable, read_error)

JSON = Dict[str, Any]
Range = Union[int, float, Mapping[str, float], Tuple[Optional[float], Optional[float]]]


class Operation(NamedTuple):
    """One endpoint of the admin API as /openapi.json names it, with the
    query parameters and body fields the client sends and the answer fields
    it reads. A test holds this table to the document a Doppel serves."""
    id: str
    method: str
    path: str
    query: Tuple[str, ...] = ()
    body: Tuple[str, ...] = ()
    answer: Tuple[str, ...] = ()


OPERATIONS: Dict[str, Operation] = {op.id: op for op in (
    Operation("listProxies", "GET", "/api/v1/proxies", answer=("proxies",)),
    Operation("createProxy", "POST", "/api/v1/proxies", body=("proxy",), answer=("revision", "proxy")),
    Operation("readProxy", "GET", "/api/v1/proxies/{name}", answer=("revision", "proxy")),
    Operation("updateProxy", "PUT", "/api/v1/proxies/{name}", body=("revision", "proxy"),
              answer=("revision", "proxy")),
    Operation("deleteProxy", "DELETE", "/api/v1/proxies/{name}"),
    Operation("listCounters", "GET", "/api/v1/proxies/{name}/counters", query=("session",),
              answer=("counters",)),
    Operation("resetCounters", "DELETE", "/api/v1/proxies/{name}/counters", query=("session",)),
    Operation("recordProxy", "POST", "/api/v1/proxies/{name}/record",
              body=("match", "session", "since", "local", "apply", "revision")),
    Operation("createSession", "POST", "/api/v1/sessions", body=("id", "ttl", "proxies"),
              answer=("id", "expires_at", "revision", "ttl", "proxies")),
    Operation("listSessions", "GET", "/api/v1/sessions", answer=("sessions",)),
    Operation("deleteSession", "DELETE", "/api/v1/sessions/{id}"),
    Operation("status", "GET", "/api/v1/status"),
    Operation("listRequests", "GET", "/api/v1/requests",
              query=("proxy", "mock", "method", "path", "session", "since", "limit", "local"),
              answer=("requests",)),
    Operation("clearRequests", "DELETE", "/api/v1/requests", query=("proxy",)),
    Operation("verifyRequests", "POST", "/api/v1/requests/verify",
              body=("match", "count", "gaps_ms", "same_header", "local", "partial"),
              answer=("matched", "gaps_ms")),
)}

#: The fields of a verification's 409 answer that VerificationFailed carries.
VERIFY_FAILURE_FIELDS = ("message", "code", "matched", "gaps_ms", "requests", "requests_omitted")


class Client:
    """Calls one Doppel's admin API, such as ``http://127.0.0.1:8081``.

    ``token`` is sent as ``Bearer <token>`` in ``token_header``
    (Authorization, which Doppel accepts beside ``admin.auth.header``);
    without one the caller is anonymous. ``session_header`` is the
    document's ``server.session_header``. Every failure is a
    :class:`doppel.DoppelError`.
    """

    def __init__(self, admin_url: str, token: Optional[str] = None, timeout: float = 10.0, *,
                 token_header: str = "Authorization", session_header: str = "X-Doppel-Session") -> None:
        parts = urllib.parse.urlsplit(admin_url) if isinstance(admin_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL("the admin URL %r is not an http or https URL with a host" % (admin_url,),
                             url=str(admin_url))
        if parts.query or parts.fragment:
            raise InvalidURL("the admin URL %r may not have a query or a fragment" % admin_url, url=admin_url)
        try:
            parts.port
        except ValueError as e:
            raise InvalidURL("the admin URL %r: %s" % (admin_url, e), url=admin_url) from None
        self.admin_url = admin_url.rstrip("/")
        self.timeout = timeout
        self.session_header = session_header
        self._token = token
        self._token_header = token_header

    def __repr__(self) -> str:
        # Never the token.
        return "doppel.Client(%r)" % self.admin_url

    # Proxies.

    def proxies(self) -> List[JSON]:
        """The proxies in force the caller may read, in the order they are
        tried, each ``{"revision", "proxy"}``."""
        return list(self._call("listProxies")["proxies"])

    def proxy(self, name: str) -> Tuple[JSON, str]:
        """One proxy in canonical form (every default explicit) and its revision."""
        out = self._call("readProxy", {"name": name})
        return out["proxy"], out["revision"]

    def create_proxy(self, p: Mapping[str, Any]) -> str:
        """Adds a proxy (in force on return) and returns its revision. A taken
        name is Conflict; a document breaking a rule ConfigInvalid."""
        return str(self._call("createProxy", body={"proxy": _with_type(p)}, want=(201,))["revision"])

    def update_proxy(self, p: Mapping[str, Any], revision: str) -> str:
        """Replaces the proxy named ``p["name"]`` if its revision is still
        ``revision`` (compare-and-swap) and returns the new one; a stale one
        is RevisionMismatch: read again, reapply the change, retry."""
        if not revision:
            raise RevisionRequired("an update carries the revision it is based on: pass the one proxy() returned",
                                   status=428, operation="updateProxy")
        name = p.get("name") if isinstance(p, Mapping) else None
        if not isinstance(name, str):
            raise TypeError("update_proxy: the proxy is a mapping with a name, not %r" % (p,))
        out = self._call("updateProxy", {"name": name}, body={"revision": revision, "proxy": _with_type(p)})
        return str(out["revision"])

    def delete_proxy(self, name: str) -> None:
        """Removes a proxy and its template files."""
        self._call("deleteProxy", {"name": name}, want=(204,))

    # Counters.

    def counters(self, proxy: str, session: Optional[str] = None) -> List[JSON]:
        """A proxy's fault counters (a session's overlay's, with its id)."""
        return list(self._call("listCounters", {"name": proxy}, query={"session": session})["counters"])

    def reset_counters(self, proxy: str, session: Optional[str] = None) -> None:
        """Starts a proxy's counts again (a session's, with its id)."""
        self._call("resetCounters", {"name": proxy}, query={"session": session}, want=(204,))

    def record(self, proxy: str, match: Optional[str] = None, *, session: Optional[str] = None,
               since: Optional[str] = None, apply: bool = False, revision: Optional[str] = None,
               local: bool = False) -> JSON:
        """The mocks the journal's forwarded exchanges of ``proxy`` make. With
        ``apply=True`` (and the proxy's ``revision``) they are appended to it;
        otherwise nothing changes. Returns the answer's body."""
        body: JSON = {"match": match, "session": session, "since": since, "revision": revision,
                      "apply": apply, "local": local or None}
        out: JSON = self._call("recordProxy", {"name": proxy}, body={k: v for k, v in body.items() if v is not None})
        return out

    # Sessions.

    def session(self, proxies: Mapping[str, Any], ttl: int = 600, id: Optional[str] = None) -> "Session":
        """Starts a session: ``proxies`` is its overlay's map, proxy name ->
        ``{"mocks", "loss", ...}``. It is in force on return, and a context
        manager that ends it on exit::

            with client.session({"shop": {"loss": {...}}}, ttl=60) as s:
                requests.get(url, headers=s.headers)
        """
        body: JSON = {"ttl": ttl, "proxies": dict(proxies)}
        if id is not None:
            body["id"] = id
        info = self._call("createSession", body=body, want=(201,))
        return Session(self, info)

    def sessions(self) -> List[JSON]:
        """The live sessions whose every proxy the caller may read, soonest
        to expire first: ``{"id", "expires_at", "revision", "ttl", "proxies"}``."""
        return list(self._call("listSessions")["sessions"])

    def end_session(self, id: str) -> None:
        """Ends a session at once; NotFound once it ended or expired."""
        self._call("deleteSession", {"id": id}, want=(204,))

    # The journal.

    def requests(self, **filters: Any) -> List[JSON]:
        """The journal's entries, oldest first, that the filters select:
        proxy, mock, method, path (a regular expression), session, since
        (an entry's id or an RFC 3339 time), limit, local."""
        allowed = OPERATIONS["listRequests"].query
        unknown = sorted(set(filters) - set(allowed))
        if unknown:
            raise TypeError("requests() takes the filters %s, not %s" % (", ".join(allowed), ", ".join(unknown)))
        return list(self._call("listRequests", query=filters)["requests"])

    def clear_requests(self, *proxies: str) -> None:
        """Forgets the journal's entries of the proxies named, or of every
        proxy the caller may update when none is."""
        self._call("clearRequests", query={"proxy": list(proxies)}, want=(204,))

    def verify(self, match: Mapping[str, Any], count: Optional[Range] = None, gaps_ms: Optional[Range] = None,
               same_header: Optional[str] = None, partial: bool = False, local: bool = False) -> JSON:
        """Checks the journal: the entries ``match`` selects (proxy, mock,
        method, path, session, headers) number ``count`` (an int, or
        ``{"min", "max"}``, or ``(min, max)`` with None for an open end),
        come ``gaps_ms`` apart and share one value of ``same_header``.
        Returns the answer's body (``{"matched", "gaps_ms", ...}``); a
        condition that does not hold raises VerificationFailed, carrying
        ``matched`` and the matched ``requests``."""
        body: JSON = {"match": dict(match)}
        if count is not None:
            body["count"] = _range("count", count)
        if gaps_ms is not None:
            body["gaps_ms"] = _range("gaps_ms", gaps_ms)
        if same_header:
            body["same_header"] = same_header
        if partial:
            body["partial"] = True
        if local:
            body["local"] = True
        out: JSON = self._call("verifyRequests", body=body)
        return out

    # The instance.

    def status(self) -> JSON:
        """``{"uptime_seconds", "revision", "proxies", "replica", "fleet"}``."""
        out: JSON = self._call("status")
        return out

    # The exchange.

    def _call(self, op_id: str, params: Optional[Mapping[str, str]] = None, *,
              query: Optional[Mapping[str, Any]] = None, body: Any = None, want: Sequence[int] = (200,)) -> Any:
        op = OPERATIONS[op_id]
        url = self.admin_url + _fill(op, params or {})
        pairs = list(_query(query or {}))
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=op.method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header(self._token_header, "Bearer " + self._token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except urllib.error.URLError as e:
            if isinstance(e.reason, (socket.timeout, TimeoutError)):
                raise TimedOut("no answer from %s within %ss" % (url, self.timeout), operation=op_id, url=url) from None
            raise Unreachable("cannot reach %s: %s" % (url, e.reason), operation=op_id, url=url) from None
        except (socket.timeout, TimeoutError):
            raise TimedOut("no answer from %s within %ss" % (url, self.timeout), operation=op_id, url=url) from None
        except http.client.HTTPException as e:  # not HTTP, or cut short
            raise UnexpectedAnswer("%s did not answer in HTTP: %s %s" % (url, type(e).__name__, e),
                                   operation=op_id, url=url) from None
        except (OSError, ValueError) as e:  # a reset, a URL urllib refuses
            raise Unreachable("cannot reach %s: %s" % (url, e), operation=op_id, url=url) from None
        if status not in want:
            err = read_error(status, raw, operation=op_id, url=url)
            if err is None:
                err = UnexpectedAnswer("%s answered %d, not Doppel's error envelope: %s" % (url, status, _snippet(raw)),
                                       status=status, operation=op_id, url=url)
            raise err
        if status == 204 or not raw:
            return None
        try:
            out = json.loads(raw)
        except ValueError:
            raise UnexpectedAnswer("%s answered %d with something that is not JSON: %s" % (url, status, _snippet(raw)),
                                   status=status, operation=op_id, url=url) from None
        missing = [f for f in op.answer if not isinstance(out, dict) or f not in out]
        if missing or not isinstance(out, dict):
            raise UnexpectedAnswer("%s answered %d without %s, which the API documents: %s"
                                   % (url, status, ", ".join(missing) or "an object", _snippet(raw)),
                                   status=status, operation=op_id, url=url)
        return out


class Session:
    """A live session: requests carrying ``headers`` get its overlay. A
    context manager that ends it on exit."""

    def __init__(self, client: Client, info: JSON) -> None:
        self.client = client
        self.info = info
        self.id: str = info["id"]
        self.headers: Dict[str, str] = {client.session_header: self.id}

    def end(self) -> None:
        """Ends it; one that already ended or expired is left as it is."""
        try:
            self.client.end_session(self.id)
        except NotFound:
            pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()

    def __repr__(self) -> str:
        return "doppel.Session(%r)" % self.id


def _fill(op: Operation, params: Mapping[str, str]) -> str:
    path = op.path
    for name, value in params.items():
        if not isinstance(value, str):
            raise TypeError("%s: the %s is a string, not %r" % (op.id, name, value))
        if not value:
            raise ValueError("%s: the %s is empty" % (op.id, name))
        path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
    return path


def _query(query: Mapping[str, Any]) -> Iterator[Tuple[str, str]]:
    for k, v in query.items():
        for one in v if isinstance(v, (list, tuple)) else [v]:
            if one is None or one is False:
                continue
            yield k, "true" if one is True else str(one)


def _range(name: str, r: Range) -> JSON:
    if isinstance(r, bool):
        raise TypeError("%s is a number, a {min, max} mapping or a (min, max) pair, not %r" % (name, r))
    if isinstance(r, (int, float)):
        return {"min": r, "max": r}
    if isinstance(r, Mapping):
        return dict(r)
    if isinstance(r, tuple) and len(r) == 2:
        return {k: v for k, v in zip(("min", "max"), r) if v is not None}
    raise TypeError("%s is a number, a {min, max} mapping or a (min, max) pair, not %r" % (name, r))


def _with_type(p: Mapping[str, Any]) -> JSON:
    out = dict(p)
    out.setdefault("type", "http")
    return out


def _snippet(raw: bytes) -> str:
    s = raw.decode("utf-8", "replace").strip()
    return s if len(s) <= 200 else s[:200] + "…"
