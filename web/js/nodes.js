// Nodes: the fleet's totals, then each node online, offline, revoked or
// quarantined, with its checks passed and failed, its
// tier, backends and devices, cores, items/s, chunks done, its work in all
// sessions and last heartbeat. GET /api/nodes every 5 s (a node's counters are
// not events), and when a node comes or goes, at most once a second. A fleet
// of thousands shows ROWS rows at a time (online first), more on request,
// narrowed by status or by text in the id, name, owner, tier or version.
// A node's items/s is its session's last measured rate, which the API keeps
// while the node computes nothing: one with no chunk in flight is idle and
// counts 0. The cores are those it lends (max_parallel: a browser tab's
// slider) of its machine's. #/nodes/ID is one node's page.
import { api } from './api.js';
import { onEvent } from './events.js';
import { clear, h, message, table } from './dom.js';
import * as fmt from './format.js';

const REFRESH_MS = 5000;
const EVENT_GAP_MS = 1000;
const ROWS = 200;

export function nodesView(root, query = new URLSearchParams()) {
  const totals = h('div', { class: 'cards', id: 'fleet', 'aria-label': 'fleet totals', role: 'group' });
  const body = h('div');
  const status = h('div', { 'aria-live': 'polite' });
  const offlineWhy = new Map(); // node id -> reason from node.offline
  let nodes = [];
  let timer = null;
  let live = true, loading = false, again = false, lastLoad = 0;
  let shown = ROWS;

  const showSel = h('select', { id: 'n-show', name: 'show' },
    h('option', { value: '' }, 'all'), h('option', { value: 'online' }, 'online'),
    h('option', { value: 'offline' }, 'offline'), h('option', { value: 'quarantined' }, 'quarantined'));
  const findIn = h('input', { id: 'n-find', name: 'find', type: 'search', autocomplete: 'off',
    placeholder: 'id, name, owner, tier, version' });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter nodes',
    onsubmit: (e) => { e.preventDefault(); narrow(); } },
  h('div', {}, h('label', { for: 'n-show' }, 'Status'), showSel),
  h('div', {}, h('label', { for: 'n-find' }, 'Find'), findIn));
  // #/nodes?find=TEXT&show=STATUS (a job page links its quarantined nodes)
  if (['online', 'offline', 'quarantined'].includes(query.get('show'))) showSel.value = query.get('show');
  if (query.get('find')) findIn.value = query.get('find');
  showSel.addEventListener('change', narrow);
  findIn.addEventListener('input', narrow);

  root.append(h('h1', {}, 'Nodes'), totals, filters, status, body);

  function narrow() {
    shown = ROWS;
    render();
  }

  function matches(n) {
    if (showSel.value === 'online' && !n.online) return false;
    if (showSel.value === 'offline' && n.online) return false;
    if (showSel.value === 'quarantined' && !n.quarantined_at) return false;
    const t = findIn.value.trim().toLowerCase();
    if (t === '') return true;
    return [String(n.id), n.name, n.owner, n.tier, n.version].some((v) => v && v.toLowerCase().includes(t));
  }


  function render() {
    const on = nodes.filter((n) => n.online);
    const sum = (f) => on.reduce((a, n) => a + (f(n) || 0), 0);
    clear(totals,
      card('online', `${on.length} of ${nodes.length}`),
      card('cores lent', fmt.int(sum(lent)), 'f-cores', `of ${fmt.int(sum((n) => n.capabilities?.cores))} cores in the machines online`),
      card('items/s', fmt.short(sum(rateNow)), 'f-rate'),
      card('chunks in flight', fmt.int(sum((n) => n.in_flight))),
      card('chunks done', fmt.int(sum((n) => n.chunks_done))),
      card('items done', fmt.short(sum((n) => n.items_done))),
      card('items in all', fmt.short(nodes.reduce((a, n) => a + (n.items_total || 0), 0))),
      nodes.some((n) => n.quarantined_at) ? card('quarantined', fmt.int(nodes.filter((n) => n.quarantined_at).length)) : null);
    if (nodes.length === 0) {
      clear(body, message('No nodes have joined yet. Start one with simfarm node, or open the contribute page.'));
      return;
    }
    const now = Date.now();
    const match = nodes.filter(matches);
    if (match.length === 0) {
      clear(body, message('No nodes match.'));
      return;
    }
    const rows = match.slice(0, shown);
    const more = match.length - rows.length;
    clear(body, h('p', { class: 'muted', id: 'n-count' },
      more > 0 ? `${fmt.int(rows.length)} shown of ${fmt.int(match.length)} matching (${fmt.int(nodes.length)} in all)`
        : match.length === nodes.length ? `${fmt.int(nodes.length)} nodes`
          : `${fmt.int(match.length)} of ${fmt.int(nodes.length)} nodes match`),
    table(null, [{ text: 'id', class: 'num' }, 'name', 'status', 'owner', 'tier', 'backends and devices',
      { text: 'cores lent / machine', class: 'num' }, { text: 'items/s', class: 'num' }, { text: 'chunks done', class: 'num' },
      { text: 'in flight / at once', class: 'num' }, { text: 'items in all', class: 'num' }, 'last heartbeat', 'version',
      { text: 'checks passed / failed', class: 'num' }],
    rows.map((n) => h('tr', { dataset: { node: n.id } },
      h('td', { class: 'num' }, h('a', { href: `#/nodes/${n.id}` }, n.id)),
      h('td', {}, h('a', { href: `#/nodes/${n.id}` }, n.name || `node ${n.id}`)),
      h('td', {}, n.quarantined_at ? h('span', { class: 'quarantined', title: `quarantined ${fmt.when(n.quarantined_at)}: `
        + 'a check proved a result of it wrong; its key is revoked and its results retracted' }, 'quarantined')
        : n.online ? h('span', { class: 'online' }, 'online')
          : h('span', { class: 'offline' }, n.revoked_at ? 'revoked' : `offline${offlineWhy.has(n.id) ? ` (${offlineWhy.get(n.id)})` : ''}`)),
      h('td', {}, n.owner ?? '–'),
      h('td', {}, n.tier),
      h('td', {}, devices(n)),
      h('td', { class: 'num cores', title: `lends ${fmt.int(lent(n))} of its machine's ${fmt.int(n.capabilities?.cores)} cores` },
        coresText(n)),
      h('td', { class: 'num rate' }, rateText(n)),
      h('td', { class: 'num' }, n.online ? fmt.int(n.chunks_done) : '–'),
      n.online ? h('td', { class: 'num', title: `${fmt.int(n.in_flight)} in flight, ${fmt.int(n.slots)} at most at once` },
        `${fmt.int(n.in_flight)} / ${fmt.int(n.slots)}`) : h('td', { class: 'num' }, '–'),
      h('td', { class: 'num total', title: `${fmt.int(n.items_total)} items in ${fmt.int(n.chunks_total)} chunks` },
        fmt.short(n.items_total)),
      h('td', {}, n.online ? fmt.ago(n.last_seen_ms, now) : fmt.when(n.last_seen)),
      h('td', {}, n.version ?? '–'),
      h('td', { class: 'num checks' }, (n.checks_passed || n.checks_failed)
        ? `${fmt.int(n.checks_passed)} / ${fmt.int(n.checks_failed)}` : '–')))),
    more > 0 ? h('button', { type: 'button', class: 'secondary', id: 'n-more',
      onclick: () => { shown += ROWS; render(); } }, `Show ${fmt.int(Math.min(ROWS, more))} more`) : null);
  }

  // One listing at a time; one asked for meanwhile follows it.
  async function load() {
    clearTimeout(timer);
    if (!live) return;
    if (loading) { again = true; return; }
    loading = true;
    lastLoad = Date.now();
    try {
      nodes = await api('GET', 'api/nodes');
      clear(status);
      render();
    } catch (e) {
      clear(status, message(`Cannot list nodes: ${e.message}`, true));
    }
    loading = false;
    if (!live) return;
    if (again) { again = false; soon(); } else timer = setTimeout(load, REFRESH_MS);
  }

  // A node came or went: the listing again, but not sooner than
  // EVENT_GAP_MS after the last (a fleet that churns sends many).
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(load, Math.max(0, lastLoad + EVENT_GAP_MS - Date.now()));
  }

  const off = onEvent((e) => {
    if (e.type === 'node.offline') offlineWhy.set(e.node, e.reason);
    if (e.type === 'node.online' || e.type === 'node.offline') soon();
  });
  load();
  return { stop() { live = false; off(); clearTimeout(timer); } };
}

