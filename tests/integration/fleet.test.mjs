// Fleets (docs/coordinator.md, "Fleets"; docs/node.md, "As a systemd
// service"): a real PostgreSQL, `simfarm serve` with enrolment closed, and
// `simfarm node` processes. Twenty nodes enrol from one token of 20 uses
// and a 21st is refused; a token of 10 uses raced for by 20 keys enrols 10;
// an expired one enrols nobody new; a second session on a live key is
// refused (and a silent one replaced); names are shown; offline nodes are
// removed one by one or pruned, never an online one. The systemd units
// pass `systemd-analyze verify`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, stop, top } from '../lib/proc.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { call, serve } from '../lib/coord.mjs';
import { E, ScriptedNode, helloBody, nodeKey } from '../lib/nodeproto.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-fleet-'));
// Short heartbeats: a session silent for two of them is taken for a dead
// connection, and the test of that waits for it.
const HEARTBEAT_MS = 2000;

// A child process whose output can be waited on, with a deadline.
function proc(args, { timeoutMs = 30000, env = process.env } = {}) {
  const child = spawn(simfarm, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const p = { out: '', err: '', child };
  p.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdout.on('data', (d) => { p.out += d; });
  child.stderr.on('data', (d) => { p.err += d; });
  p.until = (re, what) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not in ${timeoutMs} ms\n${p.out}\n${p.err}`)), timeoutMs);
    const check = () => { const m = (p.out + p.err).match(re); if (m) { clearTimeout(timer); resolve(m); return true; } return false; };
    if (check()) return;
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    p.exited.then((e) => { clearTimeout(timer); if (!check()) reject(new Error(`${what}: exited ${e.code ?? e.signal}\n${p.out}\n${p.err}`)); });
  });
  return p;
}

let pg, srv, q;
const cli = (args) => run(simfarm, [...args, '--server', srv.url, '--token', srv.token]);
const wsUrl = () => `ws://127.0.0.1:${srv.port}/ws/node`;
const node = (key, name, token, extra = []) => proc(['node', '--server', wsUrl(), '--key', path.join(tmp, key),
  '--cores', '1', ...(name != null ? ['--name', name] : []), ...(token ? ['--claim-token', token] : []), ...extra]);
const claimToken = async (body) => {
  const r = await call(srv, 'POST', '/api/tokens', { kind: 'claim', ...body });
  assert.equal(r.status, 201, r.text);
  return r.json;
};
// What ScriptedNode.hello sends, without waiting for the answer.
const hello = (n, opts) => helloBody(n.key, n.host, n.challenge.nonce, opts);
const nodes = async () => (await call(srv, 'GET', '/api/nodes')).json;
const offline = (id) => eventually(async () => (await nodes()).find((n) => n.id === id && !n.online),
  `node ${id} offline`, 15000);

before(async () => {
  pg = await startPostgres();
  const db = await createDatabase(pg, 'fleet');
  q = (sql) => psql(pg, sql, { db: 'fleet' });
  // A pool of 8: enrolments of many nodes at once reach the database together.
  srv = await serve(db, { extra: ['--pool', '8', '--heartbeat-ms', String(HEARTBEAT_MS)] });
});

after(async () => {
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const fleet = []; // the twenty nodes: { p, id, name, key }

test('twenty nodes enrol from one token of 20 uses; a 21st is refused; a node back with the token uses none', async () => {
  const made = await cli(['token', 'create', '--kind', 'claim', '--tier', 'team', '--uses', '20', '--expires', '24h',
    '--json']);
  assert.equal(made.code, 0, made.stderr);
  const token = JSON.parse(made.stdout);
  assert.equal(token.uses, 20);
  assert.ok(Date.parse(token.expires_at) - Date.now() > 23.9 * 3600e3, token.expires_at);
  for (let i = 1; i <= 20; i++) {
    const name = `fleet-${String(i).padStart(2, '0')}`;
    fleet.push({ name, key: `${name}.key`, p: node(`${name}.key`, name, token.token) });
  }
  for (const n of fleet) {
    const m = await n.p.until(/connected to 127\.0\.0\.1:\d+ as node (\d+) "(fleet-\d\d)"/, `${n.name} connected`);
    n.id = Number(m[1]);
    assert.equal(m[2], n.name);
  }
  assert.equal(new Set(fleet.map((n) => n.id)).size, 20, 'twenty nodes');
  const listed = await nodes();
  for (const n of fleet) {
    const row = listed.find((x) => x.id === n.id);
    assert.equal(row.name, n.name);
    assert.equal(row.online, true);
    assert.equal(row.tier, 'team');
  }
  assert.equal(await q(`SELECT used || '/' || uses FROM tokens WHERE id = ${token.id}`), '20/20');

  // The token is used up: a new key is refused.
  const late = node('late.key', 'late', token.token);
  assert.equal((await late.exited).code, 3, late.err);
  assert.match(late.err, /claim token is unknown, used up, revoked or expired/);

  // A node restarted with the token still given comes back as itself, and
  // uses nothing.
  const back = fleet[19];
  assert.equal((await stop(back.p)).code, 0);
  await offline(back.id);
  back.p = node(back.key, back.name, token.token);
  await back.p.until(new RegExp(`as node ${back.id} "${back.name}"`), 'the node back');
  assert.equal(await q(`SELECT used FROM tokens WHERE id = ${token.id}`), '20');

  // Names and uses in the lists.
  const list = await cli(['nodes']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /^ID +NAME +OWNER/m);
  for (const n of fleet) assert.match(list.stdout, new RegExp(`^${n.id} +${n.name} `, 'm'));
  const tokens = await cli(['token', 'list']);
  assert.match(tokens.stdout, new RegExp(`^${token.id} +claim +admin +team +used +0 of 20 `, 'm'));
  assert.equal((await call(srv, 'GET', `/api/nodes/${fleet[0].id}`)).json.name, 'fleet-01');
});

test('a token of 10 uses raced for by 20 new keys enrols exactly 10; an expired one enrols no new key', async () => {
  const token = await claimToken({ uses: 10 });
  const racers = await Promise.all(Array.from({ length: 20 }, () => ScriptedNode.connect(srv.port)));
  const ids = racers.map((n) => n.send('hello', hello(n, { claimToken: token.token, name: 'racer' })));
  const answers = await Promise.all(racers.map((n, i) =>
    n.until((m) => m.id === ids[i] && (m.type === 'welcome' || m.type === 'error'), 'an answer to the hello')));
  const welcomed = answers.filter((m) => m.type === 'welcome');
  assert.equal(welcomed.length, 10, JSON.stringify(answers.map((m) => m.body)));
  for (const m of answers.filter((x) => x.type === 'error')) assert.equal(m.body.code, E.ENOTENROLLED);
  assert.equal(await q(`SELECT used FROM tokens WHERE id = ${token.id}`), '10');
  const tl = (await call(srv, 'GET', '/api/tokens')).json.find((t) => t.id === token.id);
  assert.deepEqual([tl.uses, tl.used, tl.uses_left], [10, 10, 0]);

  // Expired: a new key is refused; a key it enrolled still comes in.
  const short = await claimToken({ uses: 5, expires_in: 1 });
  const first = await ScriptedNode.connect(srv.port);
  await first.hello({ claimToken: short.token });
  await first.close();
  await offline(first.nodeId);
  await eventually(async () => Date.now() > Date.parse(short.expires_at) + 200, 'the token expired', 5000);
  const fresh = await ScriptedNode.connect(srv.port);
  fresh.send('hello', hello(fresh, { claimToken: short.token }));
  const e = await fresh.error(undefined, 'the refusal');
  assert.equal(e.body.code, E.ENOTENROLLED);
  assert.match(e.body.message, /claim token is unknown, used up, revoked or expired/);
  const again = await ScriptedNode.connect(srv.port, { key: first.key });
  assert.equal((await again.hello({ claimToken: short.token })).node_id, first.nodeId);
  assert.equal(await q(`SELECT used FROM tokens WHERE id = ${short.id}`), '1');
  await again.close();
  for (const n of racers) await n.close();
});

test('a second session on a live key is refused, naming the live one; a silent one is replaced', async () => {
  // Native: a second process on a fleet node's key stops with status 4.
  const live = fleet[0];
  const twin = node(live.key, 'twin');
  assert.equal((await twin.exited).code, 4, twin.err);
  assert.match(twin.err, new RegExp(`this node key has a session already: node ${live.id} "fleet-01", from 127\\.0\\.0\\.1 ` +
    'since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC'));
  assert.match(twin.err, /another process is this node already .*--key PATH/);
  assert.match(srv.stderr(), new RegExp(`node ${live.id} "fleet-01": a second session of its key, from 127\\.0\\.0\\.1 as twin, refused`));
  const row = (await call(srv, 'GET', `/api/nodes/${live.id}`)).json;
  assert.equal(row.online, true);
  assert.equal(row.name, 'fleet-01', 'the refused process changed nothing');
  assert.equal(live.p.child.exitCode, null, 'the live node runs on');

  // Scripted: refused while the first is heard from; once it has been
  // silent for two heartbeat intervals, a new session replaces it.
  const key = nodeKey();
  const token = await claimToken({});
  const a = await ScriptedNode.connect(srv.port, { key });
  await a.hello({ claimToken: token.token, name: 'first' });
  const heard = Date.now();
  const b = await ScriptedNode.connect(srv.port, { key });
  b.send('hello', hello(b, { name: 'second' }));
  const refused = await b.error(undefined, 'the second session refused');
  assert.equal(refused.body.code, E.EKEYINUSE);
  assert.match(refused.body.message, new RegExp(`node ${a.nodeId} "first", from 127\\.0\\.0\\.1 since `));
  await b.closed;
  // The coordinator's watch closes a session silent for three intervals;
  // between two and three, a new session takes its place.
  await eventually(async () => Date.now() - heard > 2.3 * HEARTBEAT_MS, 'two heartbeat intervals of silence', 10000);
  const c = await ScriptedNode.connect(srv.port, { key });
  assert.equal((await c.hello({ name: 'third' })).node_id, a.nodeId);
  const gone = await a.error(0, 'the silent session closed');
  assert.equal(gone.body.code, E.ENOTREADY);
  assert.match(gone.body.message, /a new session of this node key came from 127\.0\.0\.1, and this one was silent/);
  assert.equal((await call(srv, 'GET', `/api/nodes/${a.nodeId}`)).json.name, 'third');
  await c.close();
});

test('node rm removes an offline node, never an online, revoked or busy one; prune removes the long-offline', async () => {
  const [one, two, three] = fleet;
  // Online: refused.
  let r = await cli(['node', 'rm', String(one.id)]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`node ${one.id} is online: stop it`));
  // Offline: removed; its key must enrol again.
  assert.equal((await stop(one.p)).code, 0);
  await offline(one.id);
  r = await cli(['node', 'rm', String(one.id)]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^node ${one.id} \\(fleet-01\\) removed \\(last seen \\d{4}-`));
  assert.equal((await call(srv, 'GET', `/api/nodes/${one.id}`)).status, 404);
  r = await cli(['node', 'rm', String(one.id)]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no such node/);
  const comeback = node(one.key, one.name);
  assert.equal((await comeback.exited).code, 3, comeback.err);
  // Revoked: its row keeps its key out.
  assert.equal((await call(srv, 'POST', `/api/nodes/${two.id}/revoke`)).status, 200);
  assert.equal((await two.p.exited).code, 3);
  r = await call(srv, 'DELETE', `/api/nodes/${two.id}`);
  assert.equal(r.status, 409);
  assert.match(r.json.error, /revoked/);
  // Results in a job that has not ended: kept until it ends. (The job can
  // run on no node here: community nodes only.)
  const job = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: { style: 'european', type: 'call',
    S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1 }, items: 1000000, seed: 1, tiers: ['community'] });
  assert.equal(job.status, 201, job.text);
  assert.equal((await stop(three.p)).code, 0);
  await offline(three.id);
  await q(`INSERT INTO journal (job_id, type, chunk, first_item, item_count, node_id) VALUES (${job.json.id}, 1, 999, ` +
    `999000, 1, ${three.id})`);
  r = await call(srv, 'DELETE', `/api/nodes/${three.id}`);
  assert.equal(r.status, 409);
  assert.match(r.json.error, new RegExp(`results in job ${job.json.id}, which has not ended`));
  // Not an admin's token: refused.
  const mine = await call(srv, 'POST', '/api/tokens', { kind: 'api', owner: 'someone' });
  assert.equal((await call(srv, 'DELETE', `/api/nodes/${three.id}`, undefined, mine.json.token)).status, 403);

  // Prune: five nodes stopped and the online fourth and the busy third
  // made to look eight days gone; only the five go.
  const stopped = fleet.slice(4, 9);
  for (const n of stopped) assert.equal((await stop(n.p)).code, 0);
  for (const n of stopped) await offline(n.id);
  const aged = [three, fleet[3], ...stopped].map((n) => n.id).join(',');
  await q(`UPDATE nodes SET last_seen = now() - interval '8 days' WHERE id IN (${aged})`);
  r = await cli(['nodes', 'prune', '--offline-for', '30s']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--offline-for wants a duration from a minute/);
  r = await cli(['nodes', 'prune', '--offline-for', '7d']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^5 nodes removed, offline for 7d or longer:/);
  for (const n of stopped) assert.match(r.stdout, new RegExp(`^  node ${n.id} ${n.name}, last seen `, 'm'));
  const left = await nodes();
  for (const n of stopped) assert.equal(left.some((x) => x.id === n.id), false);
  for (const n of [two, three, fleet[3]]) assert.ok(left.some((x) => x.id === n.id), `node ${n.id} kept`);
  assert.equal((await call(srv, 'POST', '/api/nodes/prune', { offline_for: 10 })).status, 400);
  // The job cancelled, the third goes too.
  assert.equal((await call(srv, 'POST', `/api/jobs/${job.json.id}/cancel`)).status, 200);
  r = await call(srv, 'DELETE', `/api/nodes/${three.id}`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual([r.json.id, r.json.name, r.json.removed], [three.id, 'fleet-03', true]);
  // The journal keeps the removed node's number.
  assert.equal(await q(`SELECT count(*) FROM journal WHERE node_id = ${three.id}`), '1');
  await Promise.all(fleet.map((n) => stop(n.p)));
});

test('node names are checked', async () => {
  for (const [name, why] of [['', /is empty/], ['x'.repeat(65), /longer than 64 bytes/], ['tab\there', /control/],
    [' lead', /starts or ends with a space/]]) {
    const p = node('named.key', name);
    const e = await p.exited;
    assert.equal(e.code, 2, p.err);
    assert.match(p.err, /simfarm node: --name: the node name /);
    assert.match(p.err, why);
  }
  // The coordinator checks a hello's name too (another implementation's).
  const n = await ScriptedNode.connect(srv.port);
  n.send('hello', hello(n, { name: 'bell\x07' }));
  const e = await n.error(undefined, 'the refusal');
  assert.equal(e.body.code, -2); // EINVAL
  assert.match(e.body.message, /^the node name holds a control character .*1 to 64 printable characters$/);
  await n.closed;
});

test('the systemd units pass systemd-analyze verify', async (t) => {
  const which = await run('/bin/sh', ['-c', 'command -v systemd-analyze']);
  if (which.code !== 0) {
    t.skip('systemd-analyze is not installed here (Debian: systemd)');
    return;
  }
  const dir = fs.mkdtempSync(path.join(tmp, 'units-'));
  const units = fs.readdirSync(path.join(top, 'dist/systemd')).filter((f) => f.endsWith('.service'));
  assert.deepEqual(units.sort(), ['simfarm-coordinator.service', 'simfarm-node.service', 'simfarm-node@.service']);
  for (const u of units) {
    // The binary where this build has it: verify checks that it exists.
    const text = fs.readFileSync(path.join(top, 'dist/systemd', u), 'utf8').replaceAll('/usr/local/bin/simfarm', simfarm);
    fs.writeFileSync(path.join(dir, u === 'simfarm-node@.service' ? 'simfarm-node@gpu0.service' : u), text);
    fs.writeFileSync(path.join(dir, u === 'simfarm-node@.service' ? 'simfarm-node@.service' : `${u}.orig`), text);
  }
  for (const u of ['simfarm-coordinator.service', 'simfarm-node.service', 'simfarm-node@gpu0.service']) {
    const r = await run('systemd-analyze', ['verify', '--man=no', path.join(dir, u)], { cwd: dir });
    assert.equal(r.code, 0, `${u}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stderr.trim(), '', `${u} verified with warnings: ${r.stderr}`);
  }
});
