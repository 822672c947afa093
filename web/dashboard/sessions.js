// The sessions page: the live sessions (GET /api/v1/sessions), soonest to
// expire first, each with a countdown; what one lays over each proxy
// (GET /api/v1/sessions/<id>); End (DELETE /api/v1/sessions/<id>).
import { call, pageConfig, refusal, root } from './api.js';
import { el } from './form.js';
import { dump as toYAML } from './js-yaml.js';
import { timeEl } from './time.js';

// The list is fetched again this often while the page is open and the tab
// visible. The browser tests shorten it with a localStorage entry.
const refreshKey = 'doppel.sessions-refresh-ms';
function refreshEvery() {
  const ms = Number(localStorage.getItem(refreshKey));
  return Number.isInteger(ms) && ms >= 100 ? ms : 5000;
}

// countdown is the time left until expires (ms since the epoch), as
// "in 4 min 12 s", or "expired" once it passed.
export function countdown(expires, now = Date.now()) {
  const left = Math.ceil((expires - now) / 1000);
  if (!(left > 0)) {
    return 'expired';
  }
  const d = Math.floor(left / 86400);
  const h = Math.floor((left % 86400) / 3600);
  const m = Math.floor((left % 3600) / 60);
  const s = left % 60;
  if (d) {
    return 'in ' + d + ' d ' + h + ' h';
  }
  if (h) {
    return 'in ' + h + ' h ' + m + ' min';
  }
  return 'in ' + (m ? m + ' min ' : '') + s + ' s';
}

function seconds(n) {
  return n + ' s';
}

function authHeader() {
  return pageConfig.authHeader || 'X-Proxy-Authorization';
}

// createLine is a curl that creates a session over a proxy of this Doppel.
function createLine(report) {
  const names = Object.keys((report && report.proxies) || {}).sort();
  const proxy = names[0] || 'shop';
  const body = JSON.stringify({ ttl: 300, proxies: { [proxy]: { loss: { percentage: 1.0, status: 503 } } } });
  return 'curl -s -H "' + authHeader() + ': Bearer $TOKEN" ' + new URL('api/v1/sessions', root).href + " -d '" + body + "'";
}

// endRefusal says why ending a session over these proxies would be
// refused, or '' when it would not: it needs update on each.
function endRefusal(report, proxies) {
  if (!proxies.length) {
    return refusal(report, 'update');
  }
  for (const p of proxies) {
    const r = refusal(report, 'update', p);
    if (r) {
      return proxies.length > 1 ? r.replace('this proxy', 'proxy ' + p) : r;
    }
  }
  return '';
}

