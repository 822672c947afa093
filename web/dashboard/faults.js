// Fault cards: one per fault of a proxy, or of a mock's proxy block, in
// the order a request rolls them (loss, abort, hang, bandwidth, latency).
// A card's switch says whether its key is in the document: off removes
// it. A share is typed and shown as the fraction the document holds
// (0.1), its percentage beside it (10%). The line under the parameters says, in words, what a
// client meets when the fault fires with them. Each card has the
// contract of a SchemaForm field: {el, get, check, mark}.
import { el } from './form.js';

export const FAULTS = ['loss', 'abort', 'hang', 'bandwidth', 'latency'];

const titles = { loss: 'Loss', abort: 'Abort', hang: 'Hang', bandwidth: 'Bandwidth', latency: 'Latency' };

// What a card starts from when its switch is turned on for the first time.
const starts = {
  loss: { percentage: 0.1, status: 503 },
  abort: { percentage: 0.1, at: 'request' },
  hang: { percentage: 0.1, seconds: 30 },
  bandwidth: { percentage: 0.1, bytes_per_second: 16 * 1024 },
  latency: { percentage: 0.1, min: 0.5, max: 2 },
};

let uid = 0;
const nextId = () => 'fc' + (++uid);

// ---- byte sizes, as the configuration spells them (ByteSize)

const sizePattern = /^ *([0-9]+) *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$/;
const sizeUnits = { '': 1, b: 1, ki: 2 ** 10, kib: 2 ** 10, mi: 2 ** 20, mib: 2 ** 20, gi: 2 ** 30, gib: 2 ** 30, kb: 1e3, mb: 1e6, gb: 1e9 };

// parseSize reads 1024, 16Ki, 512kB… as bytes; NaN for anything else.
export function parseSize(raw) {
  const m = sizePattern.exec(String(raw));
  if (!m) {
    return NaN;
  }
  const n = Number(m[1]) * sizeUnits[(m[2] || '').toLowerCase()];
  return Number.isSafeInteger(n) ? n : NaN;
}

// spellSize writes bytes back the short way where it is exact: 16Ki.
function spellSize(n) {
  for (const [unit, size] of [['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]]) {
    if (n > 0 && n % size === 0) {
      return n / size + unit;
    }
  }
  return String(n);
}

// sizeText is bytes in words: 1 KiB, 500 kB, 1,500 bytes.
export function sizeText(n) {
  for (const [unit, size] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10], ['GB', 1e9], ['MB', 1e6], ['kB', 1e3]]) {
    if (n >= size && n % size === 0) {
      return (n / size).toLocaleString('en') + ' ' + unit;
    }
  }
  return n === 1 ? '1 byte' : n.toLocaleString('en') + ' bytes';
}

// duration is a time in words, rounded.
function duration(seconds) {
  const round = (x) => Number(x.toPrecision(x < 10 ? 2 : 3)).toLocaleString('en');
  if (seconds < 1) {
    return 'under a second';
  }
  if (seconds < 120) {
    return round(seconds) + ' s';
  }
  if (seconds < 7200) {
    return round(seconds / 60) + ' min';
  }
  if (seconds < 2 * 86400) {
    return round(seconds / 3600) + ' h';
  }
  return round(seconds / 86400) + ' days';
}

// A share is the fraction the document holds; its percentage is only
// said beside it. toPrecision drops the float noise of the product:
// 0.35 is 35%, not 35.00000000000001%.
const percentText = (f) => Number((f * 100).toPrecision(15)).toLocaleString('en', { maximumFractionDigits: 6 }) + '%';

// shareText is a share as the page shows it everywhere: 0.1 (10%).
export function shareText(f) {
  return String(f) + ' (' + percentText(f) + ')';
}

function list(parts) {
  return parts.length < 2 ? parts.join('') : parts.slice(0, -1).join(', ') + ' and ' + parts.at(-1);
}

