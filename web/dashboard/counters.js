// The counters of a proxy's fault conditions: how many requests each
// fault's `when` admitted, per mock and key, as
// GET /api/v1/proxies/<name>/counters lists them; Reset counters is
// DELETE on the same address. The proxy page shows them after the fault
// cards, outside the form: a read-only caller sees and refreshes them.
import { call, refusal } from './api.js';
import { el } from './form.js';
import { timeEl } from './time.js';

// perHeader is the header a fault counts per in the stored document
// (mock null for the proxy's own fault), or '' when it counts per client
// or for the whole proxy.
function perHeader(doc, mock, fault) {
  let block = doc;
  if (mock !== null) {
    const m = ((doc && doc.mocks) || []).find((x) => x && x.name === mock);
    block = m && m.proxy;
  }
  const f = block && block[fault];
  const per = f && f.when && f.when.per;
  return (per && typeof per.header === 'string') ? per.header : '';
}

// keyCell is a counter's key; "" is the whole proxy, or, for a fault that
// counts per header, the requests that did not send it.
function keyCell(doc, c) {
  if (c.key !== '') {
    return el('td', { class: 'mono key', text: c.key });
  }
  const header = perHeader(doc, c.mock, c.fault);
  return el('td', { class: 'muted key', text: header ? '(no ' + header + ' header)' : '(whole proxy)' });
}

// countersSection is the section for the proxy called name. stored()
// is the document in force (what the counters were kept for). It
// fetches nothing until refresh() is called; once signal is aborted it
// draws nothing.
export function countersSection(app, name, stored, signal) {
  const path = 'api/v1/proxies/' + encodeURIComponent(name) + '/counters';
  const resetRefused = refusal(app.report, 'update', name);
  const stamp = el('span', { class: 'muted', id: 'counters-fetched' });
  const refreshButton = el('button', { type: 'button', id: 'counters-refresh', text: 'Refresh', title: 'Fetch the counters again' });
  const resetButton = el('button', { type: 'button', id: 'counters-reset', class: 'danger', text: 'Reset counters', disabled: !!resetRefused,
    title: resetRefused || 'Start every count of this proxy again from 0 (DELETE /api/v1/proxies/' + name + '/counters)' });
  const note = el('p', { class: 'hint muted', id: 'counters-readonly', hidden: !resetRefused, text: resetRefused ? 'Reset counters: ' + resetRefused + '.' : '' });
  const error = el('div', { class: 'banner error', id: 'counters-error', role: 'alert', hidden: true });
  const tbody = el('tbody', { id: 'counters-body' });
  const table = el('table', { id: 'counters-table', class: 'counters', hidden: true },
    el('thead', {}, el('tr', {},
      el('th', { text: 'Fault' }), el('th', { text: 'Mock' }), el('th', { text: 'Key' }),
      el('th', { class: 'num', text: 'Count' }), el('th', { text: 'First seen' }))),
    tbody);
  const empty = el('p', { class: 'muted', id: 'counters-empty', hidden: true }, 'No counters yet: a fault with ', el('code', { text: 'when.count' }),
    ' or ', el('code', { text: 'when.window' }), ' counts the requests it admits.');
  const section = el('section', { class: 'panel section', id: 'counters', 'aria-labelledby': 'counters-title', 'aria-busy': 'true' },
    el('div', { class: 'section-head' }, el('h2', { id: 'counters-title', text: 'Counters' }), stamp, refreshButton, resetButton),
    el('p', { class: 'hint muted' }, 'A counter is how many requests a fault\'s ', el('code', { text: 'when' }),
      ' admitted for one key: a header\'s value, a client\'s IP, or the whole proxy. ', el('code', { text: 'when.count' }), ' and ',
      el('code', { text: 'when.window' }), ' decide from it. Counters restart when this proxy changes (a save here, or a reload that changes it).'),
    note, error, table, empty);

  const showError = (text) => {
    error.replaceChildren(el('strong', { text }));
    error.hidden = false;
  };
  const draw = (counters) => {
    const doc = stored();
    tbody.replaceChildren(...counters.map((c) => el('tr', { 'data-fault': c.fault, 'data-mock': c.mock === null ? '' : c.mock, 'data-key': c.key },
      el('td', { text: c.fault }),
      c.mock === null ? el('td', { class: 'muted', text: 'proxy' }) : el('td', { text: c.mock }),
      keyCell(doc, c),
      el('td', { class: 'num', text: String(c.count) }),
      el('td', { class: 'nowrap' }, timeEl(c.first_seen)))));
    table.hidden = !counters.length;
    empty.hidden = !!counters.length;
  };

  // refresh fetches the counters and draws them; it says true when it did.
  let asked = 0;
  const refresh = async () => {
    const mine = ++asked;
    section.setAttribute('aria-busy', 'true');
    refreshButton.disabled = true;
    let counters;
    try {
      counters = (await call('GET', path)).data.counters || [];
    } catch (e) {
      if (!signal.aborted && mine === asked) {
        showError('The counters could not be fetched: ' + e.message);
        section.setAttribute('aria-busy', 'false');
        refreshButton.disabled = false;
      }
      return false;
    }
    if (signal.aborted || mine !== asked) {
      return false;
    }
    error.hidden = true;
    draw(counters);
    stamp.replaceChildren('Fetched ', timeEl(new Date()));
    section.setAttribute('aria-busy', 'false');
    refreshButton.disabled = false;
    return true;
  };

  refreshButton.addEventListener('click', () => refresh());
  resetButton.addEventListener('click', async () => {
    resetButton.disabled = true;
    try {
      await call('DELETE', path);
    } catch (e) {
      if (!signal.aborted) {
        showError('Not reset: ' + e.message);
        resetButton.disabled = !!resetRefused;
      }
      return;
    }
    if (signal.aborted) {
      return;
    }
    resetButton.disabled = !!resetRefused;
    app.toast('Reset the counters of proxy ' + name);
    await refresh();
  });

  return { el: section, refresh };
}
