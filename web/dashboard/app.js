// The dashboard: a client of the admin API with the same token rules.
// Routes: '' (the proxies), 'new', 'proxies/<name>', 'requests', 'sessions', 'status'.
import { access, call, forgetToken, keepToken, refusal, root, token, tokenExpiry, whenUnauthorized } from './api.js';
import { FAULTS, shareText, sizeText } from './faults.js';
import { el } from './form.js';
import { proxyPage } from './proxy.js';
import { requestsPage } from './requests.js';
import { sessionsPage } from './sessions.js';
import { timeEl } from './time.js';

const main = document.getElementById('main');
const refreshKey = 'doppel.refresh-ms';
const anonymousKey = 'doppel.anonymous';
const themeKey = 'doppel.theme';

const app = {
  main,
  report: null,
  editing: false, // the page in force holds an edit that may be saved
  schemaPromise: null,
  schema() {
    if (!this.schemaPromise) {
      this.schemaPromise = call('GET', 'api/v1/schema').then((r) => r.data);
      this.schemaPromise.catch(() => { this.schemaPromise = null; });
    }
    return this.schemaPromise;
  },
  navigate(path, replace) {
    const url = new URL(path, root);
    if (replace) {
      history.replaceState(null, '', url);
    } else {
      history.pushState(null, '', url);
    }
    route();
  },
  route: () => route(),
  refreshAccess: () => refreshAccess().catch(() => {}),
  toast,
  confirmDelete,
  confirmAction,
};

// ---- theme

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  document.getElementById('theme').textContent = theme === 'dark' ? 'Light' : 'Dark';
}