// clientSees is the one line of what the client meets when the fault
// fires with values v (each already checked). mock: the card is a mock's.
export function clientSees(kind, v, mock) {
  const cut = v.how === 'close' ? 'a FIN (an early end of file)' : 'a TCP reset (ECONNRESET)';
  switch (kind) {
    case 'loss': {
      const extra = ['the LOSS_INJECTED envelope'];
      if (v.retry_after !== undefined) {
        extra.push('Retry-After: ' + v.retry_after);
      }
      const names = Object.keys(v.headers || {}).filter((k) => k !== '');
      extra.push(...(names.length > 3 ? [names.length + ' added headers'] : names));
      return 'An immediate ' + v.status + ' with ' + list(extra) + (mock ? ', instead of the mock\'s answer.' : '; the upstream never sees the request.');
    }
    case 'abort': {
      const at = mock && v.at === 'response' ? 'request' : v.at;
      const note = at !== v.at ? ' (on a mock, at: response acts as at: request)' : '';
      if (at === 'request') {
        return 'No answer: the connection is cut with ' + cut + (mock ? ' before the mock\'s answer' : '; the upstream never sees the request') + note + '.';
      }
      if (at === 'response') {
        return 'No answer: the upstream gets the request and answers in full, then the connection is cut with ' + cut + '.';
      }
      const after = v.after || 0;
      return 'The status and headers, then ' + (after ? sizeText(after) + ' of body' : 'no body') + ', then ' + cut + '.';
    }
    case 'hang': {
      const where = mock ? 'the mock never answers' : 'the upstream is never contacted';
      return v.seconds > 0
        ? 'Nothing for ' + v.seconds + ' s, then the connection closes (a FIN); ' + where + '.'
        : 'No answer: the connection closes at once (a FIN); ' + where + '.';
    }
    case 'bandwidth':
      return 'A complete answer, its body paced to ' + sizeText(v.bytes_per_second) + ' per second: 1 MiB takes ' + duration(2 ** 20 / v.bytes_per_second) + '.';
    case 'latency': {
      const when = v.min === v.max ? v.min + ' s' : v.min + ' to ' + v.max + ' s';
      return 'A complete answer, late: its headers come ' + when + ' after the request, the upstream\'s own time included.' +
        (mock ? ' It replaces the proxy\'s latency.' : '');
    }
  }
  return '';
}

// param is one labelled input of a card: {name, el, input, get, check,
// mark, ok}. kind: share, number, size, enum. get() is the value as it
// goes into the document (undefined when left empty); an input left as
// loaded gives back the loaded value exactly.
function param(forms, o) {
  const id = nextId();
  const msg = el('span', { class: 'msg', id: id + '-msg', 'aria-live': 'polite' });
  let input;
  let shown = '';
  if (o.kind === 'enum') {
    input = el('select', { id, 'data-path': o.path }, o.options.map(([v, text]) => el('option', { value: v, text })));
    input.value = o.value === undefined ? o.options[0][0] : o.value;
  } else {
    if (typeof o.value === 'number') {
      shown = String(o.kind === 'size' ? spellSize(o.value) : o.value);
    } else if (o.value !== undefined && o.value !== null) {
      shown = String(o.value);
    }
    input = el('input', { type: 'text', id, 'data-path': o.path, spellcheck: 'false', autocomplete: 'off', placeholder: o.placeholder,
      inputmode: o.kind === 'size' ? undefined : 'decimal', class: 'short' });
    input.value = shown;
  }
  input.setAttribute('aria-describedby', id + '-msg');
  const get = () => {
    if (o.kind === 'enum') {
      return input.value;
    }
    const raw = input.value.trim();
    if (raw === '') {
      return undefined;
    }
    if (input.value === shown) {
      return o.value;
    }
    if (o.kind === 'size') {
      const n = parseSize(raw);
      return Number.isNaN(n) ? raw : n;
    }
    const n = Number(raw);
    return Number.isNaN(n) ? raw : n;
  };
  const problem = () => {
    const v = get();
    if (v === undefined) {
      return o.required ? 'Required.' : '';
    }
    if (o.kind === 'share') {
      if (typeof v === 'number' && v >= 0 && v <= 1) {
        return '';
      }
      // 10 is most likely meant as 10%: say what to type for it.
      return typeof v === 'number' && v > 1 && v <= 100
        ? 'A fraction, 0 to 1: for ' + v + '%, type ' + Number((v / 100).toPrecision(15)) + '.'
        : 'A fraction, 0 to 1: 0.1 is one in ten.';
    }
    if (o.kind === 'size') {
      if (typeof v !== 'number' || !Number.isInteger(v)) {
        return 'A byte size, such as ' + (o.min ? '16Ki' : '512 or 1Ki') + '.';
      }
      if (v < o.min) {
        return 'At least ' + o.min + '.';
      }
      return v > 2 ** 30 ? 'At most 1Gi.' : '';
    }
    return forms.problem(o.node, v);
  };
  // A share's unit says its percentage as typed: = 10% of requests.
  const unit = o.unit ? el('span', { class: 'unit', text: o.unit }) : null;
  const sayUnit = () => {
    if (o.kind === 'share' && unit) {
      const v = get();
      unit.textContent = (typeof v === 'number' && problem() === '' ? '= ' + percentText(v) + ' ' : '') + o.unit;
    }
  };
  const check = () => {
    const p = problem();
    msg.textContent = p;
    input.setAttribute('aria-invalid', p ? 'true' : 'false');
    sayUnit();
    return p ? 1 : 0;
  };
  input.addEventListener(o.kind === 'enum' ? 'change' : 'input', check);
  sayUnit();
  const mark = (rest, message) => {
    if (rest !== '') {
      return null;
    }
    msg.textContent = message;
    input.setAttribute('aria-invalid', 'true');
    return input;
  };
  const node = el('div', { class: 'param', 'data-param': o.name },
    el('label', { for: id, text: o.label }),
    el('div', { class: 'with-unit' }, input, unit),
    msg);
  return { name: o.name, el: node, input, get, check, mark, ok: () => problem() === '', say: (text) => { msg.textContent = text; input.setAttribute('aria-invalid', text ? 'true' : 'false'); } };
}

