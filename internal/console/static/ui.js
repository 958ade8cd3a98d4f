// Small DOM helpers of the console's pages. Text goes in as text nodes,
// never as HTML.

// h makes an element: attrs sets properties and attributes (class, for,
// data-*, aria-*, on<event> listeners), children are nodes or strings.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'class') {
      el.className = v;
    } else if (k === 'text') {
      el.textContent = v;
    } else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected' || k === 'open' || k === 'hidden') {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and appends children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let uid = 0;
// id returns a new element id with the given prefix.
export function id(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

// when formats an RFC 3339 time in the viewer's locale and time zone.
export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : timeFormat.format(d);
}

const numberFormat = new Intl.NumberFormat();

export function num(n) {
  return typeof n === 'number' ? numberFormat.format(n) : '';
}

// ms formats a duration in milliseconds.
export function ms(n) {
  if (typeof n !== 'number') return '';
  return n < 1000 ? `${Math.round(n)} ms` : seconds(n);
}

// usd formats a cost in US dollars, down to millionths.
export function usd(n) {
  if (typeof n !== 'number') return '$0';
  return new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', maximumFractionDigits: 6 }).format(n);
}

function seconds(n) {
  return `${(n / 1000).toLocaleString(undefined, { maximumFractionDigits: 1, minimumFractionDigits: 1 })} s`;
}

// spinner shows that work is under way, with the time it has taken.
// stop(text) ends it, leaving text (or the final time) in its place.
// since, a time in ms since the epoch, counts from then rather than now.
export function spinner(label, { since } = {}) {
  const time = h('span', { class: 'elapsed' }, seconds(0));
  const el = h('span', { class: 'busy', role: 'status' }, h('span', { class: 'spin', 'aria-hidden': 'true' }), ` ${label} `, time);
  const start = performance.now() - (since ? Math.max(0, Date.now() - since) : 0);
  const tick = () => { time.textContent = seconds(performance.now() - start); };
  tick();
  const timer = setInterval(tick, 100);
  return {
    el,
    elapsed: () => performance.now() - start,
    stop(text) {
      clearInterval(timer);
      el.classList.add('done');
      el.querySelector('.spin')?.remove();
      clear(el, text ?? `${label} ${ms(performance.now() - start)}`);
    },
  };
}

// jsonView shows a JSON value as a tree whose objects and arrays fold;
// those with more than `fold` members, and those deeper than `depth`,
// start folded.
export function jsonView(value, { fold = 12, depth = 3 } = {}) {
  return h('div', { class: 'json' }, node(value, 0, fold, depth));
}

function node(v, level, fold, depth) {
  if (v === null || typeof v !== 'object') {
    const kind = v === null ? 'null' : typeof v;
    return h('span', { class: `j-${kind}` }, JSON.stringify(v));
  }
  const isArray = Array.isArray(v);
  const entries = isArray ? v.map((x, i) => [i, x]) : Object.entries(v);
  if (entries.length === 0) return h('span', { class: 'j-punct' }, isArray ? '[]' : '{}');
  const list = h('ul', {}, entries.map(([k, x]) => h('li', {},
    isArray ? null : h('span', { class: 'j-key' }, JSON.stringify(k)),
    isArray ? null : h('span', { class: 'j-punct' }, ': '),
    node(x, level + 1, fold, depth))));
  const open = entries.length <= fold && level < depth;
  const what = isArray ? `[ ${entries.length} item${entries.length === 1 ? '' : 's'} ]` : `{ ${entries.length} member${entries.length === 1 ? '' : 's'} }`;
  return h('details', { open }, h('summary', { class: 'j-punct' }, what), list);
}

// problemView shows a failed answer: its status and title, its detail and
// its errors by path.
export function problemView(err) {
  const p = err && err.problem ? err.problem : { title: 'Error', detail: String(err && err.message ? err.message : err) };
  const status = err && err.status ? err.status : p.status;
  return h('div', { class: 'problem', role: 'alert' },
    h('p', { class: 'problem-title' }, status ? `${status} ${p.title || ''}` : (p.title || 'Error')),
    p.detail ? h('p', { class: 'problem-detail' }, p.detail) : null,
    errorsTable(p.errors),
    p.attempts ? h('p', {}, `Attempts made: ${p.attempts}`) : null);
}

// errorsTable lists field errors: a path and a message each.
export function errorsTable(errors) {
  if (!Array.isArray(errors) || errors.length === 0) return null;
  return h('table', { class: 'errors' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Path'), h('th', { scope: 'col' }, 'Error'))),
    h('tbody', {}, errors.map((e) => h('tr', {}, h('td', {}, h('code', {}, e.path || '(root)')), h('td', {}, e.message)))));
}

// field wraps a control with its label (and a hint).
export function field(label, control, hint) {
  if (!control.id) control.id = id('f');
  return h('div', { class: 'field' },
    h('label', { for: control.id }, label),
    control,
    hint ? h('p', { class: 'hint' }, hint) : null);
}

// badge is a short status word, styled by its value.
export function badge(text, kind = text) {
  return h('span', { class: `badge badge-${String(kind).replace(/[^a-z_]/gi, '')}` }, text);
}

// contentText is the text of MCP content blocks: text blocks as they are,
// other blocks named by their type.
export function contentText(content) {
  const blocks = Array.isArray(content) ? content : (content ? [content] : []);
  return blocks.map((b) => (b.type === 'text' ? b.text : `[${b.type}]`)).join('\n');
}
