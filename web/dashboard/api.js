// The admin API client: where the API is, the token, the error envelope.

// The page may sit under a reverse proxy's prefix: everything is found
// relative to this file, which is served from <root>/static/assets/.
export const root = new URL('../../', import.meta.url);

// pageConfig is what the server wrote into the page: the title, the token
// header, whether the API is public, the version.
export const pageConfig = (() => {
  const holder = document.getElementById('doppel-config');
  try {
    return JSON.parse((holder && holder.textContent) || '{}');
  } catch {
    return {};
  }
})();

const tokenKey = 'doppel.token';
const tokenLifetime = 60 * 60 * 1000; // one hour

// An answer that is the API's error envelope, or no answer at all.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function authHeader() {
  return pageConfig.authHeader || 'X-Proxy-Authorization';
}

// token is the one kept in this browser, or '' when none is or it expired.
export function token() {
  let kept;
  try {
    kept = JSON.parse(localStorage.getItem(tokenKey) || 'null');
  } catch {
    kept = null;
  }
  if (!kept || typeof kept.value !== 'string' || typeof kept.expires !== 'number' || kept.expires <= Date.now()) {
    localStorage.removeItem(tokenKey);
    return '';
  }
  return kept.value;
}

// tokenExpiry is when the kept token is forgotten (ms since the epoch), or
// 0 when none is kept.
export function tokenExpiry() {
  if (!token()) {
    return 0;
  }
  return JSON.parse(localStorage.getItem(tokenKey)).expires;
}

export function keepToken(value) {
  localStorage.setItem(tokenKey, JSON.stringify({ value, expires: Date.now() + tokenLifetime }));
}

export function forgetToken() {
  localStorage.removeItem(tokenKey);
}

// unauthorized is told of every 401, with the token that was sent ('' for
// none), so the page can ask for another and learn what it may do now.
let unauthorized = () => {};
export function whenUnauthorized(fn) {
  unauthorized = fn;
}

// call sends one request and returns {status, headers, data}; an error
// envelope, or a failure to reach the server, is thrown as an ApiError.
// opts: body (sent as JSON), ifMatch (a revision), token (instead of the
// kept one, '' for none).
export async function call(method, path, opts = {}) {
  const headers = { Accept: 'application/json' };
  const tok = opts.token !== undefined ? opts.token : token();
  if (tok) {
    headers[authHeader()] = 'Bearer ' + tok;
  }
  if (opts.ifMatch) {
    headers['If-Match'] = '"' + opts.ifMatch + '"';
  }
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(new URL(path, root), { method, headers, body, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, 'UNREACHABLE', 'Doppel did not answer: ' + e.message);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (res.status === 401 && opts.token === undefined) {
    unauthorized(tok);
  }
  if (!res.ok) {
    if (data && typeof data === 'object' && data.status === 'error') {
      throw new ApiError(res.status, data.code, data.message);
    }
    throw new ApiError(res.status, 'HTTP_' + res.status, 'Doppel answered ' + res.status);
  }
  return { status: res.status, headers: res.headers, data };
}

// events reads a Server-Sent Events stream (GET path) and hands each
// event to onEvent(name, data) until the stream ends or signal is aborted;
// onOpen runs (and is awaited) once the answer has come, before any event.
// EventSource cannot send the token header, so this reads the body of a
// fetch itself. An answer that is not 200 is thrown as an ApiError.
export async function events(path, signal, onEvent, onOpen) {
  const headers = { Accept: 'text/event-stream' };
  const tok = token();
  if (tok) {
    headers[authHeader()] = 'Bearer ' + tok;
  }
  let res;
  try {
    res = await fetch(new URL(path, root), { headers, signal, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, 'UNREACHABLE', 'Doppel did not answer: ' + e.message);
  }
  if (!res.ok) {
    if (res.status === 401) {
      unauthorized(tok);
    }
    let data = null;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
    throw new ApiError(res.status, (data && data.code) || 'HTTP_' + res.status, (data && data.message) || 'Doppel answered ' + res.status);
  }
  if (onOpen) {
    await onOpen();
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      return;
    }
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) {
          name = line.slice(6).trim();
        } else if (line.startsWith('data:')) {
          data.push(line.slice(5).replace(/^ /, ''));
        }
      }
      if (data.length) {
        onEvent(name, data.join('\n'));
      }
    }
  }
}

// access is GET /api/v1/access with the kept token (or the one given).
export async function access(tok) {
  return (await call('GET', 'api/v1/access', tok === undefined ? {} : { token: tok })).data;
}

// refusal says why the server would refuse an action, or '' when it
// would not: the text of a disabled button's tooltip.
export function refusal(report, act, proxy) {
  let ok = report && report.global && report.global[act];
  if (proxy && report && report.proxies && report.proxies[proxy] && act in report.proxies[proxy]) {
    ok = report.proxies[proxy][act];
  }
  if (ok) {
    return '';
  }
  if (!report || !report.caller || report.caller.kind === 'anonymous') {
    return 'Needs a token that may ' + act + (proxy ? ' this proxy' : '') + ': use Token… to present one';
  }
  return 'Token ' + report.caller.name + ' may not ' + act + (proxy ? ' this proxy' : ' here');
}
