// A small element builder: h('td', { class: 'num' }, '12'). Text is always
// set as text, never parsed as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' || k === 'checked') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A progress bar with its number for screen readers.
export function bar(pct, label, big = false) {
  const p = Math.max(0, Math.min(100, pct));
  return h('div', {
    class: big ? 'bar big' : 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100,
    'aria-valuenow': p.toFixed(1), 'aria-label': label,
  }, h('span', { style: `width:${p}%` }));
}

export function stateBadge(state) {
  return h('span', { class: `state state-${state}` }, state);
}

export function message(text, error = false) {
  return h('p', { class: error ? 'msg error' : 'msg', role: error ? 'alert' : 'status' }, text);
}

// A table inside a scrolling wrapper (wide tables on phones); id names the
// wrapper.
export function table(caption, head, rows, id) {
  return h('div', { class: 'table-wrap', id }, h('table', {},
    caption ? h('caption', { class: 'muted' }, caption) : null,
    h('thead', {}, h('tr', {}, head.map((c) => (typeof c === 'string'
      ? h('th', { scope: 'col' }, c) : h('th', { scope: 'col', class: c.class }, c.text))))),
    h('tbody', {}, rows)));
}

// Opens the token box in the header (a call needed a token: a 401).
export function askToken() {
  const box = document.getElementById('token-box');
  box.open = true;
  document.getElementById('token-input').focus();
}