function initialTheme() {
  const kept = localStorage.getItem(themeKey);
  if (kept === 'light' || kept === 'dark') {
    return kept;
  }
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

// ---- messages

let toastTimer = 0;
function toast(text, isError) {
  const t = document.getElementById('toast');
  t.textContent = text;
  t.className = 'toast' + (isError ? ' error' : '');
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

function failure(e) {
  main.replaceChildren(el('div', { class: 'banner error', id: 'failure' },
    el('strong', { text: e.status ? 'Doppel answered ' + e.status + (e.code ? ' ' + e.code : '') : 'Doppel did not answer' }),
    el('p', { text: e.message })));
}

// ---- access and the token

// refreshAccess asks what the caller may do. The access report is asked
// again after every write and every 401, so what the page disables
// follows the server. A kept token the server no longer knows is
// forgotten, and another asked for.
async function refreshAccess() {
  const kept = token();
  const report = await access();
  if (kept && kept === token() && report.caller.kind !== 'token') {
    tokenLapsed('Doppel no longer knows the token kept in this browser; it is forgotten.');
  }
  app.report = report;
  const c = report.caller;
  document.getElementById('caller').textContent = c.kind === 'token' ? 'Token ' + c.name + ' (' + c.group + ')' : 'No token';
  document.getElementById('sign-out').hidden = !token();
  watchExpiry();
}

// The kept token is forgotten after an hour: then the page asks for
// another, as it does when the server refuses the token.
let expiryTimer = 0;
function watchExpiry() {
  clearTimeout(expiryTimer);
  const expires = tokenExpiry();
  if (!expires) {
    return;
  }
  expiryTimer = setTimeout(() => {
    if (token()) {
      watchExpiry(); // not yet, or a new one was kept meanwhile
      return;
    }
    tokenLapsed('The token kept in this browser expired after one hour; it is forgotten.');
    app.refreshAccess();
  }, Math.min(expires - Date.now(), 2 ** 31 - 1) + 10);
}

// lapsed is set while the token dialog is open because the kept token
// stopped working: closing it then leaves an edit in progress alone.
let lapsed = false;

function tokenLapsed(reason) {
  forgetToken();
  clearTimeout(expiryTimer);
  document.getElementById('sign-out').hidden = true;
  lapsed = true;
  openTokenDialog(reason);
}

whenUnauthorized((sent) => {
  if (sent && sent === token()) {
    tokenLapsed('Doppel does not know the token kept in this browser; it is forgotten.');
  }
  app.refreshAccess();
});

const tokenDialog = document.getElementById('token-dialog');

// openTokenDialog asks for a token, saying why when the kept one lapsed.
function openTokenDialog(reason) {
  if (tokenDialog.open) {
    return;
  }
  const why = document.getElementById('token-reason');
  why.textContent = reason || '';
  why.hidden = !reason;
  document.getElementById('token-input').value = '';
  document.getElementById('token-error').hidden = true;
  tokenDialog.showModal();
}

// afterDialog draws the page again for the new caller, except an edit in
// progress when the dialog opened because the token lapsed: that stays,
// and a save uses the token given now.
function afterDialog() {
  const keep = lapsed && app.editing;
  lapsed = false;
  if (!keep) {
    route();
  }
}

document.getElementById('token-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const value = document.getElementById('token-input').value.trim();
  const error = document.getElementById('token-error');
  let report;
  try {
    report = await access(value);
  } catch (e) {
    error.textContent = e.message;
    error.hidden = false;
    return;
  }
  if (report.caller.kind !== 'token') {
    error.textContent = 'Doppel does not know this token.';
    error.hidden = false;
    return;
  }
  keepToken(value);
  sessionStorage.removeItem(anonymousKey);
  tokenDialog.close();
  await app.refreshAccess();
  toast('Signed in as ' + report.caller.name);
  afterDialog();
});

document.getElementById('token-anonymous').addEventListener('click', () => {
  sessionStorage.setItem(anonymousKey, '1');
  tokenDialog.close();
  afterDialog();
});

document.getElementById('token-open').addEventListener('click', () => openTokenDialog());

document.getElementById('sign-out').addEventListener('click', async () => {
  forgetToken();
  clearTimeout(expiryTimer);
  await app.refreshAccess();
  toast('Signed out: the token is forgotten');
  route();
});

// ---- the confirmation dialog, shared by every page

// confirmAction asks in the dashboard's dialog: a title, a text, a list
// (elements, possibly none) and the label of the button that goes ahead.
// It says true when that button was chosen. The dialog's close event
// comes a task later: one that arrives after the dialog opened again (a
// Cancel, then another question at once) is not taken for its answer,
// and a question still waiting when the next is asked is answered no.
let settleConfirm = null;
async function confirmAction({ title, text, items = [], ok }) {
  if (settleConfirm) {
    settleConfirm(false);
  }
  const dialog = document.getElementById('confirm-dialog');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const list = document.getElementById('confirm-list');
  list.replaceChildren(...items);
  list.hidden = !items.length;
  document.getElementById('confirm-ok').textContent = ok;
  dialog.returnValue = '';
  dialog.showModal();
  document.getElementById('confirm-cancel').focus();
  return new Promise((resolve) => {
    const onClose = () => {
      if (!dialog.open) {
        finish(dialog.returnValue === 'ok');
      }
    };
    const finish = (answer) => {
      dialog.removeEventListener('close', onClose);
      if (settleConfirm === finish) {
        settleConfirm = null;
      }
      resolve(answer);
    };
    settleConfirm = finish;
    dialog.addEventListener('close', onClose);
  });
}

// ---- delete, shared by the list and the proxy page

async function confirmDelete(name, revision) {
  let text;
  let items = [];
  try {
    const files = (await call('GET', 'api/v1/proxies/' + encodeURIComponent(name) + '/templates')).data.templates || [];
    if (files.length) {
      text = 'This removes proxy ' + name + ' and its ' + (files.length === 1 ? 'template file' : files.length + ' template files') + ':';
      items = files.map((f) => el('li', {}, el('code', { text: f.name }), ' (' + f.size + ' bytes)'));
    } else {
      text = 'This removes proxy ' + name + '. It has no template files.';
    }
  } catch (e) {
    text = 'This removes proxy ' + name + ' and all its template files (they could not be listed: ' + e.message + ').';
  }
  if (!await confirmAction({ title: 'Delete proxy ' + name + '?', text, items, ok: 'Delete' })) {
    return false;
  }
  try {
    await call('DELETE', 'api/v1/proxies/' + encodeURIComponent(name), { ifMatch: revision });
  } catch (e) {
    toast(e.code === 'REVISION_MISMATCH'
      ? 'Not deleted: proxy ' + name + ' changed since you loaded it; reload to see the current version.'
      : 'Not deleted: ' + e.message, true);
    return false;
  }
  toast('Deleted proxy ' + name);
  await app.refreshAccess();
  return true;
}

// ---- the proxy list

// The list refetches every minute while the tab is visible. There is at
// most one timer: it is cleared before another is set, and only the list
// page in force sets one.
let refreshTimer = 0;
let lastFetch = 0;
let refreshList = null;

// refreshEvery is a minute. The browser tests shorten it with a
// localStorage entry; it changes only how often this browser asks.
function refreshEvery() {
  const ms = Number(localStorage.getItem(refreshKey));
  return Number.isInteger(ms) && ms >= 100 ? ms : 60 * 1000;
}

function stopRefresh() {
  clearInterval(refreshTimer);
  refreshTimer = 0;
  refreshList = null;
}

function startRefresh() {
  clearInterval(refreshTimer);
  refreshTimer = 0;
  if (refreshList && document.visibilityState === 'visible') {
    refreshTimer = setInterval(() => refreshList && refreshList(), refreshEvery());
  }
}

document.addEventListener('visibilitychange', () => {
  if (!refreshList) {
    return;
  }
  if (document.visibilityState === 'visible' && Date.now() - lastFetch >= refreshEvery()) {
    refreshList();
  }
  startRefresh();
});

function upstream(url) {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return url;
  }
}