function card(k, v, id, title) {
  return h('div', { class: 'card', title }, h('div', { class: 'k' }, k), h('div', { class: 'v', id }, v));
}

function devices(n) {
  const b = n.capabilities?.backends ?? [];
  if (b.length === 0) return '–';
  return b.map((d) => `${d.kind}${d.device ? `: ${d.device}` : ''}${d.memory ? ` (${fmt.bytes(d.memory)})` : ''}`).join('; ');
}

// The cores a node online lends: the chunks it computes at once
// (max_parallel, as its hello or a later heartbeat said); 0 offline.
function lent(n) {
  return n.online ? (n.max_parallel ?? n.capabilities?.max_parallel ?? 0) : 0;
}

function coresText(n) {
  const machine = fmt.int(n.capabilities?.cores);
  return n.online ? `${fmt.int(lent(n))} / ${machine}` : `– / ${machine}`;
}

// Its items/s now: the session's measured rate while it holds chunks, 0
// while it holds none (the API's items_per_s stays at its last measure).
function rateNow(n) {
  return n.online && n.in_flight > 0 ? (n.items_per_s || 0) : 0;
}

function rateText(n) {
  if (!n.online) return '–';
  return n.in_flight > 0 ? fmt.short(n.items_per_s) : 'idle';
}

