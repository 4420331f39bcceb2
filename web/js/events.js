// /ws/events (docs/api.md): one connection for the whole page. Listeners
// get every event; a dropped connection comes back with since= so nothing
// is missed, or with a fresh snapshot when the server's buffer has moved on.
// With an API token, each connection takes a ticket first (POST
// api/events/ticket), which a coordinator run with --private asks for.
import { api, token, wsUrl } from './api.js';

const listeners = new Set();
let ws = null; // the connection, open or being opened; an older one is ignored
let attempt = 0; // bumped by each connect(): one still waiting for its ticket then gives up
let lastSeq = null;
let retryMs = 500;
let statusCb = () => {};

export function onEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function onStatus(fn) {
  statusCb = fn;
}

// A private farm refused this page's reads: no more tries until a token
// comes (reconnect()).
let held = false;
let timer = null;
window.addEventListener('simfarm:token-needed', () => {
  held = true;
  if (ws === null || ws.readyState !== WebSocket.OPEN) statusCb('needs an API token');
});

// Opens the connection. At most one attempt is live: a later connect()
// (reconnect() with a new token) makes one still waiting for its ticket give
// up, and only the current socket's events and end count.
async function connect() {
  const mine = ++attempt;
  clearTimeout(timer);
  timer = null;
  if (held) {
    statusCb('needs an API token');
    return;
  }
  const q = new URLSearchParams();
  if (lastSeq !== null) q.set('since', String(lastSeq));
  if (token()) {
    try { q.set('ticket', (await api('POST', 'api/events/ticket')).ticket); } catch { /* try without */ }
    if (mine !== attempt) return;
  }
  const qs = q.toString();
  const sock = new WebSocket(wsUrl(`ws/events${qs ? `?${qs}` : ''}`), 'simfarm.events.v1');
  ws = sock;
  sock.onopen = () => {
    if (sock !== ws) return;
    retryMs = 500;
    statusCb('live');
  };
  sock.onmessage = (m) => {
    if (sock !== ws) return;
    let e;
    try { e = JSON.parse(m.data); } catch { return; }
    if (typeof e.seq === 'number') lastSeq = e.seq;
    for (const fn of listeners) {
      try { fn(e); } catch (err) { console.error(err); }
    }
  };
  sock.onclose = () => {
    if (sock !== ws) return;
    statusCb('reconnecting…');
    timer = setTimeout(() => { timer = null; connect(); }, retryMs);
    retryMs = Math.min(retryMs * 2, 10000);
  };
}

export function start() {
  if (ws === null) connect();
}

// Opens the connection again, with the token now kept: the one open (or
// being opened, or waiting for its ticket or a retry) is dropped.
export function reconnect() {
  held = false;
  retryMs = 500;
  const old = ws;
  ws = null;
  old?.close(); // no longer the connection: its close is ignored
  connect();
}
