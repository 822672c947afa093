// The requests page: the journal's newest entries, then new ones as the
// proxy listener records them (GET /api/v1/requests/stream).
import { call, events, refusal } from './api.js';
import { el } from './form.js';
import { timeEl } from './time.js';

// At most this many entries are kept, and drawn, by the page: the oldest
// go first. The journal itself keeps journal.size.
export const keep = 500;

// faultsOf names what fired for an entry, from its fault object;
// doppel requests list and tail name them the same (faultNames in
// cmd/doppel/requests.go).
export function faultsOf(f) {
  const out = [];
  if (!f) {
    return out;
  }
  if (f.replace) {
    out.push('mock');
  }
  if (f.loss) {
    out.push('loss');
  }
  if (f.latency_ms > 0) {
    out.push('latency ' + ms(f.latency_ms));
  }
  if (f.abort) {
    out.push('abort ' + f.abort);
  }
  if (f.hang) {
    out.push('hang');
  }
  if (f.bandwidth) {
    out.push('bandwidth');
  }
  return out;
}

// tunnelText says what an upgraded connection (a WebSocket) relayed.
export function tunnelText(t) {
  const bytes = (n) => n.toLocaleString('en-US') + (n === 1 ? ' byte' : ' bytes');
  const open = t.duration_ms < 1000 ? ms(t.duration_ms) : (Math.round(t.duration_ms / 100) / 10) + ' s';
  return 'Tunnel: ' + bytes(t.bytes_up) + ' from the client, ' + bytes(t.bytes_down) + ' from the upstream, open ' + open + '.';
}

function ms(x) {
  if (x === null || x === undefined) {
    return '—';
  }
  return (x < 10 ? Math.round(x * 100) / 100 : Math.round(x)) + ' ms';
}

// statusMatches reads the status filter: '' for all, '5xx' for a class,
// '503' for one status.
function statusMatches(filter, status) {
  const f = filter.trim().toLowerCase();
  if (!f) {
    return true;
  }
  if (/^[1-5]xx$/.test(f)) {
    return Math.floor(status / 100) === Number(f[0]);
  }
  return String(status) === f;
}

function statusClass(status) {
  return 'status s' + Math.floor(status / 100) + 'xx';
}

// statusTag is an entry's status; a tcp connection has none (null).
function statusTag(status) {
  if (status === null || status === undefined) {
    return el('span', { class: 'muted', text: '—', title: 'A TCP connection has no HTTP status' });
  }
  return el('span', { class: statusClass(status), text: String(status) });
}

// bodyText is a kept body as text: a binary one is shown as its base64.
function bodyText(body, truncated) {
  let text;
  if (body && typeof body === 'object') {
    text = '(binary, base64) ' + body.base64;
  } else {
    text = body || '';
  }
  if (!text) {
    return '(empty)';
  }
  return truncated ? text + '\n… (cut at journal.bodies)' : text;
}

function headerList(headers) {
  const names = Object.keys(headers || {}).sort();
  if (!names.length) {
    return el('p', { class: 'muted', text: 'none' });
  }
  return el('dl', { class: 'headers' }, names.flatMap((n) => headers[n].flatMap((v) => [
    el('dt', { text: n }), el('dd', { class: v === '***' ? 'mono masked' : 'mono', text: v, title: v === '***' ? 'Masked by the journal (journal.reveal)' : undefined }),
  ])));
}

