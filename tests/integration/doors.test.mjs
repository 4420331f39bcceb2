// The farm's doors: who may open /ws/node (the Origin of a browser page),
// revoking a node (its session closed at once, its key refused after,
// whatever claim token it brings), and `simfarm up`'s enrolment, closed
// unless --allow-public-nodes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top, stop } from '../lib/proc.mjs';
import { call, serve } from '../lib/coord.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-doors-'));
fs.chmodSync(tmp, 0o755);

// A child process whose output can be waited on, with a deadline.
function proc(args, { timeoutMs = 60000, env = process.env } = {}) {
  const child = spawn(simfarm, args, { stdio: ['ignore', 'pipe', 'pipe'], env, cwd: top });
  const p = { out: '', err: '', child };
  p.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdout.on('data', (d) => { p.out += d; });
  child.stderr.on('data', (d) => { p.err += d; });
  p.until = (re, what, ms = timeoutMs) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not in ${ms} ms\n${p.out}\n${p.err}`)), ms);
    const check = () => { const m = (p.out + p.err).match(re); if (m) { clearTimeout(timer); resolve(m); return true; } return false; };
    if (check()) return;
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    p.exited.then((e) => { clearTimeout(timer); if (!check()) reject(new Error(`${what}: exited ${e.code ?? e.signal}\n${p.out}\n${p.err}`)); });
  });
  // The exit, within ms.
  p.exitWithin = (ms, what) => Promise.race([p.exited, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: still running after ${ms} ms\n${p.out}\n${p.err}`)), ms))]);
  return p;
}

// A WebSocket upgrade of path on port with these headers: resolves to the
// status answered (101 when upgraded) and the body of a refusal.
function upgrade(port, headers, urlPath = '/ws/node') {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, path: urlPath, timeout: 10000,
      headers: {
        connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13',
        'sec-websocket-key': crypto.randomBytes(16).toString('base64'),
        'sec-websocket-protocol': urlPath === '/ws/node' ? 'simfarm.node.v1' : 'simfarm.events.v1',
        ...headers,
      },
    });
    req.on('upgrade', (res, socket) => { socket.destroy(); resolve({ status: res.statusCode, body: '' }); });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error('no answer to the upgrade in 10 s')));
    req.on('error', reject);
    req.end();
  });
}

