// A form generated from the configuration's JSON Schema
// (GET /api/v1/schema), checked as typed. It covers the keywords that
// schema uses: $ref, type, properties, required, additionalProperties,
// propertyNames, items, enum, pattern, minLength, maxLength, minimum,
// maximum and oneOf. The server stays the authority: a save it refuses
// shows each violation beside the field its path names (mark).

// el builds an element; text goes in as text, never as markup.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) {
      continue;
    }
    if (k === 'class') {
      e.className = v;
    } else if (k === 'text') {
      e.textContent = v;
    } else if (k.startsWith('on')) {
      e.addEventListener(k.slice(2), v);
    } else if (v === true) {
      e.setAttribute(k, '');
    } else {
      e.setAttribute(k, String(v));
    }
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) {
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  return e;
}

let uid = 0;
const nextId = () => 'f' + (++uid);

export class SchemaForm {
  // custom maps a definition's name to a builder that draws it instead
  // of the generic one: (form, node, value, label, required, path) →
  // {el, get, check, mark}, the contract of build. The proxy page draws
  // a mock's fault block (MockProxyOverride) as fault cards this way.
  constructor(schema, custom = {}) {
    this.defs = schema.$defs || {};
    this.custom = custom;
  }

  // resolve follows $ref, keeping the referring node's description and
  // the name of the definition (Template fields get a text area).
  resolve(node) {
    let out = node || {};
    let ref = '';
    while (out.$ref) {
      ref = out.$ref.replace('#/$defs/', '');
      const target = this.defs[ref] || {};
      out = { ...target, description: out.description || target.description };
    }
    if (ref) {
      out = { ...out, ref };
    }
    return out;
  }

  // problem is what is wrong with value against node, or ''.
  problem(node, value) {
    const s = this.resolve(node);
    if (s.oneOf) {
      const problems = s.oneOf.map((alt) => this.problem(alt, value));
      return problems.includes('') ? '' : (s.description || problems[0]);
    }
    const type = s.type;
    if (type === 'integer' && !(typeof value === 'number' && Number.isInteger(value))) {
      return 'Must be a whole number.';
    }
    if (type === 'number' && !(typeof value === 'number' && Number.isFinite(value))) {
      return 'Must be a number.';
    }
    if (type === 'string' && typeof value !== 'string') {
      return 'Must be text.';
    }
    if (type === 'boolean' && typeof value !== 'boolean') {
      return 'Must be true or false.';
    }
    if (type === 'array') {
      if (!Array.isArray(value)) {
        return 'Must be a list.';
      }
      for (const item of value) {
        const p = this.problem(s.items, item);
        if (p) {
          return p;
        }
      }
      return '';
    }
    if (type === 'object' && (typeof value !== 'object' || value === null || Array.isArray(value))) {
      return 'Must be an object.';
    }
    if (s.enum && !s.enum.includes(value)) {
      return 'Must be one of: ' + s.enum.join(', ') + '.';
    }
    if (typeof value === 'string') {
      const n = [...value].length;
      if (s.minLength !== undefined && n < s.minLength) {
        return s.minLength === 1 ? 'Required.' : 'At least ' + s.minLength + ' characters.';
      }
      if (s.maxLength !== undefined && n > s.maxLength) {
        return 'At most ' + s.maxLength + ' characters.';
      }
      if (s.pattern && !patternOf(s.pattern).test(value)) {
        return s.description || 'Does not have the expected form.';
      }
    }
    if (typeof value === 'number') {
      if (s.minimum !== undefined && value < s.minimum) {
        return 'At least ' + s.minimum + '.';
      }
      if (s.maximum !== undefined && value > s.maximum) {
        return 'At most ' + s.maximum + '.';
      }
    }
    return '';
  }

  // order is the order the form shows an object's properties in.
  order(s) {
    return orderProperties(s, (n) => this.resolve(n));
  }

  // unknown lists, by path, what in value the form has no field for:
  // keys the schema does not name, and a group or a list given as
  // something else. The form would drop them.
  unknown(node, value, path = '') {
    const s = this.resolve(node);
    if (value === undefined || value === null) {
      return [];
    }
    const isMapping = typeof value === 'object' && !Array.isArray(value);
    const at = (k) => (path ? path + '.' + k : k);
    if (s.type === 'object' && !isMapping) {
      return [(path || 'the document') + ' (not a mapping)'];
    }
    if (s.type === 'object' && s.properties) {
      return Object.keys(value).flatMap((k) => (Object.hasOwn(s.properties, k) ? this.unknown(s.properties[k], value[k], at(k)) : [at(k)]));
    }
    if (s.type === 'array' && this.resolve(s.items).type === 'object') {
      if (!Array.isArray(value)) {
        return [path + ' (not a list)'];
      }
      return value.flatMap((v, i) => this.unknown(s.items, v, path + '[' + i + ']'));
    }
    return [];
  }