// faults names what is on, in the order a request rolls them.
function faults(p) {
  const on = (f) => f && f.percentage > 0;
  const out = [];
  if (on(p.loss)) {
    out.push('loss ' + shareText(p.loss.percentage) + ' → ' + p.loss.status);
  }
  if (on(p.abort)) {
    out.push('abort ' + shareText(p.abort.percentage) + ' at ' + p.abort.at);
  }
  if (on(p.hang)) {
    out.push('hang ' + shareText(p.hang.percentage) + ' ' + p.hang.seconds + ' s');
  }
  if (on(p.bandwidth)) {
    out.push('bandwidth ' + shareText(p.bandwidth.percentage) + ' ' + sizeText(p.bandwidth.bytes_per_second) + '/s');
  }
  if (on(p.latency)) {
    out.push('latency ' + shareText(p.latency.percentage) + ' ' + p.latency.min + '–' + p.latency.max + ' s');
  }
  const mocked = (p.mocks || []).filter((m) => m.proxy && FAULTS.some((k) => on(m.proxy[k]))).length;
  if (mocked) {
    out.push(mocked === 1 ? '1 mock with its own' : mocked + ' mocks with their own');
  }
  return out;
}

// mockHits reads doppel_mock_hits_total from /metrics: proxy → mock →
// requests answered since Doppel started. The counters are Doppel's own
// (cleared by nothing but a restart, not bounded by the journal), and
// one fetch serves the whole list. null when there are no metrics.
async function mockHits() {
  let text;
  try {
    text = (await call('GET', 'metrics')).data;
  } catch {
    return null;
  }
  if (typeof text !== 'string') {
    return null;
  }
  const hits = {};
  const unescape = (v) => v.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  for (const line of text.split('\n')) {
    const m = /^doppel_mock_hits_total\{(.*)\}\s+(\S+)/.exec(line);
    if (!m) {
      continue;
    }
    const labels = {};
    for (const l of m[1].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = unescape(l[2]);
    }
    (hits[labels.proxy] ||= {})[labels.mock] = Number(m[2]);
  }
  return hits;
}

// hitsCell sums the hits of the proxy's mocks in force, each in the tooltip.
function hitsCell(p, hits) {
  if (!hits) {
    return el('td', { class: 'num muted', text: '—', title: 'No metrics are served here' });
  }
  const mine = hits[p.name] || {};
  const mocks = (p.mocks || []).map((m) => m.name);
  const total = mocks.reduce((n, m) => n + (mine[m] || 0), 0);
  return el('td', { class: 'num hits', text: String(total), title: mocks.length ? mocks.map((m) => m + ': ' + (mine[m] || 0)).join(', ') : 'No mocks' });
}

