// A real coordinator for tests: `simfarm serve` on a free port with an
// admin API token, and a small HTTP helper that sends it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { build } from './proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');

// Starts `simfarm serve`; resolves once it listens and the database is up.
// `extra` are more arguments for serve. The admin token is srv.token. With
// `--tls-cert`, `ca` is the PEM file that call() trusts for it. `bin` and
// `cwd`: another simfarm binary (an installed one), run in another directory.
// `tokenFile`: the --token-file to use (the caller's to remove) instead of
// one in a temporary directory. `env`: more environment variables for it.
export function serve(db, { extra = [], ca, timeoutMs = 30000, bin = simfarm, cwd, tokenFile: given, env } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-serve-'));
  const tokenFile = given ?? path.join(dir, 'token');
  const child = spawn(bin, ['serve', '--db', db, '--listen', '127.0.0.1:0', '--token-file', tokenFile, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd, env: { ...process.env, ...env } });
  let out = '', err = '';
  const lines = new Set();
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) if (w.match()) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
  };
  child.stdout.on('data', (d) => { out += d; check(); });
  child.stderr.on('data', (d) => { err += d; for (const l of d.toString().split('\n')) lines.add(l); check(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  // Resolves when match() holds, rejects at the deadline or if it exits.
  const until = (match, what) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} not seen in ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
    const w = { match, resolve: () => { clearTimeout(timer); resolve(); } };
    waiters.push(w);
    exited.then((e) => { clearTimeout(timer); reject(new Error(`serve exited (${e.code ?? e.signal}) waiting for ${what}:\n${err}`)); });
    check();
  });
  return (async () => {
    await until(() => /listening on https?:\/\/127\.0\.0\.1:\d+/.test(out), 'listening');
    await until(() => err.includes('simfarm: database up'), 'database up');
    const [, scheme, p] = out.match(/listening on (https?):\/\/127\.0\.0\.1:(\d+)/);
    const port = Number(p);
    return {
      url: `${scheme}://127.0.0.1:${port}`,
      port,
      token: fs.readFileSync(tokenFile, 'utf8').trim(),
      tokenFile,
      ca,
      pid: child.pid,
      stdout: () => out,
      stderr: () => err,
      exited, // resolves to { code, signal } when it exits by itself
      until,
      async stop() {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
        const e = await exited;
        clearTimeout(timer);
        fs.rmSync(dir, { recursive: true, force: true });
        return e;
      },
    };
  })();
}

// An API call; sends srv.token unless `token` says otherwise (null: none).
// Over https it trusts srv.ca (node's fetch takes no CA of its own).
export async function call(srv, method, p, body, token = srv.token) {
  const headers = body === undefined ? {} : { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const data = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
  const { status, text } = await (srv.ca ? tlsRequest : plainRequest)(srv, method, p, headers, data);
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status, text, json };
}

// /metrics as { 'name{labels}': value }.
export async function metrics(srv) {
  const r = await call(srv, 'GET', '/metrics', undefined, null);
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.text}`);
  const m = {};
  for (const l of r.text.split('\n')) {
    if (l === '' || l.startsWith('#')) continue;
    const i = l.lastIndexOf(' ');
    m[l.slice(0, i)] = Number(l.slice(i + 1));
  }
  return m;
}

async function plainRequest(srv, method, p, headers, data) {
  const res = await fetch(srv.url + p, { method, headers, body: data, signal: AbortSignal.timeout(15000) });
  return { status: res.status, text: await res.text() };
}

function tlsRequest(srv, method, p, headers, data) {
  return new Promise((resolve, reject) => {
    const req = https.request(srv.url + p, { method, headers, ca: fs.readFileSync(srv.ca), timeout: 15000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer in 15 s`)));
    req.on('error', reject);
    req.end(data);
  });
}

// Follows /ws/events in a child node (node 20 has WebSocket behind a
// flag): events (parsed) arrive in t.events; t.until(pred) waits for one.
export function tailEvents(srv, query = '', { timeoutMs = 60000 } = {}) {
  const url = `ws://127.0.0.1:${srv.port}/ws/events${query}`;
  const code = `const ws = new WebSocket(${JSON.stringify(url)}, 'simfarm.events.v1');
    ws.onmessage = (e) => console.log(e.data);
    ws.onerror = () => { console.error('websocket error'); process.exit(3); };
    ws.onclose = () => process.exit(0);`;
  const child = spawn(process.execPath, ['--experimental-websocket', '--no-warnings', '-e', code],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const t = { events: [], err: '' };
  const waiters = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      t.events.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
    for (const w of [...waiters]) w();
  });
  child.stderr.on('data', (d) => { t.err += d; });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  t.until = (pred, what) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not seen in ${timeoutMs} ms (${t.events.length} events) ${t.err}`)), timeoutMs);
    const w = () => {
      const e = t.events.find(pred);
      if (e) { clearTimeout(timer); waiters.splice(waiters.indexOf(w), 1); resolve(e); }
    };
    waiters.push(w);
    w();
  });
  t.exited = exited; // resolves to its exit code: 3 when the connection failed
  t.close = async () => { child.kill('SIGTERM'); await exited; };
  return t;
}
