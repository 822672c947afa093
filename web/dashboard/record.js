// Record from traffic: the proxy page's button and dialog for
// POST /api/v1/proxies/<name>/record. Preview (apply false) lists the
// mocks the journal's forwarded exchanges of the proxy would make; Add
// (apply true, with the revision the page loaded) appends them, and the
// page loads the proxy again. Adding needs update on the proxy: a caller
// without it is not offered the button, as the requests page hides Clear.
import { call, refusal } from './api.js';
import { el } from './form.js';

const plural = (n, one, many) => n + ' ' + (n === 1 ? one : many);

// sentence is the API's message as the dialog shows it: capitalised.
const sentence = (s) => s.charAt(0).toUpperCase() + s.slice(1);

function statusClass(status) {
  return 'status s' + Math.floor(status / 100) + 'xx';
}

// latencyCell is a recorded mock's latency, the span the upstream took,
// in seconds as recorded (to the tenth of a millisecond).
function latencyCell(m) {
  const l = m.proxy.latency;
  const secs = (x) => String(x);
  return el('td', { class: 'num nowrap', text: (l.min === l.max ? secs(l.min) : secs(l.min) + '–' + secs(l.max)) + ' s' });
}

function mockRow(m) {
  const req = m.request || {};
  const status = (m.response && m.response.status) || 0;
  return el('tr', { 'data-mock': m.name },
    el('td', { class: 'mono name', text: m.name }),
    el('td', { text: req.method || 'any' }),
    el('td', { class: 'mono path', text: req.url || '' }),
    el('td', { class: 'num' }, el('span', { class: statusClass(status), text: String(status) })),
    latencyCell(m));
}