let pg, srv;
before(async () => {
  pg = await startPostgres();
  const db = await createDatabase(pg, 'doors');
  srv = await serve(db, { extra: ['--node-origin', 'https://Farm.Example', '--node-origin', 'http://127.0.0.1:9'] });
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('/ws/node: a foreign Origin is refused 403 before the upgrade; none, the own and a listed one are taken', async () => {
  const own = `http://127.0.0.1:${srv.port}`;
  const cases = [
    [{}, 101, 'no Origin (a native node)'],
    [{ origin: own }, 101, 'the coordinator\'s own origin'],
    [{ origin: `HTTP://127.0.0.1:${srv.port}` }, 101, 'the own origin, its scheme in capitals'],
    [{ origin: 'https://farm.example' }, 101, 'a --node-origin'],
    [{ origin: 'https://farm.example:443' }, 101, 'a --node-origin with its default port written'],
    [{ origin: 'http://127.0.0.1:9' }, 101, 'another --node-origin'],
    [{ origin: 'https://evil.example' }, 403, 'a foreign origin'],
    [{ origin: 'https://farm.example:8443' }, 403, 'a listed host on another port'],
    [{ origin: 'http://farm.example' }, 403, 'a listed host under the other scheme'],
    [{ origin: `http://127.0.0.1:${srv.port + 1}` }, 403, 'the own host on another port'],
    [{ origin: `http://localhost:${srv.port}` }, 403, 'another name than the Host the request came to'],
    [{ origin: 'null' }, 403, 'a sandboxed page'],
    [{ origin: `${own}/contribute` }, 403, 'not an origin: a path'],
    [{ host: `farm2.example:${srv.port}`, origin: `https://farm2.example:${srv.port}` }, 101,
      'the Host the request came to (behind a proxy that keeps it), under either scheme'],
    [{ host: 'farm3.example', origin: 'https://farm3.example' }, 101, 'a Host without a port: the scheme\'s'],
    [{ host: 'farm3.example', origin: 'https://farm3.example:8443' }, 403, 'a Host without a port, an Origin with one'],
  ];
  for (const [headers, want, what] of cases) {
    const r = await upgrade(srv.port, headers);
    assert.equal(r.status, want, `${what}: ${JSON.stringify(headers)} ${r.body}`);
    if (want === 403) assert.match(r.body, /may not run a node here/, what);
  }
  await srv.until(() => /\/ws\/node: refused a connection from 127\.0\.0\.1 with Origin https:\/\/evil\.example/
    .test(srv.stderr()), 'the refusal logged');
  // only /ws/node is guarded: the live events are for any page
  assert.equal((await upgrade(srv.port, { origin: 'https://evil.example' }, '/ws/events')).status, 101);
});

test('/ws/node: the native node (which sends Origin: http://HOST) connects', async () => {
  const node = proc(['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'native.key'),
    '--cores', '1']);
  try {
    // no claim token and no open enrolment: past the Origin check, refused by the enrolment
    await node.until(/not enrolled/, 'told it is not enrolled');
    assert.equal((await node.exitWithin(10000, 'the unenrolled node')).code, 3);
  } finally {
    await stop(node);
  }
});

// A claim token of the admin's, for tier own.
async function claimToken() {
  const r = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'own' });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function nodeRow(id) {
  const r = await call(srv, 'GET', `/api/nodes/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

test('a revoked node\'s session closes at once; its key is refused after, with or without a new claim token', async () => {
  const key = path.join(tmp, 'revoked.key');
  const server = `ws://127.0.0.1:${srv.port}/ws/node`;
  const first = await claimToken();
  const node = proc(['node', '--server', server, '--key', key, '--cores', '1', '--claim-token', first.token]);
  let id;
  try {
    id = Number((await node.until(/connected to \S+ as node (\d+)/, 'node connected'))[1]);
    await eventually(async () => (await nodeRow(id)).online === true, 'the node online', 10000);

    // an admin's only: no token 401, another owner's token 403, the node untouched
    assert.equal((await call(srv, 'POST', `/api/nodes/${id}/revoke`, undefined, null)).status, 401);
    const alice = await call(srv, 'POST', '/api/tokens', { kind: 'api', owner: 'alice' });
    assert.equal(alice.status, 201, alice.text);
    const refused = await call(srv, 'POST', `/api/nodes/${id}/revoke`, undefined, alice.json.token);
    assert.equal(refused.status, 403, refused.text);
    assert.equal((await call(srv, 'GET', `/api/nodes/${id}/revoke`)).status, 405);
    assert.equal((await call(srv, 'POST', '/api/nodes/999999/revoke')).status, 404);
    assert.equal((await call(srv, 'POST', `/api/nodes/${id}/nothing`)).status, 404);
    const still = await nodeRow(id);
    assert.equal(still.online, true);
    assert.equal(still.revoked_at, null);

    const t0 = Date.now();
    const r = await call(srv, 'POST', `/api/nodes/${id}/revoke`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.id, id);
    assert.ok(r.json.revoked_at, 'revoked_at is set');
    assert.equal(r.json.online, false, 'its session is closed already');
    // told at once, long before the 15 s a silent node is given
    await node.until(/this node was revoked/, 'the node told', 5000);
    assert.equal((await node.exitWithin(5000, 'the revoked node')).code, 3);
    assert.ok(Date.now() - t0 < 5000, `closed in ${Date.now() - t0} ms`);
    await srv.until(() => new RegExp(`node ${id} revoked \\(since [^)]+\\): 1 session closed`).test(srv.stderr()),
      'the revocation logged');

    // a second revoke changes nothing
    const again = await call(srv, 'POST', `/api/nodes/${id}/revoke`);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.revoked_at, r.json.revoked_at);

    // the same key comes back: refused
    const back = proc(['node', '--server', server, '--key', key, '--cores', '1']);
    await back.until(/this node was revoked/, 'the returning node refused');
    assert.equal((await back.exitWithin(10000, 'the returning node')).code, 3);

    // with a fresh claim token: still refused, and the token is not used up
    const fresh = await claimToken();
    const claimed = proc(['node', '--server', server, '--key', key, '--cores', '1', '--claim-token', fresh.token]);
    await claimed.until(/this node was revoked/, 'the node with a new claim token refused');
    assert.equal((await claimed.exitWithin(10000, 'the node with a new claim token')).code, 3);
    const tokens = (await call(srv, 'GET', '/api/tokens')).json;
    assert.equal(tokens.find((t) => t.id === fresh.id).used_at, null, 'the new claim token is not used up');
    const row = await nodeRow(id);
    assert.equal(row.revoked_at, r.json.revoked_at, 'still revoked, since the first revoke');
    assert.equal(row.online, false);

    // listed as revoked, by the API and by `simfarm nodes`
    const listed = (await call(srv, 'GET', '/api/nodes?status=revoked')).json;
    assert.deepEqual(listed.map((n) => n.id), [id]);
    const table = await run(simfarm, ['nodes', '--server', srv.url, '--token', srv.token]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, new RegExp(`^${id}\\s.*\\srevoked\\s`, 'm'));
  } finally {
    await stop(node);
  }
});

