// The coordinator's HTTP API (docs/api.md) from the dashboard: JSON in and
// out, the API token kept in this browser for the calls that need one.
const TOKEN_KEY = 'simfarm.token';

export function token() {
  try { return localStorage.getItem(TOKEN_KEY) ?? ''; } catch { return ''; }
}

export function setToken(t) {
  try {
    if (t) localStorage.setItem(TOKEN_KEY, t);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lasts this page only */ }
}

// An error answer: status, the server's message and the field at fault.
export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field ?? null;
  }
}

// The coordinator's address as this page sees it, without a trailing slash:
// the page's directory, so that behind a proxy that serves the coordinator
// under a path prefix (https://host/farm/) every address keeps the prefix.
export function coordinatorUrl() {
  return new URL('.', document.baseURI).href.replace(/\/$/, '');
}

// The WebSocket address of the coordinator's path p ('ws/events').
export function wsUrl(p) {
  const u = new URL(p, document.baseURI);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

// Calls the API at path, relative to the page ('api/jobs'); resolves to the
// parsed JSON answer, rejects with ApiError. The token goes along when there
// is one (reads need none, but on a coordinator run with --private). A 401
// to a read also fires 'simfarm:token-needed' on window, with the server's
// message.
export async function api(method, path, body) {
  const headers = {};
  const t = token();
  if (t) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, `cannot reach the coordinator: ${e.message}`);
  }
  const text = await res.text();
  let json;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!res.ok) {
    const msg = json?.error ?? `${res.status} ${res.statusText}`;
    if (res.status === 401 && method === 'GET') window.dispatchEvent(new CustomEvent('simfarm:token-needed', { detail: msg }));
    throw new ApiError(res.status, msg, json?.field);
  }
  return json;
}
