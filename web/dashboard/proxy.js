// The proxy page: the whole proxy document as a form or as YAML, saved
// with the revision it was loaded at. The form leads with what a tester
// changes: a card per fault, then the mocks; the rest of the document is
// folded under Advanced. Between the cards and the mocks, an existing
// proxy shows its counters (counters.js), outside the form; Record from
// traffic (record.js) adds mocks made from the journal.
import { call, refusal } from './api.js';
import { countersSection } from './counters.js';
import { FAULTS, faultCard, mockFaults, shareField } from './faults.js';
import { SchemaForm, el } from './form.js';
import { JSON_SCHEMA, dump as toYAML, load } from './js-yaml.js';
import { recordAction } from './record.js';
import { sessionsNote } from './sessions.js';

// The YAML mode reads with the JSON schema: the API speaks JSON, so
// 2024-01-01 stays text instead of becoming a date, and nothing but
// text, numbers, booleans, null, mappings and lists comes out.
const fromYAML = (text) => load(text, { schema: JSON_SCHEMA });

// violationOf splits one line of a CONFIG_INVALID message,
// "mocks[1].name: duplicate mock name ... (line 3)", into its path and
// its text; a line with no path keeps it all as text. The line number
// counts lines of the JSON the page sent, so beside a field it is noise.
function violationOf(line) {
  const i = line.indexOf(': ');
  const path = i > 0 && !/\s/.test(line.slice(0, i)) ? line.slice(0, i) : '';
  return { line, path, text: path ? line.slice(i + 2).replace(/ \(line [0-9]+\)$/, '') : line };
}

// What a new proxy's page shows first, before the faults: it cannot be
// created without them. An existing proxy keeps them under Advanced.
const identity = ['name', 'type', 'url'];
// The mocks' section: the share of matches a mock answers, and the mocks.
const mocking = ['replace', 'mocks'];

// reveal opens every fold around e, so that it can be seen and focused.
function reveal(e) {
  for (let d = e.closest('details'); d; d = d.parentElement.closest('details')) {
    d.open = true;
  }
}

// canonical is a value as JSON with every object's keys sorted: two
// documents that say the same thing compare equal, whatever their order.
function canonical(v) {
  return JSON.stringify(v, (_, x) => (x && typeof x === 'object' && !Array.isArray(x)
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]]))
    : x));
}

// withoutCredentials is an upstream address as the page shows it.
function withoutCredentials(url) {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return String(url || '');
  }
}