// requestsPage draws the page and follows the stream until signal is
// aborted (the address changed).
export async function requestsPage(app, signal) {
  const report = app.report;
  const entries = []; // oldest first, at most keep
  const seen = new Set();
  let pending = 0; // entries that arrived while paused
  let paused = false;
  let selected = null;

  const proxyFilter = el('select', { id: 'filter-proxy', 'aria-label': 'Proxy' }, el('option', { value: '', text: 'All proxies' }));
  const statusFilter = el('input', { type: 'text', id: 'filter-status', placeholder: '2xx, 4xx, 503…', 'aria-label': 'Status', spellcheck: 'false', autocomplete: 'off' });
  const pauseButton = el('button', { type: 'button', id: 'pause', text: 'Pause', title: 'Stop drawing new requests; they are counted' });
  const pendingNote = el('span', { id: 'pending', class: 'muted', hidden: true });
  const state = el('span', { id: 'stream-state', class: 'muted', text: 'Connecting…' });
  const updateRefused = mayClear(report) ? '' : refusal(report, 'update');
  const clearButton = el('button', { type: 'button', id: 'clear', class: 'danger', text: 'Clear', hidden: !!updateRefused,
    title: 'Forget the journal\'s entries (DELETE /api/v1/requests)' });
  const dropped = el('div', { id: 'dropped', class: 'banner', hidden: true });
  // With a fleet (the PostgreSQL store), the list is every live replica's
  // journal: a column says which replica served each request, and a note
  // which replicas answered and which are missing.
  const fleetNote = el('div', { id: 'fleet-note', class: 'banner', hidden: true });
  let fleet = false;
  const replicaHead = el('th', { text: 'Replica', hidden: true });
  const detail = el('div', { id: 'request-detail', class: 'panel', hidden: true });
  const tbody = el('tbody', { id: 'requests-body' });
  const empty = el('p', { class: 'muted', id: 'requests-empty', text: 'No requests yet. Send some to the proxy listener: they appear here as they happen.' });
  const table = el('table', { id: 'requests', class: 'requests' },
    el('thead', {}, el('tr', {},
      el('th', { text: 'Time' }), el('th', { text: 'Method' }), el('th', { text: 'Path' }), el('th', { text: 'Proxy' }), el('th', { text: 'Mock' }),
      el('th', { class: 'num', text: 'Status' }), el('th', { class: 'faults', text: 'Faults' }), el('th', { class: 'num', text: 'Duration' }), el('th', { class: 'num', text: 'Upstream' }), replicaHead)),
    tbody);

  app.main.replaceChildren(
    el('div', { class: 'head' }, el('h1', { text: 'Requests' }), state, clearButton),
    el('div', { class: 'toolbar' },
      el('label', {}, 'Proxy ', proxyFilter), el('label', {}, 'Status ', statusFilter), pauseButton, pendingNote),
    fleetNote, dropped, detail,
    el('div', { class: 'panel scroll' }, table, empty));

  const proxyNames = new Set();
  const addProxyName = (name) => {
    const n = name || '';
    if (proxyNames.has(n)) {
      return;
    }
    proxyNames.add(n);
    proxyFilter.append(el('option', { value: n === '' ? '\u0000' : n, text: n === '' ? '(unresolved)' : n }));
  };
  for (const n of Object.keys((report && report.proxies) || {}).sort()) {
    addProxyName(n);
  }

  const shown = (e) => {
    const p = proxyFilter.value;
    return (p === '' || (p === '\u0000' ? !e.proxy : e.proxy === p)) && statusMatches(statusFilter.value, e.status);
  };

  const rowOf = (e) => {
    const f = faultsOf(e.fault);
    const tr = el('tr', { class: 'entry-row' + (e === selected ? ' selected' : ''), tabindex: '0', 'data-id': e.id, title: 'Show the headers and bodies' },
      el('td', { class: 'mono nowrap' }, timeEl(e.time, { ms: true })),
      el('td', { class: 'mono', text: e.method }),
      el('td', { class: 'mono path', text: e.path + (e.query ? '?' + e.query : '') }),
      el('td', { text: e.proxy || '—' }),
      el('td', { text: e.mock || '—' }),
      el('td', { class: 'num' }, statusTag(e.status)),
      el('td', { class: 'faults' }, f.length || e.tunnel
        ? [...(e.tunnel ? [el('span', { class: 'tag', text: 'tunnel', title: tunnelText(e.tunnel) })] : []),
          ...f.map((x) => el('span', { class: x === 'mock' ? 'tag' : 'tag fault', text: x }))]
        : el('span', { class: 'muted', text: 'none' })),
      el('td', { class: 'num nowrap', text: ms(e.duration_ms) }),
      el('td', { class: 'num nowrap', text: ms(e.upstream_ms) }));
    if (fleet) {
      tr.append(el('td', { class: 'mono replica', text: e.replica ? e.replica.slice(0, 8) : '—', title: e.replica || 'this replica (live)' }));
    }
    const open = () => showDetail(e, tr);
    tr.addEventListener('click', open);
    tr.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') {
        ev.preventDefault();
        open();
      }
    });
    return tr;
  };

  // draw rebuilds the table from the kept entries, newest on top.
  const draw = () => {
    const rows = [];
    for (let i = entries.length - 1; i >= 0 && rows.length < keep; i--) {
      if (shown(entries[i])) {
        rows.push(rowOf(entries[i]));
      }
    }
    tbody.replaceChildren(...rows);
    empty.hidden = rows.length > 0;
    empty.textContent = entries.length ? 'No request matches the filters.' : 'No requests yet. Send some to the proxy listener: they appear here as they happen.';
  };

  // drawOne puts a new entry on top, keeping at most keep rows.
  const drawOne = (e) => {
    if (!shown(e)) {
      return;
    }
    tbody.prepend(rowOf(e));
    while (tbody.childElementCount > keep) {
      tbody.lastElementChild.remove();
    }
    empty.hidden = true;
  };

  const remember = (e) => {
    const key = e.id + ' ' + e.time;
    if (seen.has(key)) {
      return false;
    }
    seen.add(key);
    entries.push(e);
    while (entries.length > keep) {
      const old = entries.shift();
      seen.delete(old.id + ' ' + old.time);
    }
    addProxyName(e.proxy);
    return true;
  };

  const showPending = () => {
    pendingNote.hidden = !paused;
    pendingNote.textContent = pending === 1 ? '1 new request not shown' : pending + ' new requests not shown';
  };

  const arrived = (e) => {
    if (!remember(e)) {
      return;
    }
    if (paused) {
      pending++;
      showPending();
      return;
    }
    drawOne(e);
  };

  function showDetail(e, tr) {
    selected = e;
    for (const r of tbody.querySelectorAll('tr.selected')) {
      r.classList.remove('selected');
    }
    tr.classList.add('selected');
    const close = el('button', { type: 'button', class: 'small', id: 'detail-close', text: 'Close', onclick: () => {
      selected = null;
      detail.hidden = true;
      tr.classList.remove('selected');
    } });
    detail.replaceChildren(
      el('div', { class: 'head' },
        el('h2', {}, el('span', { class: 'mono', text: e.method + ' ' + e.path + (e.query ? '?' + e.query : '') }), ' ',
          statusTag(e.status)), close),
      el('p', { class: 'muted' }, 'Request ' + e.id + ' at ', timeEl(e.time, { ms: true }), ' from ' + (e.client || 'unknown') + (e.session ? ', session ' + e.session : '')),
      e.tunnel ? el('p', { id: 'detail-tunnel', text: tunnelText(e.tunnel) }) : '',
      el('div', { class: 'exchange' },
        el('section', { id: 'detail-request' }, el('h3', { text: 'Request headers' }), headerList(e.headers),
          el('h3', { text: 'Request body' }), el('pre', { class: 'body', text: bodyText(e.body, e.body_truncated) })),
        el('section', { id: 'detail-response' }, el('h3', { text: 'Response headers' }), headerList(e.response_headers),
          el('h3', { text: 'Response body' }), el('pre', { class: 'body', text: bodyText(e.response_body, e.response_body_truncated) }))));
    detail.hidden = false;
  }

  proxyFilter.addEventListener('change', draw);
  statusFilter.addEventListener('input', draw);
  pauseButton.addEventListener('click', () => {
    paused = !paused;
    pauseButton.textContent = paused ? 'Resume' : 'Pause';
    pauseButton.classList.toggle('primary', paused);
    pauseButton.title = paused ? 'Draw the requests that came meanwhile, and follow again' : 'Stop drawing new requests; they are counted';
    if (!paused && pending) {
      pending = 0;
      draw();
    }
    pending = 0;
    showPending();
  });
  clearButton.addEventListener('click', async () => {
    try {
      await call('DELETE', 'api/v1/requests');
    } catch (e) {
      app.toast('Not cleared: ' + e.message, true);
      return;
    }
    entries.length = 0;
    seen.clear();
    pending = 0;
    showPending();
    detail.hidden = true;
    selected = null;
    draw();
    app.toast('Cleared the journal');
  });

  // The stream is opened before the list is asked for, so that nothing
  // recorded between the two is missed: its events are read only once the
  // list is drawn, and what both carry is drawn once. After a reconnection
  // the list is asked for again, for what was recorded while the stream
  // was down.
  let listed = false;
  const load = async () => {
    const list = (await call('GET', 'api/v1/requests?limit=200')).data;
    if (signal.aborted) {
      return;
    }
    sayFleet(list.replicas, 'The journals of ');
    if (!listed) {
      for (const e of list.requests) {
        remember(e);
      }
      listed = true;
      draw();
    } else {
      for (const e of list.requests) {
        arrived(e);
      }
    }
  };
  // sayFleet shows which replicas' journals the page holds (what the
  // list says) and follows (what the stream says as replicas come and go).
  const sayFleet = (r, lead) => {
    r = r || { answered: [], missing: [] };
    const wasFleet = fleet;
    fleet = fleet || r.answered.length > 1 || r.missing.length > 0;
    replicaHead.hidden = !fleet;
    fleetNote.hidden = !fleet;
    if (fleet) {
      fleetNote.replaceChildren(
        el('strong', { text: lead + r.answered.length + (r.answered.length === 1 ? ' replica' : ' replicas') + '.' }),
        ' New requests of each come live.',
        r.missing.length ? el('ul', {}, r.missing.map((m) => el('li', { class: 'missing-replica', text: 'Missing: ' + m.id + ' (' + m.state + '): ' + m.error }))) : '');
    }
    if (fleet && !wasFleet && listed) {
      draw();
    }
  };
  const onEvent = (name, data) => {
    if (signal.aborted) {
      return;
    }
    if (name === 'replicas') {
      sayFleet(JSON.parse(data), 'Following the journals of ');
      return;
    }
    if (name === 'dropped') {
      const n = JSON.parse(data).dropped;
      dropped.textContent = 'This page fell behind: ' + n + (n === 1 ? ' request was' : ' requests were') + ' not sent to it. They are still in the journal.';
      dropped.hidden = false;
    } else if (name === 'request') {
      arrived(JSON.parse(data));
    }
  };
  const setState = (text, isLive) => {
    state.textContent = text;
    state.classList.toggle('live', isLive);
  };
  for (let first = true; !signal.aborted; first = false) {
    try {
      await events('api/v1/requests/stream', signal, onEvent, async () => {
        await load();
        if (!signal.aborted) {
          setState('Live', true);
        }
      });
      if (!signal.aborted) {
        setState('The stream ended; reconnecting…', false);
      }
    } catch (e) {
      if (signal.aborted) {
        return;
      }
      if (first || e.status === 401 || e.status === 403) {
        setState('', false);
        app.main.querySelector('.panel.scroll').replaceChildren(el('p', { class: 'error', id: 'requests-refused', text: 'The requests could not be fetched: ' + e.message }));
        return;
      }
      setState('Not following: ' + e.message + '; trying again…', false);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// mayClear is whether DELETE /api/v1/requests would clear anything: the
// caller may update some proxy, or update without one.
function mayClear(report) {
  if (!report) {
    return false;
  }
  if (report.global && report.global.update) {
    return true;
  }
  return Object.values(report.proxies || {}).some((p) => p.update);
}