// recordAction is the button and its dialog for the proxy called name,
// or null for a caller who may not update it. opts: revision() (the one
// the page loaded), stored() (the document in force), unsaved() (the
// page holds an edit that reloading would discard), signal (aborted when
// the address changes: from then on nothing is drawn).
export function recordAction(app, name, opts) {
  if (refusal(app.report, 'update', name)) {
    return null;
  }
  const path = 'api/v1/proxies/' + encodeURIComponent(name) + '/record';
  const button = el('button', { type: 'button', id: 'record', text: 'Record from traffic',
    title: 'Turn the journal\'s forwarded exchanges of this proxy into mocks' });
  const match = el('input', { type: 'text', id: 'record-match', placeholder: '^/orders', spellcheck: 'false', autocomplete: 'off',
    'aria-describedby': 'record-match-hint' });
  const previewButton = el('button', { type: 'submit', id: 'record-preview', text: 'Preview' });
  const applyButton = el('button', { type: 'button', id: 'record-apply', class: 'primary', hidden: true });
  const closeButton = el('button', { type: 'button', id: 'record-close', text: 'Close' });
  const error = el('div', { class: 'banner error', id: 'record-error', role: 'alert', hidden: true });
  const summary = el('p', { id: 'record-summary' });
  const message = el('p', { id: 'record-message', hidden: true });
  const tbody = el('tbody', { id: 'record-body' });
  const list = el('div', { class: 'record-list', hidden: true },
    el('table', { id: 'record-mocks', class: 'record-mocks' },
      el('thead', {}, el('tr', {},
        el('th', { text: 'Name' }), el('th', { text: 'Method' }), el('th', { text: 'Path regex' }),
        el('th', { class: 'num', text: 'Status' }), el('th', { class: 'num', text: 'Latency' }))),
      tbody));
  const result = el('div', { id: 'record-result', 'aria-live': 'polite', hidden: true }, summary, list, message);
  const unsaved = el('p', { class: 'banner', id: 'record-unsaved', hidden: true,
    text: 'This page has edits not saved: adding the mocks loads the proxy again and discards them. Save first to keep them.' });
  const form = el('form', { id: 'record-form' },
    el('h2', { id: 'record-title', text: 'Record mocks from traffic' }),
    el('p', { class: 'hint muted' }, 'Turns what the request journal kept of this proxy\'s forwarded exchanges into mocks: one per method and path, with its latest answer ' +
      'and the latency the upstream took. Nothing changes until you add them. See ', el('code', { text: 'docs/record.md' }), '.'),
    el('label', { for: 'record-match', text: 'Path regex' }),
    el('div', { class: 'record-query' }, match, previewButton),
    el('p', { class: 'hint muted', id: 'record-match-hint', text: 'Optional: only the exchanges whose path matches, such as ^/orders; empty for all of them.' }),
    error, result, unsaved,
    el('div', { class: 'actions' }, closeButton, applyButton));
  const dialog = el('dialog', { id: 'record-dialog', class: 'record', 'aria-labelledby': 'record-title' }, form);

  // previewed is what the last preview was asked with and found; an
  // edit of the regex since makes it stale, and Add goes away. A preview
  // answered after a newer one was asked, or after the dialog closed, is
  // not drawn. While an add is under way the dialog stays open: its
  // answer decides whether the page loads again.
  let previewed = null;
  let asked = 0;
  let adding = false;
  const busy = (on) => {
    dialog.setAttribute('aria-busy', String(on));
    previewButton.disabled = on;
    applyButton.disabled = on;
    closeButton.disabled = on && adding;
  };
  const showError = (text, actions = [], kind = 'error') => {
    error.className = 'banner' + (kind === 'error' ? ' error' : '');
    error.replaceChildren(el('strong', { text }));
    if (actions.length) {
      error.append(el('div', { class: 'actions' }, actions));
    }
    error.hidden = false;
  };
  const clear = () => {
    previewed = null;
    error.hidden = true;
    result.hidden = true;
    applyButton.hidden = true;
    unsaved.hidden = true;
  };
  const draw = (data) => {
    const mocks = data.mocks || [];
    const own = ((opts.stored() || {}).mocks || []).length;
    tbody.replaceChildren(...mocks.map(mockRow));
    list.hidden = !mocks.length;
    summary.hidden = !mocks.length;
    summary.textContent = plural(mocks.length, 'mock', 'mocks') + ' from ' + plural(data.exchanges || 0, 'forwarded exchange', 'forwarded exchanges') +
      (own ? ', added after this proxy\'s ' + plural(own, 'mock', 'mocks') + ' (the first that matches answers):' : ':');
    message.textContent = data.message ? sentence(data.message) : '';
    message.hidden = !data.message;
    result.hidden = false;
    applyButton.textContent = mocks.length === 1 ? 'Add this mock' : 'Add these ' + mocks.length + ' mocks';
    applyButton.hidden = !mocks.length;
    unsaved.hidden = !mocks.length || !opts.unsaved();
  };

  const preview = async () => {
    const mine = ++asked;
    const sent = match.value;
    clear();
    busy(true);
    let data;
    try {
      data = (await call('POST', path, { body: sent ? { match: sent, apply: false } : { apply: false } })).data;
    } catch (e) {
      if (!opts.signal.aborted && mine === asked) {
        showError('Not previewed: ' + e.message);
        busy(false);
      }
      return;
    }
    if (opts.signal.aborted || mine !== asked) {
      return;
    }
    busy(false);
    previewed = { match: sent };
    draw(data);
  };

  const apply = async () => {
    if (!previewed) {
      return;
    }
    const before = ((opts.stored() || {}).mocks || []).length;
    const body = { apply: true, revision: opts.revision() };
    if (previewed.match) {
      body.match = previewed.match;
    }
    error.hidden = true;
    adding = true;
    busy(true);
    let data;
    try {
      data = (await call('POST', path, { body })).data;
    } catch (e) {
      adding = false;
      if (opts.signal.aborted) {
        app.toast('Not added: ' + e.message, true);
        return;
      }
      busy(false);
      if (e.code === 'REVISION_MISMATCH') {
        showError('Not added: proxy ' + name + ' changed since you loaded it; reload to see the current version, then record again.', [
          el('button', { type: 'button', id: 'record-reload', text: 'Reload the proxy', onclick: () => { dialog.close(); app.route(); } }),
        ], 'warn');
      } else {
        showError('Not added: ' + e.message);
      }
      return;
    }
    adding = false;
    busy(false);
    if (!data || !data.proxy) {
      // Nothing matched any more: the answer is a preview's.
      previewed = null;
      draw(data || {});
      return;
    }
    const added = ((data.proxy.mocks || []).length) - before;
    app.toast('Added ' + plural(added, 'recorded mock', 'recorded mocks') + ' to proxy ' + name);
    if (opts.signal.aborted) {
      return; // the page went elsewhere meanwhile: the toast is all there is
    }
    dialog.close();
    await app.refreshAccess();
    if (opts.signal.aborted) {
      return;
    }
    const here = location.pathname;
    await app.route();
    // The page drawn again: its mocks, the new ones last, in view.
    const mocks = document.getElementById('mocks');
    if (location.pathname === here && mocks) {
      mocks.scrollIntoView({ block: 'start' });
    }
  };

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    preview();
  });
  match.addEventListener('input', () => {
    if (previewed && match.value !== previewed.match) {
      clear();
    }
  });
  applyButton.addEventListener('click', () => apply());
  closeButton.addEventListener('click', () => dialog.close());
  dialog.addEventListener('cancel', (ev) => {
    if (adding) {
      ev.preventDefault();
    }
  });
  dialog.addEventListener('close', () => { asked++; busy(false); });
  button.addEventListener('click', () => {
    clear();
    dialog.showModal();
    match.focus();
  });

  return { button, dialog };
}