  // build returns a field over value: {el, get(), check(), mark()}. get()
  // is the value as typed (undefined when an optional field is left
  // empty); check() marks the field and returns its number of problems.
  // mark(path, message) shows a message from the server beside what path
  // (relative to this field: '', 'url', 'mocks[1].name') names, and
  // returns the element to focus, or null when the form shows no such
  // field. Editing the field clears the message.
  build(node, value, label, required, path) {
    const s = this.resolve(node);
    if (s.ref && Object.hasOwn(this.custom, s.ref)) {
      return this.custom[s.ref](this, s, value, label, required, path);
    }
    if (s.type === 'object' && s.properties) {
      return this.objectField(s, value, label, required, path);
    }
    if (s.type === 'object') {
      return this.mapField(s, value, label, required, path);
    }
    if (s.type === 'array' && this.resolve(s.items).type === 'object') {
      return this.listField(s, value, label, path);
    }
    return this.scalarField(s, value, label, required, path);
  }

  scalarField(s, value, label, required, path) {
    const id = nextId();
    const msg = el('span', { class: 'msg', id: id + '-msg', 'aria-live': 'polite' });
    const hint = s.description ? el('span', { class: 'hint', text: s.description }) : null;
    const kind = scalarKind(s, (n) => this.resolve(n));
    let input;
    if (kind === 'boolean') {
      input = el('input', { type: 'checkbox', id, 'data-path': path });
      input.checked = value === true;
    } else if (kind === 'enum') {
      input = el('select', { id, 'data-path': path },
        required ? null : el('option', { value: '', text: '(not set)' }),
        s.enum.map((v) => el('option', { value: v, text: v })));
      input.value = value === undefined ? (required ? s.enum[0] : '') : value;
    } else {
      const text = kind === 'list' && Array.isArray(value) ? value.join(', ') : (value === undefined || value === null ? '' : String(value));
      if (s.ref === 'Template' || (typeof value === 'string' && value.includes('\n'))) {
        input = el('textarea', { id, 'data-path': path, spellcheck: 'false', rows: Math.min(12, Math.max(3, text.split('\n').length + 1)) });
      } else {
        input = el('input', { type: 'text', id, 'data-path': path, spellcheck: 'false', autocomplete: 'off', inputmode: kind === 'number' ? 'decimal' : undefined });
      }
      input.value = text;
    }
    input.setAttribute('aria-describedby', id + '-msg');
    const get = () => {
      if (kind === 'boolean') {
        return input.checked;
      }
      const raw = input.value;
      if (raw === '' && kind !== 'string') {
        return undefined;
      }
      if (raw === '' && !required) {
        return undefined;
      }
      return parseAs(kind, raw);
    };
    const check = () => {
      const v = get();
      let p = '';
      if (v === undefined) {
        p = required ? 'Required.' : '';
      } else {
        p = this.problem(s, v);
      }
      msg.textContent = p;
      input.setAttribute('aria-invalid', p ? 'true' : 'false');
      return p ? 1 : 0;
    };
    input.addEventListener(kind === 'boolean' || kind === 'enum' ? 'change' : 'input', check);
    const mark = (rest, message) => {
      if (rest !== '') {
        return null;
      }
      msg.textContent = message;
      input.setAttribute('aria-invalid', 'true');
      return input;
    };
    const field = el('div', { class: 'field' },
      el('label', { for: id }, label, required ? el('span', { class: 'req', title: 'required', text: '*' }) : null),
      el('div', { class: 'control' }, input, msg, hint));
    return { el: field, get, check, mark };
  }