test('simfarm node revoke ID: revokes a live node; an unknown id and a missing one fail', async () => {
  const first = await claimToken();
  const node = proc(['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'cli.key'),
    '--cores', '1', '--claim-token', first.token]);
  try {
    const id = Number((await node.until(/connected to \S+ as node (\d+)/, 'node connected'))[1]);
    const out = await run(simfarm, ['node', 'revoke', String(id), '--server', srv.url, '--token', srv.token]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^node ${id} revoked \\(since .+\\)$`, 'm'));
    assert.equal((await node.exitWithin(5000, 'the revoked node')).code, 3);
    assert.ok((await nodeRow(id)).revoked_at);
    const missing = proc(['node', 'revoke', '999999', '--server', srv.url, '--token', srv.token]);
    assert.equal((await missing.exitWithin(10000, 'revoke of an unknown node')).code, 1);
    assert.match(missing.err, /no such node 999999/);
    const usage = proc(['node', 'revoke', '--server', srv.url]);
    assert.equal((await usage.exitWithin(10000, 'revoke without an id')).code, 2);
  } finally {
    await stop(node);
  }
});

// `simfarm up` on a database of its own (no PostgreSQL of its own to
// create), until ready matches its output; then Ctrl-C.
async function up(name, args, ready, during) {
  const db = await createDatabase(pg, name);
  const varDir = path.join(tmp, name);
  const p = proc(['up', '--var', varDir, '--listen', '127.0.0.1:0', '--no-demo', '--cores', '1', ...args],
    { env: { ...process.env, SIMFARM_DB: db, XDG_CONFIG_HOME: path.join(tmp, 'config') } });
  try {
    await p.until(ready, 'up ready', 60000);
    const port = Number(p.out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)[1]);
    return await during(p, port, (sql) => psql(pg, sql, { db: name }));
  } finally {
    p.child.kill('SIGINT');
    await p.exitWithin(40000, 'up stopping');
  }
}

test('simfarm up: enrolment closed, its local node joins with a claim token of its own, an unknown key is refused', async () => {
  await up('upclosed', [], /connected to \S+ as node \d+/, async (p, port, q) => {
    assert.match(p.out, /enrolment is closed/);
    assert.doesNotMatch(p.out, /OPEN ENROLMENT/);
    assert.match(await q("SELECT tier || ' ' || owner FROM nodes"), /own admin/);
    assert.match(await q("SELECT count(*) FROM tokens WHERE kind = 'claim' AND used_at IS NOT NULL"), /1/);
    const stranger = proc(['node', '--server', `ws://127.0.0.1:${port}/ws/node`, '--key', path.join(tmp, 'stranger.key'),
      '--cores', '1']);
    await stranger.until(/not enrolled/, 'the unknown key refused');
    assert.equal((await stranger.exitWithin(10000, 'the unknown node')).code, 3);
  });
});

test('simfarm up --allow-public-nodes: says so, and an unknown key joins as a public node', async () => {
  await up('upopen', ['--allow-public-nodes'], /connected to \S+ as node \d+/, async (p, port, q) => {
    assert.match(p.out, /OPEN ENROLMENT IS ON \(--allow-public-nodes\)/);
    const stranger = proc(['node', '--server', `ws://127.0.0.1:${port}/ws/node`, '--key', path.join(tmp, 'public.key'),
      '--cores', '1']);
    try {
      await stranger.until(/connected to \S+ as node \d+/, 'the unknown key joins');
      assert.match(await q("SELECT string_agg(tier, ',' ORDER BY id) FROM nodes"), /public,public/);
    } finally {
      await stop(stranger);
    }
  });
});

test('make run passes --allow-public-nodes to simfarm up', () => {
  const makefile = fs.readFileSync(path.join(top, 'Makefile'), 'utf8');
  const recipe = makefile.match(/^run:.*\n((?:\t.*\n)+)/m);
  assert.ok(recipe, 'a run target');
  assert.match(recipe[1], /\bup\b.*--allow-public-nodes/);
});