function resolution(p) {
  if (p.type === 'tcp') {
    return 'listens on ' + p.listen;
  }
  return p.resolve && p.resolve.type === 'header' ? 'header ' + p.resolve.header + ': ' + p.name : 'default';
}

// Each page gets the signal of its visit: once the address changes, it
// is aborted, and the page draws nothing more and starts no timer.
async function listPage(signal) {
  const createRefused = refusal(app.report, 'create');
  const stamp = el('span', { class: 'muted', id: 'refreshed' });
  const body = el('div', { class: 'panel' });
  main.replaceChildren(
    el('div', { class: 'head' }, el('h1', { text: 'Proxies' }), stamp,
      el('button', { type: 'button', id: 'new-proxy', class: 'primary', text: 'New proxy', disabled: !!createRefused, title: createRefused || undefined, onclick: () => app.navigate('new') })),
    body);
  const listRefused = refusal(app.report, 'list');
  if (listRefused) {
    body.append(el('p', { id: 'list-refused', text: 'The proxies are not shown: ' + listRefused + '.' }),
      el('button', { type: 'button', text: 'Present a token', onclick: () => openTokenDialog() }));
    return;
  }
  const fill = async () => {
    let proxies;
    let hits;
    try {
      [proxies, hits] = await Promise.all([call('GET', 'api/v1/proxies').then((r) => r.data.proxies), mockHits()]);
    } catch (e) {
      if (!signal.aborted) {
        body.replaceChildren(el('p', { class: 'error', text: 'The list could not be fetched: ' + e.message }));
      }
      return;
    }
    if (signal.aborted) {
      return;
    }
    lastFetch = Date.now();
    stamp.replaceChildren('Fetched ', timeEl(lastFetch));
    if (!proxies.length) {
      body.replaceChildren(el('p', { class: 'muted', id: 'empty', text: 'No proxies yet.' }));
      return;
    }
    const rows = proxies.map(({ revision, proxy: p }) => {
      const readRefused = refusal(app.report, 'read', p.name);
      const deleteRefused = refusal(app.report, 'delete', p.name);
      const f = faults(p);
      const href = new URL('proxies/' + encodeURIComponent(p.name), root).pathname;
      return el('tr', { 'data-proxy': p.name },
        el('td', {}, readRefused ? el('span', { title: readRefused, text: p.name }) : el('a', { href, 'data-route': 'proxies/' + encodeURIComponent(p.name), text: p.name })),
        el('td', { class: 'mono', text: p.type === 'tcp' ? 'tcp://' + p.upstream : upstream(p.url) }),
        el('td', { text: resolution(p) }),
        el('td', {}, f.length ? f.map((x) => el('span', { class: 'tag', text: x })) : el('span', { class: 'muted', text: 'none' })),
        el('td', { class: 'num', text: String((p.mocks || []).length) }),
        hitsCell(p, hits),
        el('td', { class: 'row-actions' },
          el('button', { type: 'button', class: 'small', text: readRefused || refusal(app.report, 'update', p.name) ? 'View' : 'Edit', disabled: !!readRefused, title: readRefused || undefined,
            onclick: () => app.navigate('proxies/' + encodeURIComponent(p.name)) }),
          el('button', { type: 'button', class: 'small danger', text: 'Delete', disabled: !!deleteRefused, title: deleteRefused || undefined,
            onclick: async () => { if (await confirmDelete(p.name, revision)) { fill(); } } })));
    });
    body.replaceChildren(el('table', { id: 'proxies' },
      el('thead', {}, el('tr', {}, ['Name', 'Upstream', 'Resolution', 'Faults'].map((h) => el('th', { text: h })), el('th', { class: 'num', text: 'Mocks' }),
        el('th', { class: 'num', text: 'Hits', title: 'Requests its mocks answered since Doppel started (doppel_mock_hits_total)' }), el('th', {}))),
      el('tbody', {}, rows)));
  };
  refreshList = fill;
  await fill();
  if (!signal.aborted) {
    startRefresh();
  }
}