  objectField(s, value, label, required, path) {
    const present = value !== undefined && value !== null;
    const fields = [];
    const body = el('div', { class: 'nested' });
    const names = this.order(s);
    for (const name of names) {
      const f = this.build(s.properties[name], present ? value[name] : undefined, name, (s.required || []).includes(name), path ? path + '.' + name : name);
      fields.push([name, f]);
      body.append(f.el);
    }
    let toggle = null;
    if (!required && path) {
      toggle = el('input', { type: 'checkbox', 'data-path': path + '?' });
      toggle.checked = present;
      body.hidden = !present;
      toggle.addEventListener('change', () => {
        body.hidden = !toggle.checked;
      });
    }
    const get = () => {
      if (toggle && !toggle.checked) {
        return undefined;
      }
      const out = {};
      for (const [name, f] of fields) {
        const v = f.get();
        if (v !== undefined) {
          out[name] = v;
        }
      }
      return out;
    };
    const check = () => (toggle && !toggle.checked ? 0 : fields.reduce((n, [, f]) => n + f.check(), 0));
    // A message about the group as a whole (mocks[0].response) goes at
    // its top; the whole document (path '') has no place but the banner.
    const groupMsg = el('p', { class: 'msg', hidden: true, 'aria-live': 'polite' });
    const clearGroup = () => {
      groupMsg.hidden = true;
      groupMsg.textContent = '';
    };
    body.addEventListener('input', clearGroup);
    body.addEventListener('change', clearGroup);
    const mark = (rest, message) => {
      if (toggle && !toggle.checked) {
        return null;
      }
      if (rest === '') {
        if (!path) {
          return null;
        }
        groupMsg.textContent = message;
        groupMsg.hidden = false;
        return body.querySelector('input, select, textarea') || null;
      }
      const m = /^([^.[]+)\.?(.*)$/.exec(rest);
      const named = m && fields.find(([name]) => name === m[1]);
      if (!named) {
        return null;
      }
      const tail = rest.slice(m[1].length).replace(/^\./, '');
      return named[1].mark(tail, message);
    };
    body.prepend(groupMsg);
    if (!path) {
      return { el: body, get, check, mark };
    }
    const legend = el('legend', {}, label, toggle ? el('label', {}, toggle, 'set') : null);
    const hint = s.description ? el('p', { class: 'hint muted', text: s.description }) : null;
    if (hint) {
      body.prepend(hint);
    }
    return { el: el('fieldset', { 'data-path': path }, legend, body), get, check, mark };
  }

  // mapField is an object of free keys (headers, variables).
  mapField(s, value, label, required, path) {
    const rows = [];
    const list = el('div');
    const keyNode = s.propertyNames || { type: 'string', minLength: 1 };
    const valueNode = s.additionalProperties || { type: 'string' };
    const add = (k, v) => {
      const key = el('input', { type: 'text', placeholder: 'name', 'aria-label': label + ' name', spellcheck: 'false' });
      key.value = k;
      const val = el('input', { type: 'text', placeholder: 'value', 'aria-label': label + ' value', spellcheck: 'false' });
      val.value = v === undefined ? '' : String(v);
      const msg = el('span', { class: 'msg' });
      const row = { key, val, msg };
      const remove = el('button', { type: 'button', class: 'small', title: 'Remove', text: 'Remove', onclick: () => {
        rows.splice(rows.indexOf(row), 1);
        line.remove();
      } });
      const line = el('div', { class: 'entry' }, key, el('div', { class: 'control' }, val, msg), remove);
      row.check = () => {
        const p = this.problem(keyNode, key.value) || this.problem(valueNode, val.value);
        msg.textContent = p ? (this.problem(keyNode, key.value) ? 'Name: ' : '') + p : '';
        key.setAttribute('aria-invalid', this.problem(keyNode, key.value) ? 'true' : 'false');
        val.setAttribute('aria-invalid', this.problem(valueNode, val.value) ? 'true' : 'false');
        return p ? 1 : 0;
      };
      key.addEventListener('input', row.check);
      val.addEventListener('input', row.check);
      rows.push(row);
      list.append(line);
    };
    for (const [k, v] of Object.entries(value || {})) {
      add(k, v);
    }
    const addButton = el('button', { type: 'button', class: 'small', text: 'Add', onclick: () => add('', '') });
    const get = () => {
      if (!rows.length && !required) {
        return value === undefined ? undefined : {};
      }
      return Object.fromEntries(rows.map((r) => [r.key.value, r.val.value]));
    };
    const check = () => rows.reduce((n, r) => n + r.check(), 0);
    // A key's message goes beside its value; the key is the rest of the
    // path as it is (a header name may hold a dot).
    const mark = (rest, message) => {
      const row = rest === '' ? null : rows.find((r) => r.key.value === rest);
      if (!row) {
        return null;
      }
      row.msg.textContent = message;
      row.val.setAttribute('aria-invalid', 'true');
      return row.val;
    };
    const hint = s.description ? el('p', { class: 'hint muted', text: s.description }) : null;
    return { el: el('fieldset', { 'data-path': path }, el('legend', {}, label), hint, list, addButton), get, check, mark };
  }

  // listField is a list of objects (mocks), in order: the first match wins.
  listField(s, value, label, path) {
    const items = [];
    const list = el('div');
    const itemSchema = s.items;
    const render = () => {
      list.replaceChildren();
      items.forEach((it, i) => {
        it.legendText.textContent = label.replace(/s$/, '') + ' ' + (i + 1);
        it.up.disabled = i === 0;
        it.down.disabled = i === items.length - 1;
        list.append(it.box);
      });
    };
    const add = (v) => {
      const idx = items.length;
      const f = this.build(itemSchema, v, '', true, path + '[' + idx + ']');
      const it = { f };
      it.legendText = el('span');
      it.up = el('button', { type: 'button', class: 'small', title: 'Move up', text: '↑', onclick: () => move(it, -1) });
      it.down = el('button', { type: 'button', class: 'small', title: 'Move down', text: '↓', onclick: () => move(it, 1) });
      const remove = el('button', { type: 'button', class: 'small danger', text: 'Remove', onclick: () => {
        items.splice(items.indexOf(it), 1);
        render();
      } });
      // the object field's own fieldset is replaced by this one
      const inner = f.el.tagName === 'FIELDSET' ? f.el.querySelector('.nested') : f.el;
      it.box = el('fieldset', { class: 'item', 'data-path': path + '[]' }, el('legend', {}, it.legendText, it.up, it.down, remove), inner);
      items.push(it);
    };
    for (const v of value || []) {
      add(v);
    }
    render();
    const addButton = el('button', { type: 'button', class: 'small', text: 'Add ' + label.replace(/s$/, ''), 'data-add': path, onclick: () => {
      add({});
      render();
    } });
    const get = () => items.map((it) => it.f.get());
    const check = () => items.reduce((n, it) => n + it.f.check(), 0);
    // mocks[1] is the second item as it stands now, whatever its
    // data-path said when it was added: items move and go.
    const mark = (rest, message) => {
      const m = /^\[([0-9]+)\]\.?(.*)$/.exec(rest);
      const it = m && items[Number(m[1])];
      return it ? it.f.mark(m[2], message) : null;
    };
    const hint = s.description ? el('p', { class: 'hint muted', text: s.description }) : null;
    return { el: el('fieldset', { 'data-path': path }, el('legend', {}, label), hint, list, addButton), get, check, mark };
  }
}

const compiled = new Map();
function patternOf(p) {
  if (!compiled.has(p)) {
    let re;
    try {
      re = new RegExp(p, 'u');
    } catch {
      re = new RegExp(p);
    }
    compiled.set(p, re);
  }
  return compiled.get(p);
}

// scalarKind is how a field is typed in: boolean, enum, number, a list of
// names written with commas, or text (what a oneOf of text and a number
// is too: ByteSize takes 1048576 and "1Mi").
function scalarKind(s, resolve) {
  if (s.type === 'boolean') {
    return 'boolean';
  }
  if (s.enum) {
    return 'enum';
  }
  if (s.type === 'integer' || s.type === 'number') {
    return 'number';
  }
  if (s.oneOf) {
    const types = s.oneOf.map((a) => resolve(a).type);
    if (types.includes('array')) {
      return 'list';
    }
    if (types.includes('integer') || types.includes('number')) {
      return 'number-or-text';
    }
  }
  return 'string';
}

function parseAs(kind, raw) {
  const t = raw.trim();
  switch (kind) {
    case 'number':
      return t !== '' && !Number.isNaN(Number(t)) ? Number(t) : raw;
    case 'number-or-text':
      return /^[0-9]+$/.test(t) ? Number(t) : raw;
    case 'list': {
      const parts = t.split(',').map((x) => x.trim()).filter((x) => x !== '');
      return parts.length === 1 && !t.includes(',') ? parts[0] : parts;
    }
  }
  return raw;
}

// orderProperties puts what identifies a thing first, then single values,
// then groups, then lists: name, type and url before mocks.
function orderProperties(s, resolve) {
  const first = ['name', 'type', 'url', 'method', 'status'];
  const rank = (name) => {
    const i = first.indexOf(name);
    if (i >= 0) {
      return i;
    }
    const t = resolve(s.properties[name]);
    if (t.type === 'array' && resolve(t.items).type === 'object') {
      return 40;
    }
    if (t.type === 'object') {
      return 30;
    }
    return (s.required || []).includes(name) ? 10 : 20;
  };
  return Object.keys(s.properties).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}
