// Nodes: the fleet's totals, then each node online or offline with its
// tier, backends and devices, cores, items/s, chunks done, its work in all
// sessions and last heartbeat. GET /api/nodes every 5 s (a node's counters are not events),
// and at once when a node comes or goes.
import { api } from './api.js';
import { onEvent } from './events.js';
import { clear, h, message, table } from './dom.js';
import * as fmt from './format.js';

const REFRESH_MS = 5000;

export function nodesView(root) {
  const totals = h('div', { class: 'cards', id: 'fleet', 'aria-label': 'fleet totals', role: 'group' });
  const body = h('div');
  const status = h('div', { 'aria-live': 'polite' });
  const offlineWhy = new Map(); // node id -> reason from node.offline
  let nodes = [];
  let timer = null;

  root.append(h('h1', {}, 'Nodes'), totals, status, body);

  function card(k, v) {
    return h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, v));
  }

  function devices(n) {
    const b = n.capabilities?.backends ?? [];
    if (b.length === 0) return '–';
    return b.map((d) => `${d.kind}${d.device ? `: ${d.device}` : ''}${d.memory ? ` (${fmt.bytes(d.memory)})` : ''}`).join('; ');
  }

  function render() {
    const on = nodes.filter((n) => n.online);
    const sum = (f) => on.reduce((a, n) => a + (f(n) || 0), 0);
    clear(totals,
      card('online', `${on.length} of ${nodes.length}`),
      card('cores online', fmt.int(sum((n) => n.capabilities?.cores))),
      card('items/s', fmt.short(sum((n) => n.items_per_s))),
      card('chunks in flight', fmt.int(sum((n) => n.in_flight))),
      card('chunks done', fmt.int(sum((n) => n.chunks_done))),
      card('items done', fmt.short(sum((n) => n.items_done))),
      card('items in all', fmt.short(nodes.reduce((a, n) => a + (n.items_total || 0), 0))));
    if (nodes.length === 0) {
      clear(body, message('No nodes have joined yet. Start one with simfarm node, or open the contribute page.'));
      return;
    }
    const now = Date.now();
    clear(body, table(null, [{ text: 'id', class: 'num' }, 'name', 'status', 'owner', 'tier', 'backends and devices',
      { text: 'cores', class: 'num' }, { text: 'items/s', class: 'num' }, { text: 'chunks done', class: 'num' },
      { text: 'in flight', class: 'num' }, { text: 'items in all', class: 'num' }, 'last heartbeat', 'version'],
    nodes.map((n) => h('tr', { dataset: { node: n.id } },
      h('td', { class: 'num' }, n.id),
      h('td', {}, n.name || '–'),
      h('td', {}, n.online ? h('span', { class: 'online' }, 'online')
        : h('span', { class: 'offline' }, n.revoked_at ? 'revoked' : `offline${offlineWhy.has(n.id) ? ` (${offlineWhy.get(n.id)})` : ''}`)),
      h('td', {}, n.owner ?? '–'),
      h('td', {}, n.tier),
      h('td', {}, devices(n)),
      h('td', { class: 'num' }, fmt.int(n.capabilities?.cores)),
      h('td', { class: 'num' }, n.online ? fmt.short(n.items_per_s) : '–'),
      h('td', { class: 'num' }, n.online ? fmt.int(n.chunks_done) : '–'),
      h('td', { class: 'num' }, n.online ? fmt.int(n.in_flight) : '–'),
      h('td', { class: 'num total', title: `${fmt.int(n.items_total)} items in ${fmt.int(n.chunks_total)} chunks` },
        fmt.short(n.items_total)),
      h('td', {}, n.online ? fmt.ago(n.last_seen_ms, now) : fmt.when(n.last_seen)),
      h('td', {}, n.version ?? '–')))));
  }

  async function load() {
    clearTimeout(timer);
    try {
      nodes = await api('GET', 'api/nodes');
      clear(status);
      render();
    } catch (e) {
      clear(status, message(`Cannot list nodes: ${e.message}`, true));
    }
    timer = setTimeout(load, REFRESH_MS);
  }

  const off = onEvent((e) => {
    if (e.type === 'node.offline') offlineWhy.set(e.node, e.reason);
    if (e.type === 'node.online' || e.type === 'node.offline') load();
  });
  load();
  return { stop() { off(); clearTimeout(timer); } };
}