// ---- status

function duration(seconds) {
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return (d ? d + 'd ' : '') + (d || h ? h + 'h ' : '') + (d || h || m ? m + 'm ' : '') + s + 's';
}

// replicasPanel lists the replicas serving the configuration: with the
// PostgreSQL store every one registered, this one marked; a lost one has
// not written its heartbeat for 10 s.
function replicasPanel(fleet) {
  if (fleet.error) {
    return el('div', { class: 'panel' }, el('h2', { text: 'Replicas' }),
      el('p', { class: 'banner error', id: 'status-replicas-error', text: 'The replicas cannot be listed: ' + fleet.error.message }));
  }
  const rs = fleet.data.replicas;
  const live = rs.filter((r) => r.state === 'live').length;
  return el('div', { class: 'panel' },
    el('h2', { text: 'Replicas' }),
    el('p', { class: 'muted', id: 'status-fleet', text: live + ' live' + (rs.length > live ? ', ' + (rs.length - live) + ' lost' : '') +
      (rs.length === 1 && live === 1 ? ': this instance serves alone' : '') }),
    el('table', { id: 'status-replicas' },
      el('thead', {}, el('tr', {}, ['Replica', 'State', 'Admin URL', 'Host', 'PID', 'Version', 'Revision', 'Started', 'Last heartbeat'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rs.map((r) => el('tr', { class: r.state === 'lost' ? 'replica-lost' : '', 'data-replica': r.id },
        el('td', { class: 'mono' }, r.id, r.self ? el('span', { class: 'muted', text: ' (this one)' }) : ''),
        el('td', {}, el('span', { class: 'state state-' + r.state, text: r.state })),
        el('td', { class: 'mono', text: r.url || '—' }),
        el('td', { text: r.host }),
        el('td', { class: 'num', text: String(r.pid) }),
        el('td', { text: r.version }),
        el('td', {}, el('code', { text: r.revision })),
        el('td', {}, timeEl(r.started_at)),
        el('td', {}, timeEl(r.seen_at)))))));
}

async function statusPage(signal) {
  const [st, fleet] = await Promise.all([
    call('GET', 'api/v1/status').then((r) => r.data),
    call('GET', 'api/v1/replicas').catch((error) => ({ error })),
  ]);
  if (signal.aborted) {
    return;
  }
  const reloadRefused = refusal(app.report, 'update');
  const result = el('div', { id: 'reload-result' });
  const reload = el('button', { type: 'button', id: 'reload', class: 'primary', text: 'Reload configuration', disabled: !!reloadRefused,
    title: reloadRefused || 'Load, check and put in force the stored configuration' });
  reload.addEventListener('click', async () => {
    reload.disabled = true;
    try {
      const r = (await call('POST', 'api/v1/config/reload')).data;
      toast('Reloaded: revision ' + r.revision + ', ' + r.proxies + (r.proxies === 1 ? ' proxy' : ' proxies'));
      if (signal.aborted) {
        return;
      }
      await statusPage(signal);
      if (signal.aborted) {
        return;
      }
      if (r.unapplied && r.unapplied.length) {
        document.getElementById('reload-result').replaceChildren(el('div', { class: 'banner' },
          el('strong', { text: 'Changed, but in force only after a restart: ' + r.unapplied.join(', ') })));
      }
    } catch (e) {
      reload.disabled = false;
      result.replaceChildren(el('div', { class: 'banner error' }, el('strong', { text: 'Reload refused; the running configuration is unchanged.' }),
        el('ul', {}, e.message.split('\n').map((l) => el('li', { text: l })))));
    }
  });
  main.replaceChildren(
    el('div', { class: 'head' }, el('h1', { text: 'Status' }), reload),
    result,
    el('div', { class: 'panel' }, el('dl', { class: 'facts' },
      el('dt', { text: 'Uptime' }), el('dd', { id: 'uptime', text: duration(st.uptime_seconds) }),
      el('dt', { text: 'Revision' }), el('dd', {}, el('code', { id: 'status-revision', text: st.revision })),
      el('dt', { text: 'Proxies in force' }), el('dd', { id: 'status-count', text: String(st.proxies.length) }),
      el('dt', { text: 'Fault rolls' }), el('dd', { text: st.seeded ? 'seeded: reproducible' : 'random' }),
      el('dt', { text: 'API' }), el('dd', {}, el('a', { href: new URL('swagger-ui/', root).pathname, text: 'Swagger UI' }), ' · ', el('a', { href: new URL('openapi.json', root).pathname, text: 'OpenAPI document' })))),
    el('div', { class: 'panel' }, st.proxies.length
      ? el('table', { id: 'status-proxies' },
        el('thead', {}, el('tr', {}, ['Name', 'Upstream', 'Resolution'].map((h) => el('th', { text: h })), el('th', { class: 'num', text: 'Mocks' }))),
        el('tbody', {}, st.proxies.map((p) => el('tr', {},
          el('td', { text: p.name }), el('td', { class: 'mono', text: p.upstream }), el('td', { text: p.resolve }), el('td', { class: 'num', text: String(p.mocks) })))))
      : el('p', { class: 'muted', text: 'No proxies in force.' })),
    replicasPanel(fleet));
}

// ---- routing

function currentRoute() {
  const path = location.pathname;
  const base = root.pathname;
  return path.startsWith(base) ? path.slice(base.length).replace(/\/+$/, '') : '';
}

function notHere() {
  main.replaceChildren(el('h1', { text: 'Not here' }), el('p', {}, 'The dashboard has no page at this address. ', el('a', { href: root.pathname, 'data-route': '', text: 'See the proxies.' })));
}

// proxyName is the name in a proxies/<name> address, or '' when the
// address is not one (a malformed escape such as %E0 included).
function proxyName(r) {
  if (!r.startsWith('proxies/') || r.slice(8).includes('/')) {
    return '';
  }
  try {
    return decodeURIComponent(r.slice(8));
  } catch {
    return '';
  }
}

let visit = null;
async function route() {
  if (visit) {
    visit.abort();
  }
  visit = new AbortController();
  const signal = visit.signal;
  app.editing = false;
  stopRefresh();
  const r = currentRoute();
  for (const a of document.querySelectorAll('.bar nav a[data-route]')) {
    a.classList.toggle('current', a.dataset.route === r || (a.dataset.route === '' && (r.startsWith('proxies/') || r === 'new')));
  }
  try {
    if (!app.report) {
      await refreshAccess();
      if (signal.aborted) {
        return;
      }
    }
    if (r === '') {
      await listPage(signal);
    } else if (r === 'status') {
      await statusPage(signal);
    } else if (r === 'requests') {
      await requestsPage(app, signal);
    } else if (r === 'sessions') {
      await sessionsPage(app, signal);
    } else if (r === 'new') {
      await proxyPage(app, null, signal);
    } else if (proxyName(r)) {
      await proxyPage(app, proxyName(r), signal);
    } else {
      notHere();
    }
  } catch (e) {
    if (!signal.aborted) {
      failure(e);
    }
  }
}

// Links inside the dashboard change the page without loading it again.
document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a[data-route]');
  if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) {
    return;
  }
  ev.preventDefault();
  app.navigate(a.dataset.route);
});
window.addEventListener('popstate', () => route());

document.getElementById('theme').addEventListener('click', () => {
  const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
  localStorage.setItem(themeKey, next);
  applyTheme(next);
});

async function start() {
  applyTheme(initialTheme());
  try {
    await refreshAccess();
  } catch (e) {
    failure(e);
    return;
  }
  // Ask for a token when there is none and something is refused without
  // one, unless this tab chose to go on without.
  const g = app.report.global;
  const somethingRefused = Object.values(g).some((x) => !x);
  if (!token() && somethingRefused && !sessionStorage.getItem(anonymousKey)) {
    openTokenDialog();
  }
  await route();
}

start();