// proxyForm is the proxy document as sections: the fault cards, the
// mocks, and Advanced (a fold, open when opts.advanced). opts.between
// (the counters) goes after the cards, outside the fields, which are
// disabled when opts.readOnly. It has the contract of a SchemaForm field
// over the whole document; get() puts the keys in the order the generic
// form did, so the YAML reads the same.
function proxyForm(forms, doc, opts) {
  const s = forms.resolve({ $ref: '#/$defs/ProxyConfig' });
  const props = s.properties;
  const required = s.required || [];
  const order = forms.order(s);
  const fields = new Map();
  const build = (name) => {
    const f = name === 'replace'
      ? shareField(forms, props[name], doc[name], name, name, 'of matching requests', '1')
      : forms.build(props[name], doc[name], name, required.includes(name), name);
    fields.set(name, f);
    return f.el;
  };
  const cards = FAULTS.filter((k) => props[k]).map((k) => {
    const c = faultCard(forms, k, props[k], doc[k], k);
    fields.set(k, c);
    return c.el;
  });
  const first = opts.creating ? identity.filter((k) => props[k]) : [];
  const mocks = mocking.filter((k) => props[k]);
  const rest = order.filter((k) => !first.includes(k) && !FAULTS.includes(k) && !mocks.includes(k));
  const section = (id, title, ...children) => el('section', { class: 'panel section', id, 'aria-labelledby': id + '-title' },
    el('h2', { id: id + '-title', text: title }), ...children);
  const mockEls = mocks.map(build);
  for (const e of mockEls) {
    e.classList.add('bare');
  }
  const advanced = el('details', { class: 'panel section advanced', id: 'advanced', open: !!opts.advanced },
    el('summary', {}, el('span', { class: 'summary-title', text: 'Advanced' }), el('span', { class: 'muted', text: rest.join(', ') })),
    el('div', { class: 'advanced-body' }, rest.map(build)));
  advanced.addEventListener('toggle', () => opts.onToggle(advanced.open));
  const editable = (...children) => el('fieldset', { class: 'plain', disabled: !!opts.readOnly }, ...children);
  const root = el('div', { class: 'proxy-form' },
    editable(
      first.length ? section('identity', 'Proxy', first.map(build)) : null,
      section('faults', 'Faults',
        el('p', { class: 'hint muted', text: 'Each request rolls the faults that are on, in this order. Loss, an abort at request and a hang stand in for the answer and stop the rest. ' +
          'A request a mock answers meets the mock\'s own faults instead; a mock\'s latency replaces this one.' }),
        el('div', { class: 'faults' }, cards))),
    opts.between || null,
    editable(
      section('mocks', 'Mocks', mockEls),
      advanced));
  const get = () => {
    const out = {};
    for (const k of order) {
      const v = fields.has(k) ? fields.get(k).get() : undefined;
      if (v !== undefined) {
        out[k] = v;
      }
    }
    return out;
  };
  const check = () => [...fields.values()].reduce((n, f) => n + f.check(), 0);
  const mark = (path, message) => {
    const m = /^([^.[]+)\.?(.*)$/.exec(path);
    const f = m && fields.get(m[1]);
    return f ? f.mark(path.slice(m[1].length).replace(/^\./, ''), message) : null;
  };
  return { el: root, get, check, mark };
}

// A new proxy starts from the defaults the server would fill in.
const blank = {
  name: '', type: 'http', url: '', resolve: { type: 'default' }, timeout: 30, replace: 1,
  rewrite_urls: true, rewrite_redirects: true, mocks: [],
};

// proxyPage shows the proxy called name, or a new one when name is null.
// signal is aborted when the address changes: from then on the page draws
// nothing and goes nowhere.
export async function proxyPage(app, name, signal) {
  const creating = name === null;
  const [schema, loaded] = await Promise.all([
    app.schema(),
    creating ? null : call('GET', 'api/v1/proxies/' + encodeURIComponent(name)),
  ]);
  if (signal.aborted) {
    return;
  }
  let current = name;
  let revision = creating ? '' : loaded.data.revision;
  let doc = creating ? structuredClone(blank) : loaded.data.proxy;
  let inForce = doc; // the document as stored: what the counters count for
  const forms = new SchemaForm(schema, { MockProxyOverride: mockFaults });
  let field = null;
  let yamlMode = false;
  let advancedOpen = false; // kept while the form is drawn again

  const saveRefused = refusal(app.report, creating ? 'create' : 'update', current);
  const deleteRefused = creating ? 'Not created yet' : refusal(app.report, 'delete', current);
  app.editing = !saveRefused;

  const title = el('h1', { text: creating ? 'New proxy' : 'Proxy ' + current });
  const modeButton = el('button', { type: 'button', id: 'mode', text: 'Edit as YAML' });
  const deleteButton = el('button', { type: 'button', id: 'delete', class: 'danger', text: 'Delete', disabled: !!deleteRefused, title: deleteRefused || 'Delete this proxy and its template files' });
  const saveButton = el('button', { type: 'button', id: 'save', class: 'primary', text: creating ? 'Create' : 'Save', disabled: !!saveRefused, title: saveRefused || undefined });
  const banner = el('div', { id: 'banner', hidden: true });
  const revisionLine = el('p', { class: 'muted', id: 'revision' });
  const upstreamLine = el('p', { class: 'muted', id: 'upstream' });
  // The fields are disabled for a caller who may not save; the counters
  // between them are not, so the holder itself is never disabled.
  const holder = el('fieldset', { class: 'plain' });
  const counters = creating ? null : countersSection(app, current, () => inForce, signal);
  // pristine is the document as the page drew it from the store, read
  // back the way an edit would be: an edit since differs from it.
  let pristine = '';
  const edits = () => {
    if (!yamlMode) {
      return canonical(field.get());
    }
    try {
      return canonical(fromYAML(yamlArea.value));
    } catch {
      return null; // a YAML that does not parse is an edit too
    }
  };
  const recorder = creating ? null : recordAction(app, current, {
    revision: () => revision, stored: () => inForce, unsaved: () => edits() !== pristine, signal,
  });
  const yamlArea = el('textarea', { class: 'yaml', id: 'yaml', spellcheck: 'false', readonly: !!saveRefused, 'aria-label': 'The proxy document as YAML' });

  const showRevision = () => {
    revisionLine.replaceChildren();
    if (!creating) {
      revisionLine.append('Loaded at revision ', el('code', { text: revision }), '. Saving sends it: a change made elsewhere meanwhile is not overwritten.');
    }
    if (saveRefused) {
      revisionLine.append(' Read-only: ' + saveRefused + '.');
    }
  };
  const showUpstream = () => {
    upstreamLine.hidden = creating || yamlMode;
    if (!creating && doc.type === 'tcp') {
      upstreamLine.replaceChildren('Relays the connections it accepts on ', el('code', { text: doc.listen || '' }), ' to ', el('code', { text: doc.upstream || '' }), '.');
    } else if (!creating) {
      const chosen = doc.resolve && doc.resolve.type === 'header'
        ? ['for requests sending ', el('code', { text: doc.resolve.header + ': ' + doc.name })]
        : ['as the default proxy'];
      upstreamLine.replaceChildren('Forwards to ', el('code', { text: withoutCredentials(doc.url) }), ' ', ...chosen, '; name, upstream and resolution are under Advanced.');
    }
  };
  const showForm = () => {
    field = proxyForm(forms, doc, { creating, readOnly: !!saveRefused, between: counters && counters.el, advanced: advancedOpen, onToggle: (open) => { advancedOpen = open; } });
    holder.replaceChildren(field.el);
  };
  const clearBanner = () => {
    banner.hidden = true;
    banner.replaceChildren();
  };
  const showBanner = (kind, text, lines = [], actions = []) => {
    banner.className = 'banner' + (kind === 'error' ? ' error' : '');
    banner.replaceChildren(el('strong', { text }));
    if (lines.length) {
      banner.append(el('ul', {}, lines.map((l) => el('li', { text: l }))));
    }
    if (actions.length) {
      banner.append(el('div', { class: 'actions' }, actions));
    }
    banner.hidden = false;
    banner.scrollIntoView({ block: 'nearest' });
  };

  // ownIndex is where this proxy sits among the configuration's proxies
  // (the end, for a new one): the cross-field rules check the whole
  // configuration and name paths proxies[<index>].… . null when the list
  // may not be read or does not hold it.
  const ownIndex = async () => {
    if (refusal(app.report, 'list')) {
      return null;
    }
    try {
      const list = (await call('GET', 'api/v1/proxies')).data.proxies;
      if (creating) {
        return list.length;
      }
      const i = list.findIndex((x) => x.proxy.name === current);
      return i >= 0 ? i : null;
    } catch {
      return null;
    }
  };

  // showRefusal shows a 400 CONFIG_INVALID. In the form, a violation
  // whose path names a field the form shows goes beside that field, and
  // the first of them is focused; the banner keeps the others. In YAML,
  // the banner lists them all.
  const showRefusal = async (message) => {
    const lines = message.split('\n').filter((l) => l.trim() !== '');
    if (yamlMode) {
      showBanner('error', 'Doppel refused the document:', lines);
      return;
    }
    const violations = lines.map(violationOf);
    const index = violations.some((v) => v.path.startsWith('proxies[')) ? await ownIndex() : null;
    if (signal.aborted || yamlMode) {
      return;
    }
    const others = [];
    let placed = 0;
    let first = null;
    for (const v of violations) {
      let path = v.path;
      const whole = /^proxies\[([0-9]+)\]\.?(.*)$/.exec(path);
      if (whole) {
        path = index !== null && Number(whole[1]) === index ? whole[2] : '';
      }
      // Beside a field of this proxy's form, naming the proxy is noise.
      const target = path ? field.mark(path, v.text.replace(/^proxy `[^`]*`: /, '')) : null;
      if (target) {
        placed++;
        first = first || target;
      } else {
        others.push(v.line);
      }
    }
    if (!placed) {
      showBanner('error', 'Doppel refused the document:', lines);
      return;
    }
    const summary = 'Doppel refused the document: ' + (placed === 1 ? 'one field needs' : placed + ' fields need') + ' fixing, see beside ' + (placed === 1 ? 'it' : 'them') + (others.length ? '; and:' : '.');
    showBanner('error', summary, others);
    reveal(first);
    first.focus({ preventScroll: true });
    first.scrollIntoView({ block: 'center' });
  };

  // editedDocument is what the user has now, or null (the banner says why).
  const editedDocument = () => {
    if (yamlMode) {
      let parsed;
      try {
        parsed = fromYAML(yamlArea.value);
      } catch (e) {
        showBanner('error', 'The YAML does not parse', [e.message]);
        return null;
      }
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
        showBanner('error', 'The YAML must be one proxy document: a mapping with name, type and url.');
        return null;
      }
      return parsed;
    }
    const problems = field.check();
    if (problems) {
      showBanner('error', problems === 1 ? 'One field needs fixing before saving.' : problems + ' fields need fixing before saving.');
      const first = holder.querySelector('[aria-invalid="true"]');
      if (first) {
        reveal(first);
        first.focus();
      }
      return null;
    }
    return field.get();
  };

  modeButton.addEventListener('click', () => {
    clearBanner();
    if (!yamlMode) {
      doc = field.get();
      yamlArea.value = toYAML(doc, { lineWidth: -1, noRefs: true });
      yamlMode = true;
      if (counters) {
        yamlPanel.after(counters.el); // the form goes away; the counters stay
      }
    } else {
      const parsed = editedDocument();
      if (!parsed) {
        return;
      }
      // The form has a field for what the schema names, and would drop
      // anything else without a word: refuse, and say what.
      const unknown = forms.unknown({ $ref: '#/$defs/ProxyConfig' }, parsed);
      if (unknown.length) {
        showBanner('error', 'The form has no field for ' + (unknown.length === 1 ? 'this' : 'these') + '; remove ' + (unknown.length === 1 ? 'it' : 'them') + ' from the YAML to switch, or save as YAML:', unknown);
        return;
      }
      doc = parsed;
      showForm();
      yamlMode = false;
    }
    holder.hidden = yamlMode;
    upstreamLine.hidden = yamlMode || creating;
    yamlPanel.hidden = !yamlMode;
    yamlArea.hidden = !yamlMode;
    modeButton.textContent = yamlMode ? 'Edit as form' : 'Edit as YAML';
  });

  saveButton.addEventListener('click', async () => {
    clearBanner();
    const edited = editedDocument();
    if (!edited) {
      return;
    }
    saveButton.disabled = true;
    try {
      if (creating) {
        const res = await call('POST', 'api/v1/proxies', { body: { proxy: edited } });
        app.toast('Created proxy ' + res.data.proxy.name);
        await app.refreshAccess();
        if (signal.aborted) {
          return;
        }
        app.navigate('proxies/' + encodeURIComponent(res.data.proxy.name), true);
        return;
      }
      // Always the envelope: a bare document with a top-level proxy key
      // would be taken for one.
      const res = await call('PUT', 'api/v1/proxies/' + encodeURIComponent(current), { body: { revision, proxy: edited }, ifMatch: revision });
      await app.refreshAccess();
      if (signal.aborted) {
        app.toast('Saved proxy ' + res.data.proxy.name);
        return;
      }
      const renamed = res.data.proxy.name !== current;
      revision = res.data.revision;
      doc = res.data.proxy;
      inForce = doc;
      if (renamed) {
        app.toast('Saved; proxy ' + current + ' is now ' + doc.name);
        app.navigate('proxies/' + encodeURIComponent(doc.name), true);
        return;
      }
      app.toast('Saved proxy ' + current);
      if (yamlMode) {
        yamlArea.value = toYAML(doc, { lineWidth: -1, noRefs: true });
      } else {
        showForm();
      }
      showRevision();
      showUpstream();
      pristine = edits();
      if (counters) {
        counters.refresh(); // a changed proxy starts its counts again
      }
    } catch (e) {
      if (signal.aborted) {
        app.toast('Not saved: ' + e.message, true);
        return;
      }
      if (e.code === 'REVISION_MISMATCH') {
        showBanner('warn', 'Not saved: proxy ' + current + ' changed since you loaded it; reload to see the current version.', [
          'Your edit is still on this page. Reloading shows the current version and discards it.',
        ], [el('button', { type: 'button', id: 'reload-proxy', text: 'Reload the proxy', onclick: () => app.route() })]);
      } else if (e.code === 'CONFIG_INVALID') {
        await showRefusal(e.message);
      } else {
        showBanner('error', 'Not saved: ' + e.message);
      }
    } finally {
      saveButton.disabled = !!saveRefused;
    }
  });

  deleteButton.addEventListener('click', async () => {
    if (await app.confirmDelete(current, revision) && !signal.aborted) {
      app.navigate('', false);
    }
  });

  yamlArea.hidden = true;
  const yamlPanel = el('div', { class: 'panel', hidden: true }, yamlArea);
  showRevision();
  showUpstream();
  showForm();
  pristine = edits();
  app.main.replaceChildren(
    el('div', { class: 'head' }, title, recorder && recorder.button, modeButton, deleteButton, saveButton),
    banner,
    revisionLine,
    upstreamLine,
    ...(creating ? [] : [sessionsNote(app, current, signal)]),
    holder,
    yamlPanel,
    ...(recorder ? [recorder.dialog] : []),
  );
  if (counters) {
    counters.refresh();
  }
}