export async function sessionsPage(app, signal) {
  const report = app.report;
  let sessions = [];
  let selected = ''; // the id whose overlay is shown

  const stamp = el('span', { class: 'muted', id: 'sessions-fetched' });
  const refreshButton = el('button', { type: 'button', id: 'sessions-refresh', text: 'Refresh', title: 'Fetch the live sessions again' });
  const error = el('div', { class: 'banner error', id: 'sessions-error', role: 'alert', hidden: true });
  const detail = el('section', { class: 'panel', id: 'session-detail', 'aria-live': 'polite', hidden: true });
  const tbody = el('tbody', { id: 'sessions-body' });
  const table = el('table', { id: 'sessions', class: 'sessions', hidden: true },
    el('thead', {}, el('tr', {},
      el('th', { text: 'Session' }), el('th', { text: 'Proxies' }), el('th', { text: 'Expires' }),
      el('th', { class: 'num', text: 'TTL', title: 'The lifetime it was given, in seconds; an update counts it again from then' }), el('th', {}))),
    tbody);
  const readOnly = el('p', { class: 'hint muted', id: 'sessions-readonly', hidden: true });
  const empty = el('div', { id: 'sessions-empty', hidden: true },
    el('p', { text: 'No live sessions.' }),
    el('p', { class: 'muted' }, 'A session is an overlay of mocks and faults that applies only to requests carrying its id in the ',
      el('code', { text: 'X-Doppel-Session' }), ' header (', el('code', { text: 'server.session_header' }),
      '): a test suite creates one in its fixture, sends its id with its requests, and ends it after, so suites running at once against this Doppel do not see each other\'s faults. It ends by itself when its ttl runs out. See ',
      el('code', { text: 'docs/sessions.md' }), ' and the sessions calls of the ', el('a', { href: new URL('swagger-ui/', root).pathname, text: 'API' }), '.'),
    el('p', { class: 'muted', text: 'To create one for five minutes:' }),
    el('pre', { class: 'body', id: 'sessions-create', text: createLine(report) }));
  const body = el('div', { class: 'panel scroll' }, table, readOnly, empty);

  app.main.replaceChildren(
    el('div', { class: 'head' }, el('h1', { text: 'Sessions' }), stamp, refreshButton),
    el('p', { class: 'muted hint' }, 'Overlays of mocks and faults for the requests that carry their id in ', el('code', { text: 'X-Doppel-Session' }),
      '. They are not part of the configuration and end by themselves at their expiry.'),
    error, body, detail);

  const listRefused = refusal(report, 'list');
  if (listRefused) {
    body.replaceChildren(el('p', { id: 'sessions-refused', text: 'The sessions are not shown: ' + listRefused + '.' }));
    refreshButton.disabled = true;
    return;
  }

  // The banner says what failed: the list's fetch ('list'), which the
  // next fetch that works takes away, or an End ('end'), which stays.
  const showError = (text, from) => {
    error.replaceChildren(el('strong', { text }));
    error.dataset.from = from;
    error.hidden = false;
  };

  const closeDetail = () => {
    selected = '';
    detail.hidden = true;
    detail.replaceChildren();
    for (const r of tbody.querySelectorAll('tr.selected')) {
      r.classList.remove('selected');
    }
  };

  // tick rewrites every countdown; a row whose time is up says expired.
  const tick = () => {
    const now = Date.now();
    for (const cell of tbody.querySelectorAll('[data-expires]')) {
      const left = countdown(Number(cell.dataset.expires), now);
      if (cell.textContent !== left) {
        cell.textContent = left;
      }
      const tr = cell.closest('tr');
      if (left === 'expired' && !tr.classList.contains('expired')) {
        tr.classList.add('expired');
        const end = tr.querySelector('button.end');
        end.disabled = true;
        end.title = 'This session expired: Doppel removes it by itself';
      }
    }
  };

  const rowOf = (s) => {
    const expires = Date.parse(s.expires_at);
    const refused = endRefusal(report, s.proxies || []);
    const show = () => showDetail(s.id);
    const end = el('button', { type: 'button', class: 'small danger end', text: 'End', disabled: !!refused,
      title: refused || 'End this session now (DELETE /api/v1/sessions/' + s.id + ')',
      onclick: (ev) => { ev.stopPropagation(); endSession(s); } });
    const tr = el('tr', { class: 'entry-row' + (s.id === selected ? ' selected' : ''), 'data-id': s.id, tabindex: '0', title: 'Show what it lays over each proxy' },
      el('td', { class: 'mono id', text: s.id }),
      el('td', {}, (s.proxies || []).map((p) => el('span', { class: 'tag', text: p }))),
      el('td', { class: 'nowrap' }, timeEl(s.expires_at, { class: 'expires-at' }), ' ',
        el('span', { class: 'countdown', 'data-expires': String(expires), text: countdown(expires) })),
      el('td', { class: 'num nowrap', text: seconds(s.ttl) }),
      el('td', { class: 'row-actions' },
        el('button', { type: 'button', class: 'small view', text: 'View', title: 'Show what it lays over each proxy', onclick: (ev) => { ev.stopPropagation(); show(); } }),
        end));
    tr.addEventListener('click', show);
    tr.addEventListener('keydown', (ev) => {
      if (ev.target === tr && (ev.key === 'Enter' || ev.key === ' ')) {
        ev.preventDefault();
        show();
      }
    });
    return tr;
  };

  const draw = () => {
    tbody.replaceChildren(...sessions.map(rowOf));
    table.hidden = !sessions.length;
    empty.hidden = !!sessions.length;
    const refused = sessions.map((s) => endRefusal(report, s.proxies || [])).find((r) => r);
    readOnly.hidden = !refused;
    readOnly.textContent = refused ? 'End: ' + refused + '.' : '';
    tick();
  };

  const forget = (id) => {
    sessions = sessions.filter((s) => s.id !== id);
    if (selected === id) {
      closeDetail();
    }
    draw();
  };

  // refresh fetches the list and draws it; it says true when it did.
  let asked = 0;
  const refresh = async () => {
    const mine = ++asked;
    body.setAttribute('aria-busy', 'true');
    let list;
    try {
      list = (await call('GET', 'api/v1/sessions')).data.sessions || [];
    } catch (e) {
      if (!signal.aborted && mine === asked) {
        showError('The sessions could not be fetched: ' + e.message, 'list');
        body.setAttribute('aria-busy', 'false');
      }
      return false;
    }
    if (signal.aborted || mine !== asked) {
      return false;
    }
    if (error.dataset.from === 'list') {
      error.hidden = true;
    }
    sessions = list;
    if (selected && !sessions.some((s) => s.id === selected)) {
      closeDetail();
    }
    draw();
    stamp.replaceChildren('Fetched ', timeEl(new Date()));
    body.setAttribute('aria-busy', 'false');
    return true;
  };

  async function showDetail(id) {
    selected = id;
    for (const r of tbody.querySelectorAll('tr')) {
      r.classList.toggle('selected', r.dataset.id === id);
    }
    const close = el('button', { type: 'button', class: 'small', id: 'session-close', text: 'Close', onclick: closeDetail });
    const head = el('div', { class: 'head' }, el('h2', {}, 'Session ', el('span', { class: 'mono', text: id })), close);
    detail.replaceChildren(head, el('p', { class: 'muted', text: 'Loading…' }));
    detail.setAttribute('aria-busy', 'true');
    detail.hidden = false;
    let s;
    try {
      s = (await call('GET', 'api/v1/sessions/' + encodeURIComponent(id))).data;
    } catch (e) {
      if (signal.aborted || selected !== id) {
        return;
      }
      detail.replaceChildren(head, el('p', { class: 'error', id: 'session-detail-error',
        text: e.status === 404 ? 'Session ' + id + ' already ended or expired.' : 'The session could not be fetched: ' + e.message }));
      detail.setAttribute('aria-busy', 'false');
      if (e.status === 404) {
        sessions = sessions.filter((x) => x.id !== id);
        draw();
      }
      return;
    }
    if (signal.aborted || selected !== id) {
      return;
    }
    const names = Object.keys(s.proxies || {}).sort();
    detail.replaceChildren(head,
      el('p', { class: 'muted' }, 'Expires at ', timeEl(s.expires_at), ', ttl ' + seconds(s.ttl) + ', revision ',
        el('code', { text: s.revision }), '. Requests sending ', el('code', { text: 'X-Doppel-Session: ' + s.id }), ' meet, on each proxy below, what it lays over it:'),
      el('div', { class: 'overlays' }, names.map((n) => el('section', { class: 'overlay', 'data-proxy': n },
        el('h3', {}, el('a', { href: new URL('proxies/' + encodeURIComponent(n), root).pathname, 'data-route': 'proxies/' + encodeURIComponent(n), text: n })),
        el('pre', { class: 'body overlay-yaml', text: toYAML(s.proxies[n], { lineWidth: -1, noRefs: true }).trimEnd() || '{}' })))));
    detail.setAttribute('aria-busy', 'false');
  }

  async function endSession(s) {
    const names = s.proxies || [];
    const ok = await app.confirmAction({
      title: 'End session ' + s.id + '?',
      text: 'Its mocks and faults stop applying now: requests carrying X-Doppel-Session: ' + s.id + ' are served as the ' +
        (names.length === 1 ? 'proxy is' : 'proxies are') + ' configured. It lays over:',
      items: names.map((n) => el('li', {}, el('code', { text: n }))),
      ok: 'End session',
    });
    if (!ok || signal.aborted) {
      return;
    }
    try {
      await call('DELETE', 'api/v1/sessions/' + encodeURIComponent(s.id));
    } catch (e) {
      if (signal.aborted) {
        return;
      }
      if (e.status === 404) {
        showError('Session ' + s.id + ' already ended or expired: nothing to end.', 'end');
        forget(s.id);
      } else {
        showError('Not ended: ' + e.message, 'end');
      }
      return;
    }
    if (signal.aborted) {
      return;
    }
    error.hidden = true;
    forget(s.id);
    app.toast('Ended session ' + s.id);
  }

  refreshButton.addEventListener('click', () => {
    error.hidden = true;
    refresh();
  });

  const ticker = setInterval(tick, 1000);
  let refresher = 0;
  const follow = () => {
    clearInterval(refresher);
    refresher = document.visibilityState === 'visible' ? setInterval(refresh, refreshEvery()) : 0;
  };
  const onVisibility = () => {
    if (document.visibilityState === 'visible') {
      refresh();
    }
    follow();
  };
  document.addEventListener('visibilitychange', onVisibility);
  signal.addEventListener('abort', () => {
    clearInterval(ticker);
    clearInterval(refresher);
    document.removeEventListener('visibilitychange', onVisibility);
  }, { once: true });

  await refresh();
  if (!signal.aborted) {
    follow();
  }
}

// sessionsNote is a line for the proxy page of name saying how many live
// sessions lay over it, with a link to the sessions page; it stays hidden
// when none does, or when the caller may not list them.
export function sessionsNote(app, name, signal) {
  const note = el('p', { class: 'muted', id: 'proxy-sessions', hidden: true });
  if (refusal(app.report, 'list')) {
    return note;
  }
  call('GET', 'api/v1/sessions').then((r) => {
    if (signal.aborted) {
      return;
    }
    const n = (r.data.sessions || []).filter((s) => (s.proxies || []).includes(name)).length;
    if (n) {
      note.replaceChildren((n === 1 ? '1 live session lays' : n + ' live sessions lay') + ' its own mocks and faults over this proxy, for the requests that carry its id: ',
        el('a', { href: new URL('sessions', root).pathname, 'data-route': 'sessions', text: 'see Sessions' }), '.');
      note.hidden = false;
    }
  }).catch(() => {});
  return note;
}