// One node: GET api/nodes/ID every 5 s while the page is open, and when it
// comes or goes.
export function nodeView(root, id) {
  const head = h('div');
  const body = h('div');
  const status = h('div', { 'aria-live': 'polite' });
  root.append(head, status, body);
  let timer = null, live = true, why = null;

  function fact(k, v, idName) {
    return [h('dt', {}, k), h('dd', { id: idName }, v)];
  }

  function render(n) {
    const caps = n.capabilities ?? {};
    const state = n.quarantined_at ? h('span', { class: 'quarantined' }, 'quarantined')
      : n.online ? h('span', { class: 'online' }, 'online')
        : h('span', { class: 'offline' }, n.revoked_at ? 'revoked' : `offline${why ? ` (${why})` : ''}`);
    clear(head, h('p', {}, h('a', { href: '#/nodes' }, '← all nodes')),
      h('h1', {}, `Node ${n.id}`, n.name ? `: ${n.name}` : ''),
      h('div', { class: 'row' }, 'Status: ', h('span', { id: 'node-status' }, state)));
    const retracted = n.retracted ?? [];
    clear(body,
      h('div', { class: 'cards', id: 'node-cards' },
        card('items/s', rateText(n), 'node-rate'),
        card('cores lent / machine', coresText(n), 'node-cores'),
        card('in flight / at once', n.online ? `${fmt.int(n.in_flight)} / ${fmt.int(n.slots)}` : '–', 'node-inflight'),
        card('chunks this session', n.online ? fmt.int(n.chunks_done) : '–', 'node-chunks-session'),
        card('items this session', n.online ? fmt.int(n.items_done) : '–', 'node-items-session'),
        card('chunks in all', fmt.int(n.chunks_total), 'node-chunks-total'),
        card('items in all', fmt.int(n.items_total), 'node-items-total'),
        card('checks passed / failed', `${fmt.int(n.checks_passed)} / ${fmt.int(n.checks_failed)}`, 'node-checks')),
      h('h2', {}, 'The node'),
      h('dl', { class: 'facts', id: 'node-facts' },
        fact('owner', n.owner ?? '–'), fact('tier', n.tier ?? '–', 'node-tier'),
        fact('backends and devices', devices(n), 'node-devices'),
        fact('os, arch', [caps.os, caps.arch].filter(Boolean).join(', ') || '–'),
        caps.browser ? fact('browser', caps.browser) : null,
        fact('version', n.version ?? '–', 'node-version'),
        fact('program checksum', caps.checksum ?? '–'),
        fact('enrolled', fmt.when(n.created_at)),
        fact('session since', n.online ? fmt.when(n.connected_ms ? new Date(n.connected_ms).toISOString() : null) : '–'),
        fact('last seen', n.online ? fmt.ago(n.last_seen_ms) : fmt.when(n.last_seen)),
        n.malformed ? fact('malformed results this session', fmt.int(n.malformed)) : null,
        n.revoked_at ? fact('revoked', fmt.when(n.revoked_at)) : null,
        n.quarantined_at ? fact('quarantined', fmt.when(n.quarantined_at)) : null),
      retracted.length ? [h('h2', {}, 'Results retracted'),
        table(null, [{ text: 'job', class: 'num' }, { text: 'variant', class: 'num' }, { text: 'first item', class: 'num' },
          { text: 'items', class: 'num' }], retracted.map((r) => h('tr', {},
          h('td', { class: 'num' }, h('a', { href: `#/jobs/${r.job}` }, r.job)), h('td', { class: 'num' }, r.variant),
          h('td', { class: 'num' }, fmt.int(r.first_item)), h('td', { class: 'num' }, fmt.int(r.item_count)))))] : null,
      h('p', { class: 'note' }, 'The jobs a node has worked on are listed on each job\'s page (Contribution by node).'));
  }

  async function load() {
    clearTimeout(timer);
    if (!live) return;
    try {
      const n = await api('GET', `api/nodes/${id}`);
      if (!live) return;
      clear(status);
      render(n);
    } catch (e) {
      if (!live) return;
      if (e.status === 404) {
        clear(head, h('h1', {}, `Node ${id}`));
        clear(status, message('No such node.', true));
        return;
      }
      clear(status, message(`Cannot read the node: ${e.message}`, true));
    }
    timer = setTimeout(load, REFRESH_MS);
  }

  const off = onEvent((e) => {
    if ((e.type === 'node.online' || e.type === 'node.offline') && e.node === id) {
      why = e.type === 'node.offline' ? e.reason : null;
      load();
    }
  });
  load();
  return { stop() { live = false; off(); clearTimeout(timer); } };
}
