// /ws/events (docs/api.md): one connection for the whole page. Listeners
// get every event; a dropped connection comes back with since= so nothing
// is missed, or with a fresh snapshot when the server's buffer has moved on.
import { wsUrl } from './api.js';

const listeners = new Set();
let ws = null;
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

function connect() {
  const q = lastSeq === null ? '' : `?since=${lastSeq}`;
  ws = new WebSocket(wsUrl(`ws/events${q}`), 'simfarm.events.v1');
  ws.onopen = () => { retryMs = 500; statusCb('live'); };
  ws.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch { return; }
    if (typeof e.seq === 'number') lastSeq = e.seq;
    for (const fn of listeners) {
      try { fn(e); } catch (err) { console.error(err); }
    }
  };
  ws.onclose = () => {
    statusCb('reconnecting…');
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 10000);
  };
}

export function start() {
  if (ws === null) connect();
}