// shareField is a share outside the cards (replace) in the same terms:
// the fraction, its percentage beside it; left empty, the key is left
// out. The contract of a SchemaForm field.
export function shareField(forms, node, value, path, label, unit, placeholder) {
  const s = forms.resolve(node);
  const q = param(forms, { name: label, label, unit, kind: 'share', value, path, placeholder });
  const labelEl = q.el.querySelector('label');
  const field = el('div', { class: 'field share' }, labelEl,
    el('div', { class: 'control' }, q.el.querySelector('.with-unit'), q.el.querySelector('.msg'),
      s.description ? el('span', { class: 'hint', text: s.description }) : null));
  return { el: field, get: q.get, check: q.check, mark: q.mark };
}

// faultCard draws the fault kind (a key of FAULTS) at path over value,
// its schema node. ctx.mock: the card is in a mock's proxy block.
export function faultCard(forms, kind, node, value, path, ctx = {}) {
  const s = forms.resolve(node);
  const props = s.properties || {};
  const present = value !== undefined && value !== null;
  const loaded = present && typeof value === 'object' && !Array.isArray(value) ? value : {};
  const at = (k) => (present ? loaded[k] : starts[kind][k]);
  const id = nextId();
  const noun = kind === 'bandwidth' ? 'answers' : 'requests';

  const toggle = el('input', { type: 'checkbox', role: 'switch', id, 'data-path': path + '?', 'aria-describedby': id + '-hint' });
  toggle.checked = present;
  const state = el('span', { class: 'state', 'aria-hidden': 'true' });
  const p = (o) => param(forms, { node: props[o.name], value: at(o.name), path: path + '.' + o.name, ...o });
  const share = param(forms, { name: 'percentage', label: 'share', unit: 'of ' + noun, kind: 'share', value: at('percentage'), path: path + '.percentage', required: true });
  const params = [share];
  let headers = null;
  let shows = () => true; // whether a parameter is in force
  let had = {};
  switch (kind) {
    case 'loss':
      params.push(p({ name: 'status', label: 'status', kind: 'number', required: true }),
        p({ name: 'retry_after', label: 'retry_after', unit: 's', kind: 'number', placeholder: 'not sent' }));
      if (props.headers) {
        headers = forms.build(props.headers, loaded.headers, 'headers', false, path + '.headers');
        headers.el.classList.add('compact');
      }
      break;
    case 'abort': {
      params.push(p({ name: 'at', label: 'at', kind: 'enum', required: true,
        options: [['request', 'request'], ['response', ctx.mock ? 'response (as request)' : 'response'], ['body', 'body']] }),
      p({ name: 'after', label: 'after', unit: 'bytes of body', kind: 'size', min: 0, placeholder: '0' }),
      p({ name: 'how', label: 'how', kind: 'enum', options: [['reset', 'reset (TCP RST)'], ['close', 'close (FIN)']] }));
      had = { how: loaded.how !== undefined };
      const where = params[1];
      shows = (q) => q.name !== 'after' || where.get() === 'body';
      break;
    }
    case 'hang':
      params.push(p({ name: 'seconds', label: 'seconds', unit: 's', kind: 'number', required: true }));
      break;
    case 'bandwidth':
      params.push(p({ name: 'bytes_per_second', label: 'bytes_per_second', unit: 'bytes per second', kind: 'size', min: 1, required: true }));
      break;
    case 'latency':
      params.push(p({ name: 'min', label: 'min', unit: 's', kind: 'number', required: true }),
        p({ name: 'max', label: 'max', unit: 's', kind: 'number', required: true }));
      break;
  }
  const named = (name) => params.find((q) => q.name === name);
  const loadedOrSet = (k) => {
    const e = extras.find(([x]) => x === k);
    return !!e && e[1].get() !== undefined;
  };
  const inForce = () => params.filter(shows);
  // Whatever else the schema gives the fault (when, and any key added
  // later) is drawn by the generic form, so that a save keeps it.
  const drawn = new Set([...params.map((q) => q.name), ...(headers ? ['headers'] : [])]);
  const extras = forms.order(s).filter((k) => !drawn.has(k))
    .map((k) => [k, forms.build(props[k], loaded[k], k, (s.required || []).includes(k), path + '.' + k)]);

  // Whatever the card should say about its values beyond each one's own
  // check: latency's max below its min.
  let crossed = false;
  const crossCheck = () => {
    if (kind !== 'latency') {
      return 0;
    }
    const min = named('min');
    const max = named('max');
    const was = crossed;
    crossed = min.ok() && max.ok() && max.get() < min.get();
    if (crossed) {
      max.say('At least min (' + min.get() + ').');
    } else if (was) {
      max.check();
    }
    return crossed ? 1 : 0;
  };

  const values = () => {
    const out = {};
    for (const q of inForce()) {
      const v = q.get();
      if (v === undefined) {
        continue;
      }
      // reset is the default: a document that did not name how stays so.
      if (kind === 'abort' && q.name === 'how' && v === 'reset' && !had.how) {
        continue;
      }
      out[q.name] = v;
    }
    for (const [k, f] of [...(headers ? [['headers', headers]] : []), ...extras]) {
      const x = f.get();
      if (x !== undefined) {
        out[k] = x;
      }
    }
    return out;
  };

  const seesShare = el('span', { class: 'sees-share' });
  const seesText = el('span', { class: 'sees-text' });
  const sees = el('p', { class: 'sees', 'aria-live': 'polite' }, el('strong', { text: 'What the client sees' }), seesShare, ': ', seesText);
  const groupMsg = el('p', { class: 'msg', hidden: true, 'aria-live': 'polite' });
  const paramRow = el('div', { class: 'fault-params' }, params.map((q) => q.el));
  // The extras fold under their names, saying whether they are set.
  const moreSaid = el('span', { class: 'muted' });
  const more = extras.length
    ? el('details', { class: 'fault-more' }, el('summary', {}, el('span', { class: 'summary-title', text: extras.map(([k]) => k).join(', ') }), moreSaid),
      extras.map(([, f]) => f.el))
    : null;
  const body = el('div', { class: 'fault-body' }, paramRow, headers ? headers.el : null, more, sees);
  const card = el('div', { class: 'fault', role: 'group', 'aria-labelledby': id + '-name', 'data-fault': kind, 'data-path': path },
    el('div', { class: 'fault-head' }, toggle,
      el('label', { for: id, id: id + '-name', class: 'fault-name', text: titles[kind] }), state,
      el('p', { class: 'fault-hint', id: id + '-hint', text: s.description || '' })),
    groupMsg, body);

  const sync = () => {
    const on = toggle.checked;
    card.classList.toggle('on', on);
    state.textContent = on ? 'on' : 'off';
    body.hidden = !on;
    for (const q of params) {
      q.el.hidden = !shows(q);
    }
    const bad = inForce().some((q) => !q.ok()) || (kind === 'latency' && named('max').get() < named('min').get());
    if (bad) {
      seesShare.textContent = '';
      seesText.textContent = 'fix the values above to see it.';
      return;
    }
    if (more) {
      const set = extras.filter(([k]) => loadedOrSet(k)).map(([k]) => k);
      moreSaid.textContent = set.length ? set.join(', ') + ' set: the share is of the ' + noun + ' ' + (set.length === 1 ? 'it admits' : 'they admit') : 'not set: any of the ' + noun + ' may be picked';
    }
    const v = values();
    const f = v.percentage;
    // With when, the share is of what it admits.
    const of = v.when !== undefined ? 'the ' + noun + ' its when admits' : noun;
    seesShare.textContent = f === 1 ? (v.when !== undefined ? ' in every one of ' + of : ' in every ' + noun.replace(/s$/, '')) : f === 0 ? '' : ' in ' + shareText(f) + ' of ' + of;
    seesText.textContent = f === 0 ? 'nothing different: at 0 this fault never fires.' : clientSees(kind, v, !!ctx.mock);
  };
  card.addEventListener('input', () => {
    groupMsg.hidden = true;
    crossCheck();
    sync();
  });
  card.addEventListener('change', () => {
    groupMsg.hidden = true;
    crossCheck();
    sync();
  });
  sync();

  const get = () => (toggle.checked ? values() : undefined);
  const check = () => {
    if (!toggle.checked) {
      return 0;
    }
    const n = inForce().reduce((sum, q) => sum + q.check(), 0) + (headers ? headers.check() : 0) + extras.reduce((sum, [, f]) => sum + f.check(), 0);
    return n + crossCheck();
  };
  const mark = (rest, message) => {
    if (!toggle.checked) {
      return null;
    }
    if (rest === '') {
      groupMsg.textContent = message;
      groupMsg.hidden = false;
      return toggle;
    }
    const m = /^([^.[]+)\.?(.*)$/.exec(rest);
    if (m && m[1] === 'headers' && headers) {
      return headers.mark(m[2], message);
    }
    const extra = m && extras.find(([k]) => k === m[1]);
    if (extra) {
      return extra[1].mark(m[2], message);
    }
    const q = m && named(m[1]);
    return q && shows(q) ? q.mark(m[2], message) : null;
  };
  // summary: "abort 0.1 (10%)" while on, '' while off.
  const summary = () => (toggle.checked && share.ok() ? kind + ' ' + shareText(share.get()) : toggle.checked ? kind : '');
  return { el: card, get, check, mark, summary };
}

// mockFaults draws a mock's proxy block (MockProxyOverride) as fault cards,
// folded under the mock's name until one is on; what else the block
// holds (replace) follows as the generic form draws it. A SchemaForm
// custom builder.
export function mockFaults(forms, s, value, label, required, path) {
  const props = s.properties || {};
  const present = value !== undefined && value !== null && typeof value === 'object' && !Array.isArray(value);
  const v = present ? value : {};
  const order = forms.order(s);
  const fields = new Map();
  const cards = FAULTS.filter((k) => props[k]).map((k) => {
    const c = faultCard(forms, k, props[k], v[k], path + '.' + k, { mock: true });
    fields.set(k, c);
    return c;
  });
  const others = order.filter((k) => !fields.has(k)).map((k) => {
    const f = k === 'replace'
      ? shareField(forms, props[k], v[k], path + '.' + k, k, 'of the requests it matches', 'the proxy\'s')
      : forms.build(props[k], v[k], k, (s.required || []).includes(k), path + '.' + k);
    fields.set(k, f);
    return f;
  });
  const said = el('span', { class: 'muted' });
  const refresh = () => {
    const on = cards.map((c) => c.summary()).filter((x) => x);
    said.textContent = on.length ? on.join(', ') : 'none of its own';
  };
  const groupMsg = el('p', { class: 'msg', hidden: true, 'aria-live': 'polite' });
  const box = el('details', { class: 'mock-faults', 'data-path': path, open: cards.some((c) => c.get() !== undefined) },
    el('summary', {}, el('span', { class: 'summary-title', text: 'Faults of this mock' }), said),
    s.description ? el('p', { class: 'hint muted', text: s.description }) : null,
    groupMsg,
    el('div', { class: 'faults' }, cards.map((c) => c.el)),
    others.map((f) => f.el));
  box.addEventListener('input', () => { groupMsg.hidden = true; refresh(); });
  box.addEventListener('change', () => { groupMsg.hidden = true; refresh(); });
  refresh();
  const get = () => {
    const out = {};
    for (const k of order) {
      const x = fields.get(k).get();
      if (x !== undefined) {
        out[k] = x;
      }
    }
    return Object.keys(out).length || present ? out : undefined;
  };
  const check = () => [...fields.values()].reduce((n, f) => n + f.check(), 0);
  const mark = (rest, message) => {
    if (rest === '') {
      groupMsg.textContent = message;
      groupMsg.hidden = false;
      return box.querySelector('summary');
    }
    const m = /^([^.[]+)\.?(.*)$/.exec(rest);
    const f = m && fields.get(m[1]);
    return f ? f.mark(m[2], message) : null;
  };
  return { el: box, get, check, mark };
}
