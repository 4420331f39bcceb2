// A real farm: PostgreSQL, `simfarm serve`, and `simfarm node` processes
// over WebSocket. A job farmed to the node gives what one local run gives;
// the node's key file is guarded; a node the coordinator does not know is
// told so; SIGTERM drains; a node reaches a coordinator under a proxy's
// path prefix.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top, stop } from '../lib/proc.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { prefixProxy } from '../lib/prefixproxy.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { metrics } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const optionFile = path.join(top, 'examples/option.json');
const option = JSON.parse(fs.readFileSync(optionFile, 'utf8'));
// The nodes here join under open enrolment, as public nodes: their jobs name
// that tier (a job that names none leaves public nodes out).
// Every tier, and every tier trusted: these tests are about farming, not
// spot-checks (tests/integration/verify.test.mjs), and a lone node could not be
// checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-node-'));

// A child process whose output can be waited on, with a deadline.
function proc(args, { timeoutMs = 60000, env = process.env } = {}) {
  const child = spawn(simfarm, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const p = { out: '', err: '', child };
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdout.on('data', (d) => { p.out += d; });
  child.stderr.on('data', (d) => { p.err += d; });
  p.exited = exited;
  p.until = (re, what) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not in ${timeoutMs} ms\n${p.out}\n${p.err}`)), timeoutMs);
    const check = () => { const m = (p.out + p.err).match(re); if (m) { clearTimeout(timer); resolve(m); return true; } return false; };
    if (check()) return;
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    exited.then((e) => { clearTimeout(timer); if (!check()) reject(new Error(`${what}: exited ${e.code ?? e.signal}\n${p.out}\n${p.err}`)); });
  });
  return p;
}

// A database of its own, for a coordinator beside the shared one (one
// coordinator per database): { name, url, q } with q(sql) run in it.
let dbs = 0;
async function ownDb() {
  const name = `own${++dbs}`;
  return { name, url: await createDatabase(pg, name), q: (sql) => psql(pg, sql, { db: name }) };
}

let serves = 0;
async function serve(extra = [], db = pg.url) {
  const tokenFile = path.join(tmp, `token-${++serves}`);
  const s = proc(['serve', '--db', db, '--listen', '127.0.0.1:0', '--token-file', tokenFile, ...extra]);
  const m = await s.until(/listening on http:\/\/127\.0\.0\.1:(\d+)/, 'listening');
  await s.until(/database up/, 'database up');
  s.port = Number(m[1]);
  s.url = `http://127.0.0.1:${s.port}`;
  s.token = fs.readFileSync(tokenFile, 'utf8').trim();
  return s;
}

// An API call with the coordinator's admin token.
async function api(s, method, p, body) {
  const res = await fetch(s.url + p, { method, headers: { authorization: `Bearer ${s.token}` },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(15000) });
  return { status: res.status, json: await res.json() };
}

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(['--open-enrolment']);
});
after(async () => {
  if (srv) await stop(srv);
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('a job farmed to a node equals one local run', async () => {
  const items = 3000000, seed = 7;
  const was = await metrics(srv);
  const res = await api(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers, verify });
  assert.equal(res.status, 201);
  const { id } = res.json;
  const key = path.join(tmp, 'a', 'node.key');
  const node = proc(['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', key, '--cores', '2']);
  try {
    await node.until(/connected to 127\.0\.0\.1:\d+ as node \d+/, 'node connected');
    assert.equal(fs.statSync(key).mode & 0o777, 0o600, 'the key file is private');
    assert.equal((await metrics(srv)).simfarm_node_sessions, 1);
    const job = await eventually(async () => {
      const j = await (await fetch(`${srv.url}/api/jobs/${id}`)).json();
      return j.state === 'complete' ? j : null;
    }, 'job complete');

    sameBits(job, await localRun(items, seed));
    // the farm's work in /metrics: what this job took, and nothing left in flight
    const grew = (m, name) => m[name] - (was[name] ?? 0);
    const m = await eventually(async () => {
      const x = await metrics(srv);
      return x.simfarm_claims_in_flight === 0 && x.simfarm_jobs_running === 0 ? x : null;
    }, 'no claims in flight, no job running', 10000);
    assert.equal(grew(m, 'simfarm_items_accepted_total'), items);
    assert.equal(grew(m, 'simfarm_chunk_results_total{outcome="accepted"}'), job.result.chunks_accepted);
    assert.equal(grew(m, 'simfarm_jobs_finished_total{state="complete"}'), 1);
    for (const o of ['idempotent', 'conflict', 'stale', 'invalid', 'unanswered'])
      assert.equal(grew(m, `simfarm_chunk_results_total{outcome="${o}"}`), 0, o);
  } finally {
    const e = await stop(node);
    assert.equal(e.code, 0, node.err);
    assert.match(node.out, /drained, leaving/);
  }
});

test('behind a proxy\'s path prefix, the coordinator\'s http:// address with the prefix is enough', async () => {
  const proxy = await prefixProxy(srv.port, '/farm');
  const items = 200000, seed = 9;
  const node = proc(['node', '--server', `${proxy.url}/`, '--key', path.join(tmp, 'prefix.key'), '--cores', '1']);
  try {
    await node.until(/connected to 127\.0\.0\.1:\d+ as node \d+/, 'node connected through the proxy');
    const res = await api(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers, verify });
    assert.equal(res.status, 201);
    const job = await eventually(async () => {
      const j = await (await fetch(`${srv.url}/api/jobs/${res.json.id}`)).json();
      return j.state === 'complete' ? j : null;
    }, 'job complete');
    sameBits(job, await localRun(items, seed));
    assert.deepEqual(proxy.upgrades, ['/farm/ws/node']);
    assert.deepEqual(proxy.stray, []);
  } finally {
    const e = await stop(node);
    assert.equal(e.code, 0, node.err);
    await proxy.close();
  }
});

test('cancelling a job stops its chunks on the node', async () => {
  const res = await api(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 20000000000, seed: 5, tiers, verify });
  assert.equal(res.status, 201);
  const { id } = res.json;
  const node = proc(['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'cancel.key'),
    '--cores', '2']);
  try {
    await node.until(/connected to 127\.0\.0\.1:\d+ as node \d+/, 'node connected');
    // Cancel while the node computes chunks of a million items or more.
    await eventually(async () => {
      const p = (await api(srv, 'GET', `/api/jobs/${id}`)).json.progress;
      return p && p.items_in_flight >= 1000000;
    }, 'big chunks in flight', 30000);
    const c = await api(srv, 'POST', `/api/jobs/${id}/cancel`);
    assert.equal(c.status, 200);
    await node.until(new RegExp(`job ${id}: \\d+ chunks cancelled \\(cancelled\\)`), 'the node drops the chunks');
    const j = (await api(srv, 'GET', `/api/jobs/${id}`)).json;
    assert.equal(j.state, 'cancelled');
    assert.ok(j.result === null || j.result.items_done < 20000000000);
  } finally {
    const e = await stop(node);
    assert.equal(e.code, 0, node.err);
  }
});

test('a node reports items/s while its chunks take minutes', async () => {
  // Chunks sized to take five minutes, on a database of its own (a
  // coordinator loads every pending job of its database).
  const db = await startPostgres();
  const slow = await serve(['--open-enrolment', '--chunk-ms', '300000'], db.url);
  const node = proc(['node', '--server', `ws://127.0.0.1:${slow.port}/ws/node`, '--key', path.join(tmp, 'slow.key'),
    '--cores', '1']);
  try {
    // 16 steps an item: a chunk is held to at most 10^9 items, which the
    // one-step option computes in under two reports.
    const res = await api(slow, 'POST', '/api/jobs', { kernel: 'option', params: { ...option, steps: 16 }, items: 1e12,
      seed: 8, tiers, verify });
    assert.equal(res.status, 201);
    // Every 10 s the node says "C chunks, I items, R items/s": a report with
    // no chunk ended since the one before still shows the work under way.
    const reports = () => [...(node.out + node.err).matchAll(/(\d+) chunks, \d+ items, (\d+) items\/s/g)]
      .map((m) => ({ chunks: Number(m[1]), rate: Number(m[2]) }));
    const inside = await eventually(async () => {
      const r = reports();
      for (let i = 1; i < r.length; i++) if (r[i].chunks === r[i - 1].chunks && r[i].chunks > 0) return r[i];
      return null;
    }, 'a report with no chunk ended since the one before', 45000);
    assert.ok(inside.rate > 0, `items/s ${inside.rate} inside a chunk\n${node.err}`);
    // the first report too: its rate counts from the connection
    assert.ok(reports()[0].rate > 0, `first report: items/s ${reports()[0].rate}\n${node.err}`);
    assert.equal((await api(slow, 'POST', `/api/jobs/${res.json.id}/cancel`)).status, 200);

    // With nothing in hand the node says so once, not every 10 s: the
    // reports at the heartbeats after that one print nothing.
    const idle = () => [...(node.out + node.err).matchAll(/idle, waiting for work: \d+ chunks/g)].length;
    await eventually(async () => idle() === 1, 'the node saying it is idle', 30000);
    const seen = Date.now(), count = reports().length;
    await eventually(async () => {
      const n = (await api(slow, 'GET', '/api/nodes')).json.find((x) => x.online);
      return n && n.last_seen_ms >= seen + 16000; // a report slot (10 s) and a heartbeat (5 s) later
    }, 'heartbeats past the next report', 30000);
    assert.equal(idle(), 1, node.err);
    assert.equal(reports().length, count, `no report while idle\n${node.err}`);
  } finally {
    const e = await stop(node);
    assert.equal(e.code, 0, node.err);
    await stop(slow);
    await db.stop();
  }
});

test('a key file others can read is refused', async () => {
  const key = path.join(tmp, 'b.key');
  fs.writeFileSync(key, Buffer.alloc(32, 7), { mode: 0o644 });
  fs.chmodSync(key, 0o644);
  const r = await run(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', key]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /can be read by other users/);
});

test('a coordinator that does not know the key says so', async () => {
  const closed = await serve([], (await ownDb()).url);
  try {
    const node = proc(['node', '--server', `ws://127.0.0.1:${closed.port}/ws/node`, '--key', path.join(tmp, 'c.key')]);
    const e = await node.exited;
    assert.equal(e.code, 3, node.out + node.err);
    assert.match(node.err, /not enrolled/);
  } finally {
    await stop(closed);
  }
});

test('bad arguments are usage errors', async () => {
  for (const url of ['ftp://nope:21', 'http://:8080', 'ws://host:99999/ws/node', 'wss://host:x/ws/node', 'nope',
    'ws://[::1/ws/node', 'ws://[::1]x/ws/node', 'ws://[]:80/', 'ws://a]b:80/']) {
    const r = await run(simfarm, ['node', '--server', url]);
    assert.equal(r.code, 2, url);
    assert.match(r.stderr, /--server wants ws:\/\/HOST\[:PORT\]\/ws\/node/, url);
  }
  for (const [args, re] of [[['--bogus'], /unknown option '--bogus'/], [['stray'], /unexpected argument 'stray'/],
    [['--server'], /'--server' needs a value/]]) {
    const r = await run(simfarm, ['node', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, re, args.join(' '));
  }
});

test('an empty $SIMFARM_SERVER or $SIMFARM_CA counts as unset', async () => {
  const node = proc(['node', '--key', path.join(tmp, 'emptyenv.key')],
    { env: { ...process.env, SIMFARM_SERVER: '', SIMFARM_CA: '' } });
  try {
    await node.until(/connecting to ws:\/\/127\.0\.0\.1:8080\/ws\/node/, 'the default server');
    assert.doesNotMatch(node.err, /--ca/);
  } finally {
    await stop(node);
  }
});

test('a refused $SIMFARM_SERVER or $SIMFARM_CA is named as the variable, not as the flag', async () => {
  const key = path.join(tmp, 'fromenv.key');
  const ca = path.join(tmp, 'no-such-ca.pem');
  const badServer = await run(simfarm, ['node', '--key', key], { env: { ...process.env, SIMFARM_SERVER: 'ftp://x' } });
  assert.equal(badServer.code, 2);
  assert.match(badServer.stderr, /^simfarm node: \$SIMFARM_SERVER wants ws:\/\/HOST/m);
  const badCa = await run(simfarm, ['node', '--key', key], { env: { ...process.env, SIMFARM_CA: ca } });
  assert.equal(badCa.code, 1);
  assert.match(badCa.stderr, new RegExp(`^simfarm node: \\$SIMFARM_CA ${ca}: No such file`, 'm'));
  // the flag given as well: it is the flag that is used, and named
  const flag = await run(simfarm, ['node', '--key', key, '--ca', ca, '--server', 'ftp://y'],
    { env: { ...process.env, SIMFARM_SERVER: 'ws://127.0.0.1:1/ws/node', SIMFARM_CA: '/etc/hostname' } });
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /^simfarm node: --server wants ws:\/\/HOST.*not 'ftp:\/\/y'/m);
  const flagCa = await run(simfarm, ['node', '--key', key, '--ca', ca], { env: { ...process.env, SIMFARM_CA: '/etc/hostname' } });
  assert.equal(flagCa.code, 1);
  assert.match(flagCa.stderr, new RegExp(`^simfarm node: --ca ${ca}: No such file`, 'm'));
});

test('a coordinator on the IPv6 loopback: the node connects to ws://[::1]:PORT and signs for that host', async () => {
  const db = await ownDb();
  const s = proc(['serve', '--db', db.url, '--listen', '[::1]:0', '--open-enrolment']);
  try {
    const m = await s.until(/listening on http:\/\/\[::1\]:(\d+)/, 'listening on [::1]');
    const node = proc(['node', '--server', `ws://[::1]:${m[1]}/ws/node`, '--key', path.join(tmp, 'v6.key'),
      '--cores', '1']);
    try {
      await node.until(new RegExp(`connected to \\[::1\\]:${m[1]} as node \\d+`), 'connected over IPv6');
    } finally {
      await stop(node);
    }
  } finally {
    await stop(s);
  }
});

test('--log-format json lines stay JSON whatever bytes the message holds', () => {
  // A key file name with a byte that is not UTF-8, and one so long that the
  // message is cut in the middle of a two-byte character: each refusal is
  // one line of well-formed UTF-8 and JSON, the bad bytes as U+FFFD.
  const base = path.join(tmp, 'bytes');
  const named = (pad) => `${base}/${'p'.repeat(pad)}/${['a', 'b', 'c'].map((x) => x + '\u00e9'.repeat(120)).join('/')}/k`;
  // the refusal keeps 511 bytes (an sf_error's message)
  const long = named([1, 2].find((pad) => Buffer.from(named(pad))[510] === 0xc3));
  const sh = `set -e; mkdir -p "$1" "$(dirname "$3")"; p="$(printf '%s/\\377.key' "$1")"; ` +
    `printf 12345 > "$p"; chmod 600 "$p"; printf 12345 > "$3"; chmod 600 "$3"; ` +
    `"$2" node --log-format json --key "$p" 2>"$1/a.err" || echo "exit $?"; ` +
    `"$2" node --log-format json --key "$3" 2>"$1/b.err" || echo "exit $?"`;
  const r = spawnSync('sh', ['-c', sh, 'sh', base, simfarm, long], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.stdout, 'exit 1\nexit 1\n', r.stderr);
  const lines = ['a.err', 'b.err'].map((f) => {
    const raw = fs.readFileSync(path.join(base, f));
    const text = new TextDecoder('utf-8', { fatal: true }).decode(raw); // throws on ill-formed UTF-8
    const all = text.trim().split('\n');
    assert.equal(all.length, 1, text);
    return JSON.parse(all[0]);
  });
  assert.equal(lines[0].level, 'warn');
  assert.ok(lines[0].msg.endsWith('/\ufffd.key holds 5 bytes; a node key is a 32-byte seed'), lines[0].msg);
  assert.equal(Buffer.byteLength(lines[1].msg.replace(/\ufffd$/, '')), 510, 'cut at 511 bytes, the half character replaced');
  assert.ok(long.startsWith(lines[1].msg.slice(0, -1)), lines[1].msg);
});

test('CPU workers give way to the device workers within 256 in all', async () => {
  const over = await run(simfarm, ['node', '--cores', '257']);
  assert.equal(over.code, 2);
  assert.match(over.stderr, /--cores wants a number from 1 to 256, not '257'/);
  const node = proc(['node', '--server', 'ws://127.0.0.1:1/ws/node', '--key', path.join(tmp, 'wide.key'),
    '--cores', '256', '--backend', 'cpu,opencl'], { timeoutMs: 120000 });
  try {
    await node.until(/256 workers \(255 CPU, 1 device\)/, 'the workers');
    assert.match(node.err, /255 CPU workers, not 256: a node runs 256 workers at most/);
  } finally {
    await stop(node);
  }
});

test('more devices than a node drives: 16 device workers, and the rest said', async () => {
  // pocl makes as many CPU devices as POCL_DEVICES names
  const env = { ...process.env, POCL_DEVICES: Array(18).fill('pthread').join(' ') };
  const node = proc(['node', '--server', 'ws://127.0.0.1:1/ws/node', '--key', path.join(tmp, 'many.key'),
    '--backend', 'opencl'], { env, timeoutMs: 120000 });
  try {
    await node.until(/16 workers \(0 CPU, 16 device\)/, 'sixteen device workers');
    assert.match(node.err, /2 devices not used: a node drives 16 devices at most/);
  } finally {
    await stop(node);
  }
});

test('a --server with no port takes the scheme\'s, and the host alone is what the node signs for', async () => {
  // What `simfarm token create --kind claim` prints for https://HOST/PREFIX.
  // Port 443 here has no coordinator: the node says whom it cannot reach,
  // the host as its Host header and signatures carry it. As root (CI) a
  // listener on 443 also sees the node's connection arrive there.
  const listener = process.getuid?.() === 0 ? net.createServer((s) => { listener.hits++; s.destroy(); }) : null;
  if (listener) {
    listener.hits = 0;
    await new Promise((resolve, reject) => { listener.once('error', reject); listener.listen(443, '127.0.0.1', resolve); });
  }
  const node = proc(['node', '--server', 'wss://127.0.0.1/farm/ws/node', '--key', path.join(tmp, 'noport.key')]);
  try {
    await node.until(/cannot reach 127\.0\.0\.1 \(/, 'the node tries port 443');
    if (listener) assert.ok(listener.hits >= 1, 'a connection to port 443');
  } finally {
    await stop(node);
    listener?.close();
  }
});

test('a claim token enrols one node under its owner and tier, once', async () => {
  const closed = await serve([], (await ownDb()).url);
  try {
    const t = await api(closed, 'POST', '/api/tokens', { kind: 'claim', owner: 'ops', tier: 'team', expires_in: 600 });
    assert.equal(t.status, 201, JSON.stringify(t.json));
    assert.match(t.json.token, /^sfc_[A-Za-z0-9_-]{43}$/);
    const server = `ws://127.0.0.1:${closed.port}/ws/node`;
    const key = path.join(tmp, 'claimed.key');
    const node = proc(['node', '--server', server, '--key', key, '--claim-token', t.json.token, '--cores', '1']);
    const m = await node.until(/connected to 127\.0\.0\.1:\d+ as node (\d+)/, 'enrolled node connected');
    const id = Number(m[1]);
    const nodes = await eventually(async () => {
      const r = await api(closed, 'GET', '/api/nodes');
      return r.json.find((n) => n.id === id && n.online) ? r.json : null;
    }, 'the node listed online', 15000);
    const me = nodes.find((n) => n.id === id);
    assert.equal(me.owner, 'ops');
    assert.equal(me.tier, 'team');
    assert.match(me.version, /^simfarm-node \d/);
    // The node reports its program's SHA-256: the binary that runs.
    const sum = (await import('node:crypto')).createHash('sha256').update(fs.readFileSync(simfarm)).digest('hex');
    assert.equal(me.capabilities.checksum, sum);
    assert.equal(me.capabilities.cores > 0, true);
    await stop(node);

    // Used up: another key cannot enrol with it.
    const other = proc(['node', '--server', server, '--key', path.join(tmp, 'other.key')],
      { env: { ...process.env, NODE_CLAIM_TOKEN: t.json.token } });
    const e = await other.exited;
    assert.equal(e.code, 3, other.err);
    assert.match(other.err, /claim token is unknown, used up, revoked or expired/);

    // The enrolled key comes back without it, here through the coordinator's http address.
    const again = proc(['node', '--server', closed.url, '--key', key, '--cores', '1']);
    await again.until(new RegExp(`as node ${id}\\b`), 'known key reconnects');
    const list = await api(closed, 'GET', '/api/tokens');
    assert.ok(list.json.find((x) => x.id === t.json.id).used_at, 'the claim token is marked used');
    assert.equal(list.json.some((x) => 'token' in x || 'secret_hash' in x), false, 'no secrets listed');
    await stop(again);
  } finally {
    await stop(closed);
  }
});

// ---- backends, failures and restarts ------------------------------------------------------

const server = (s) => `ws://127.0.0.1:${s.port}/ws/node`;

async function jobEnded(s, id, timeoutMs = 120000) {
  return eventually(async () => {
    const j = (await api(s, 'GET', `/api/jobs/${id}`)).json;
    return ['complete', 'failed', 'cancelled'].includes(j.state) ? j : null;
  }, `job ${id} ended`, timeoutMs);
}

async function inFlight(s, id, atLeast = 1) {
  return eventually(async () => {
    const p = (await api(s, 'GET', `/api/jobs/${id}`)).json.progress;
    return p && p.items_in_flight >= atLeast ? p : null;
  }, `job ${id}: ${atLeast} items in flight`, 60000);
}

async function submit(s, items, seed) {
  const res = await api(s, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers, verify });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return res.json.id;
}

test('a node\'s work in all: its sessions\' accepted chunks, kept in the database', async () => {
  const key = path.join(tmp, 'work.key');
  const work = async (items, seed) => {
    const id = await submit(srv, items, seed);
    const node = proc(['node', '--server', server(srv), '--key', key, '--cores', '2']);
    try {
      const m = await node.until(/as node (\d+)/, 'node connected');
      const job = await jobEnded(srv, id);
      assert.equal(job.state, 'complete');
      // online: the live session's count is in it at once
      const live = (await api(srv, 'GET', `/api/nodes/${m[1]}`)).json;
      return { node: Number(m[1]), job, live };
    } finally {
      assert.equal((await stop(node)).code, 0, node.err);
    }
  };
  const a = await work(2000000, 31);
  assert.equal(a.live.online, true);
  assert.equal(a.live.items_total, 2000000);
  assert.equal(a.live.chunks_total, a.job.result.chunks_accepted);
  const offline = async () => eventually(async () => {
    const n = (await api(srv, 'GET', `/api/nodes/${a.node}`)).json;
    return n.online === false ? n : null;
  }, 'the node offline', 20000);
  const stopped = Date.now();
  const after1 = await offline();
  assert.equal(after1.items_total, 2000000, 'the ended session\'s row');
  assert.ok(Date.parse(after1.last_seen) >= stopped - 2000, `last_seen ${after1.last_seen}: when it left`);
  // a second session of the same key adds to it
  const b = await work(1000000, 32);
  assert.equal(b.node, a.node);
  assert.equal(b.live.items_total, 3000000);
  assert.equal(b.live.chunks_total, a.job.result.chunks_accepted + b.job.result.chunks_accepted);
  assert.equal((await offline()).items_total, 3000000);
  assert.equal(await psql(pg, `SELECT count(*) || ' ' || sum(items) FROM node_work WHERE node = ${a.node}`),
    '2 3000000');
  assert.equal(await psql(pg, `SELECT items_total FROM nodes WHERE id = ${a.node}`), '3000000');
  // the sessions' writes again, as a store sends them after a broken
  // connection, and one with lower counts: neither adds anything
  for (const less of [0, 1000])
    await psql(pg, `INSERT INTO node_work (session, node, chunks, items)
      SELECT session, node, chunks - ${less ? 1 : 0}, items - ${less} FROM node_work WHERE node = ${a.node}
      ON CONFLICT (session) DO UPDATE SET chunks = greatest(node_work.chunks, EXCLUDED.chunks),
      items = greatest(node_work.items, EXCLUDED.items), saved_at = now()`);
  assert.equal(await psql(pg, `SELECT items_total || ' ' || chunks_total FROM nodes WHERE id = ${a.node}`),
    `3000000 ${a.job.result.chunks_accepted + b.job.result.chunks_accepted}`);
  const list = (await api(srv, 'GET', '/api/nodes')).json;
  assert.equal(list.find((n) => n.id === a.node).items_total, 3000000);
  // and `simfarm nodes` shows it offline with its items in all
  const table = await run(simfarm, ['nodes', '--server', srv.url]);
  assert.equal(table.code, 0, table.stderr);
  const row = table.stdout.split('\n').find((l) => l.startsWith(`${a.node} `));
  assert.match(row, /\boffline\b.*\s3M\s/, table.stdout);
  for (const bad of ['0', '99999999', 'x'])
    assert.equal((await api(srv, 'GET', `/api/nodes/${bad}`)).status, 404, bad);
});

test('a coordinator that stops writes the work of the nodes still online first', async () => {
  const db = await ownDb();
  const first = await serve(['--open-enrolment'], db.url);
  const items = 2000000;
  const id = await submit(first, items, 33);
  const node = proc(['node', '--server', server(first), '--key', path.join(tmp, 'stopwork.key'), '--cores', '2']);
  let second;
  try {
    const nodeId = Number((await node.until(/as node (\d+)/, 'node connected'))[1]);
    assert.equal((await jobEnded(first, id)).state, 'complete');
    // nothing written yet: a session writes every 12 heartbeats (a minute)
    assert.equal(await db.q(`SELECT count(*) FROM node_work WHERE node = ${nodeId}`), '0');
    const e = await stop(first);
    assert.equal(e.code, 0, first.err);
    assert.doesNotMatch(first.err, /stopping without/);
    second = await serve(['--open-enrolment'], db.url);
    const n = (await api(second, 'GET', `/api/nodes/${nodeId}`)).json;
    assert.equal(n.items_total, items);
    assert.equal(n.online, false);
  } finally {
    assert.equal((await stop(node)).code, 0, node.err);
    if (second) await stop(second);
  }
});

test('a database from before the nodes\' totals gets them from its session rows', async () => {
  await psql(pg, 'CREATE DATABASE upgrade');
  const db = pg.url.replace('dbname=postgres', 'dbname=upgrade');
  const q = (sql) => psql(pg, sql, { db: 'upgrade' });
  await stop(await serve([], db));
  // back to the schema of 006_node_work, with two nodes' sessions in it
  await q(`DROP TRIGGER node_work_totals ON node_work; DROP FUNCTION node_work_count();
    ALTER TABLE nodes DROP COLUMN chunks_total, DROP COLUMN items_total;
    DELETE FROM schema_migrations WHERE name = '007_node_totals'`);
  await q(`INSERT INTO nodes (public_key, tier) VALUES (decode(repeat('01', 32), 'hex'), 'public'),
    (decode(repeat('02', 32), 'hex'), 'public'), (decode(repeat('03', 32), 'hex'), 'public')`);
  await q(`INSERT INTO node_work (session, node, chunks, items)
    SELECT gen_random_uuid(), id, id * 10 + s, id * 1000 + s
    FROM nodes, generate_series(1, 3) s WHERE id < 3`);
  const s = await serve([], db);
  try {
    const nodes = (await api(s, 'GET', '/api/nodes')).json.sort((x, y) => x.id - y.id);
    assert.deepEqual(nodes.map((n) => [n.id, n.chunks_total, n.items_total]),
      [[1, 36, 3006], [2, 66, 6006], [3, 0, 0]]);
    // and what comes after counts on: a session's row, raised twice
    const key = "'00000000-0000-4000-8000-000000000001'";
    for (const items of [500, 700, 600])
      await q(`INSERT INTO node_work (session, node, chunks, items) VALUES (${key}, 3, 1, ${items})
        ON CONFLICT (session) DO UPDATE SET chunks = greatest(node_work.chunks, EXCLUDED.chunks),
        items = greatest(node_work.items, EXCLUDED.items)`);
    assert.equal((await api(s, 'GET', '/api/nodes/3')).json.items_total, 700);
  } finally {
    await stop(s);
  }
});

test('the nodes list filtered by status, owner and tier, a page at a time (API and `simfarm nodes`)', async () => {
  const db = await ownDb();
  const s = await serve(['--open-enrolment'], db.url);
  // offline nodes of several owners and tiers, one of them revoked, with
  // lower ids than the two nodes online
  await db.q(`INSERT INTO nodes (public_key, owner, tier, revoked_at)
    SELECT decode(lpad(to_hex(k), 64, '0'), 'hex'), CASE WHEN k % 2 = 0 THEN 'alice' ELSE 'bob' END,
      (ARRAY['own', 'team', 'community'])[k % 3 + 1], CASE WHEN k = 5 THEN now() END
    FROM generate_series(1, 7) k`);
  const a = proc(['node', '--server', server(s), '--key', path.join(tmp, 'list-a.key'), '--cores', '1']);
  const b = proc(['node', '--server', server(s), '--key', path.join(tmp, 'list-b.key'), '--cores', '1']);
  try {
    const online = [Number((await a.until(/as node (\d+)/, 'node a'))[1]), Number((await b.until(/as node (\d+)/, 'node b'))[1])]
      .sort((x, y) => x - y);
    const rows = await db.q('SELECT id, owner, tier, revoked_at IS NOT NULL FROM nodes ORDER BY id');
    const table = rows.split('\n').map((l) => l.split('|')).map(([id, owner, tier, revoked]) =>
      ({ id: Number(id), owner, tier, revoked: revoked === 't', online: online.includes(Number(id)) }));
    const status = (n) => (n.revoked ? 'revoked' : n.online ? 'online' : 'offline');
    const ids = async (query) => {
      const r = await api(s, 'GET', `/api/nodes${query}`);
      assert.equal(r.status, 200, `${query}: ${JSON.stringify(r.json)}`);
      return r.json.map((n) => n.id);
    };
    // the whole list: online first, then by id
    const all = [...online, ...table.filter((n) => !n.online).map((n) => n.id)];
    assert.deepEqual(await ids(''), all);
    for (const st of ['online', 'offline', 'revoked'])
      assert.deepEqual(await ids(`?status=${st}`), table.filter((n) => status(n) === st).map((n) => n.id), st);
    assert.deepEqual(await ids('?owner=alice'), table.filter((n) => n.owner === 'alice').map((n) => n.id));
    assert.deepEqual(await ids('?tier=team&status=offline'),
      table.filter((n) => n.tier === 'team' && status(n) === 'offline').map((n) => n.id));
    assert.deepEqual(await ids('?status=online&owner=alice'), []);
    // pages of 4 make up the list, online nodes on the first
    const pages = [];
    for (let off = 0; off < all.length; off += 4) pages.push(...await ids(`?limit=4&offset=${off}`));
    assert.deepEqual(pages, all);
    assert.deepEqual(await ids(`?limit=1&offset=${all.length}`), []);
    for (const [query, field] of [['status=lost', 'status'], ['tier=gold', 'tier'], ['limit=0', 'limit'],
      ['limit=1001', 'limit'], ['offset=-1', 'offset'], ['offset=x', 'offset']]) {
      const r = await api(s, 'GET', `/api/nodes?${query}`);
      assert.equal(r.status, 400, query);
      assert.equal(r.json.field, field, query);
    }

    const cli = (args) => run(simfarm, ['nodes', '--server', s.url, ...args]);
    const t = await cli(['--status', 'online']);
    assert.equal(t.code, 0, t.stderr);
    assert.deepEqual(t.stdout.trim().split('\n').slice(1).map((l) => Number(l.split(/ +/)[0])), online);
    assert.match(t.stdout, /^ID +NAME/);
    const j = await cli(['--owner', 'bob', '--tier', 'community', '--limit', '1', '--json']);
    assert.equal(j.code, 0, j.stderr);
    assert.deepEqual(JSON.parse(j.stdout).map((n) => n.id),
      table.filter((n) => n.owner === 'bob' && n.tier === 'community').map((n) => n.id).slice(0, 1));
    assert.equal((await cli(['--status', 'revoked', '--offset', '1'])).stdout, 'no nodes\n');
    for (const [args, message] of [[['--status', 'gone'], /--status is one of online, offline, revoked; not 'gone'/],
      [['--tier', 'gold'], /--tier is one of own, team, community, public/], [['--limit', '0'], /--limit wants/],
      [['--offset', '-2'], /--offset wants a whole number/]]) {
      const r = await cli(args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message);
    }
  } finally {
    await stop(a);
    await stop(b);
    await stop(s);
  }
});

// Each thread of a process: its nice value, scheduling policy (0 normal,
// 5 SCHED_IDLE) and CPU time in ticks, from /proc (fields 19, 41, 14 + 15;
// the name in parentheses may hold spaces).
function threads(pid) {
  return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { tid: Number(tid), nice: Number(f[16]), policy: Number(f[38]), cpu: Number(f[11]) + Number(f[12]) };
  });
}

test('the workers compute at low priority, the connection at the process\'s; --priority idle and normal', async () => {
  const node = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'prio.key'), '--cores', '2',
    '--backend', 'cpu']);
  try {
    await node.until(/2 workers \(2 CPU, 0 device\) at nice 19/, 'the start says the priority');
    await node.until(/as node \d+/, 'node connected');
    const items = 100000000, seed = 41;
    const job = await jobEnded(srv, await submit(srv, items, seed));
    sameBits(job, await localRun(items, seed));
    const t = threads(node.child.pid);
    const low = t.filter((x) => x.nice === 19);
    assert.equal(low.length, 2, `two threads at nice 19: ${JSON.stringify(t)}`);
    assert.equal(t.find((x) => x.tid === node.child.pid).nice, 0, 'the loop thread keeps nice 0');
    assert.ok(t.every((x) => x.policy === 0), JSON.stringify(t));
    const all = t.reduce((n, x) => n + x.cpu, 0), computing = low.reduce((n, x) => n + x.cpu, 0);
    assert.ok(computing >= 0.9 * all, `the chunks were computed on the low threads: ${computing} of ${all} ticks`);
  } finally {
    assert.equal((await stop(node)).code, 0, node.err);
  }
  // idle: the two pool threads SCHED_IDLE; normal: every thread as it was
  for (const [priority, says, idle] of [['idle', / at idle priority, connecting/, 2],
    ['normal', /\(2 CPU, 0 device\), connecting/, 0]]) {
    const n = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'prio.key'), '--cores', '2',
      '--backend', 'cpu', '--priority', priority]);
    try {
      await n.until(says, `--priority ${priority}: the start says so`);
      await n.until(/as node \d+/, 'node connected');
      // Each pool thread sets its own policy as it starts, which may come
      // just after the connection: the threads are read until they have,
      // with a deadline, and the asserts below judge the last reading.
      let t;
      await eventually(() => {
        t = threads(n.child.pid);
        return t.filter((x) => x.policy === 5).length === idle;
      }, `--priority ${priority}: the pool threads' policy`, 10000).catch(() => {});
      assert.ok(t.every((x) => x.nice === 0), `--priority ${priority}: ${JSON.stringify(t)}`);
      assert.equal(t.filter((x) => x.policy === 5).length, idle, `--priority ${priority}: ${JSON.stringify(t)}`);
      assert.equal(t.filter((x) => x.policy !== 0 && x.policy !== 5).length, 0, JSON.stringify(t));
      assert.equal(t.find((x) => x.tid === n.child.pid).policy, 0, 'the loop thread keeps its policy');
    } finally {
      assert.equal((await stop(n)).code, 0, n.err);
    }
  }
  const bad = await run(simfarm, ['node', '--priority', 'high']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--priority wants low, idle or normal, not 'high'/);
});

test('a CPU node and an OpenCL node together give one local run, to the last bit', async () => {
  const cpu = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'be-cpu.key'), '--backend', 'cpu',
    '--cores', '1', '--log-format', 'json']);
  const cl = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'be-cl.key'), '--backend', 'opencl']);
  try {
    const a = await cpu.until(/"msg":"connected to 127\.0\.0\.1:\d+ as node (\d+)/, 'CPU node connected');
    const b = await cl.until(/connected to 127\.0\.0\.1:\d+ as node (\d+)/, 'OpenCL node connected');
    assert.match(cl.out, /worker 0: OpenCL on \S/);
    const items = 40000000, seed = 11;
    const id = await submit(srv, items, seed);
    const job = await jobEnded(srv, id);
    sameBits(job, await localRun(items, seed));

    const nodes = (await api(srv, 'GET', '/api/nodes')).json;
    const byId = (n) => nodes.find((x) => x.id === Number(n));
    const kinds = (n) => byId(n).capabilities.backends.map((x) => x.kind);
    assert.deepEqual(kinds(a[1]), ['cpu']);
    assert.deepEqual(kinds(b[1]), ['opencl']);
    assert.ok(byId(b[1]).capabilities.backends[0].device.length > 0);
    assert.ok(byId(a[1]).chunks_done > 0 && byId(b[1]).chunks_done > 0, 'both nodes computed chunks');
    // --log-format json: every line of the CPU node is one object.
    for (const line of (cpu.out + cpu.err).trim().split('\n')) {
      const o = JSON.parse(line);
      assert.ok(o.ts > 0 && ['info', 'warn'].includes(o.level) && typeof o.msg === 'string', line);
    }
  } finally {
    assert.equal((await stop(cpu)).code, 0, cpu.err);
    assert.equal((await stop(cl)).code, 0, cl.err);
  }
});

test('a node with a device worker beside a CPU worker per core has every worker computing', async () => {
  // --backend cpu,opencl: a CPU worker per core, and one more for pocl's
  // OpenCL device. The coordinator hands out as many chunks at once as
  // there are workers, not only as many as there are cores.
  const node = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'mixed.key'), '--backend', 'cpu,opencl']);
  let id = 0;
  try {
    const w = await node.until(/(\d+) workers \((\d+) CPU, (\d+) device\)/, 'the workers');
    const [workers, cpus, devices] = w.slice(1).map(Number);
    assert.ok(devices >= 1 && workers === cpus + devices, w[0]);
    const me = Number((await node.until(/as node (\d+)/, 'node connected'))[1]);
    id = await submit(srv, 1e10, 17);
    const live = await eventually(async () => {
      const n = (await api(srv, 'GET', `/api/nodes/${me}`)).json;
      return n.in_flight === workers ? n : null;
    }, `${workers} chunks in hand at once`, 30000);
    assert.equal(live.slots, workers);
    assert.equal(live.capabilities.cores, cpus);
    // its results name the backend that computed them: each backend has a
    // speed of its own (the CPU entry, then pocl's)
    const speeds = await eventually(async () => {
      const v = (await api(srv, 'GET', `/api/nodes/${me}`)).json.backend_items_per_s;
      return v && v.length === 1 + devices && v.every((x) => x > 0) ? v : null;
    }, 'a speed for each backend', 30000);
    assert.equal(speeds.length, live.capabilities.backends.length);
  } finally {
    if (id) assert.equal((await api(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
    assert.equal((await stop(node)).code, 0, node.err);
  }
});

test('a backend with no device is refused at start', async () => {
  const probe = await run(simfarm, ['sim', 'option', optionFile, '--items', '1000', '--backend', 'cuda']);
  const node = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'cuda.key'), '--backend', 'cuda']);
  if (probe.code === 0) { // a machine with a CUDA device: the node runs on it
    await node.until(/worker 0: CUDA on \S/, 'the CUDA worker');
    assert.equal((await stop(node)).code, 0, node.err);
  } else {
    const e = await node.exited;
    assert.equal(e.code, 1, node.out + node.err);
    assert.match(node.err, /--backend cuda: /);
  }
});

test('a node killed mid-chunk: its claims are reclaimed and the job completes exactly', async () => {
  const items = 200000000, seed = 21;
  const id = await submit(srv, items, seed);
  const doomed = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'kill-a.key'), '--cores', '2']);
  let rescue;
  try {
    await doomed.until(/as node \d+/, 'first node connected');
    await inFlight(srv, id);
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    await eventually(async () => (await api(srv, 'GET', `/api/jobs/${id}`)).json.progress?.reclaims >= 1,
      'the killed node\'s claims reclaimed', 30000);
    await eventually(async () => (await metrics(srv))['simfarm_claims_reclaimed_total{why="node_gone"}'] >= 1,
      'the reclaim counted in /metrics', 5000);
    rescue = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'kill-b.key'), '--cores', '2']);
    const job = await jobEnded(srv, id);
    sameBits(job, await localRun(items, seed));
  } finally {
    if (doomed.child.exitCode === null && doomed.child.signalCode === null) doomed.child.kill('SIGKILL');
    if (rescue) assert.equal((await stop(rescue)).code, 0, rescue.err);
  }
});

test('SIGTERM drains within the grace period; past it the chunks are handed back', async () => {
  // Chunks sized to take a minute (after the first, a probe), on a
  // coordinator of their own: the chunks in hand outlast the one-second
  // grace whenever the signal comes. (With 10 s chunks the node's first
  // report, 10 s in, could come just as they end.)
  const srv = await serve(['--open-enrolment', '--chunk-ms', '60000'], (await ownDb()).url);
  const res = await api(srv, 'POST', '/api/jobs', { kernel: 'option', params: { ...option, steps: 5000 },
    items: 1000000000, seed: 31, tiers, verify });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  const { id } = res.json;
  const node = proc(['node', '--server', server(srv), '--key', path.join(tmp, 'grace.key'), '--cores', '2',
    '--grace', '1']);
  try {
    await node.until(/as node \d+/, 'node connected');
    await inFlight(srv, id).catch((e) => {
      e.message += `\nnode:\n${node.err.slice(-3000)}\ncoordinator:\n${srv.err.slice(-3000)}`;
      throw e;
    });
    // the node computing, not just the coordinator's claim on its way: its
    // report (every 10 s) counts the items of the chunks in hand
    await node.until(/\d+ chunks, \d+ items, [1-9]\d* items\/s/, 'the node computing');
    node.child.kill('SIGTERM');
    const e = await node.exited;
    assert.equal(e.code, 0, node.err);
    assert.match(node.err, /draining: finishing the chunks in hand/);
    assert.match(node.err, /the grace period \(1 s\) is over/);
    assert.doesNotMatch(node.err, /second signal/, 'one signal was sent');
    const p = await eventually(async () => {
      const q = (await api(srv, 'GET', `/api/jobs/${id}`)).json.progress;
      return q && q.items_in_flight === 0 ? q : null;
    }, 'the claims handed back', 30000);
    assert.ok(p.reclaims >= 1);
  } finally {
    if (node.child.exitCode === null) node.child.kill('SIGKILL');
    await stop(srv);
  }
});

test('a coordinator killed and restarted: nodes come back by themselves and the job completes', async () => {
  // heartbeats every 100 ms: the session writes its work every 1.2 s, long
  // before the job is done
  const db = await ownDb();
  const first = await serve(['--open-enrolment', '--heartbeat-ms', '100'], db.url);
  const port = first.port;
  const items = 300000000, seed = 41;
  const id = await submit(first, items, seed);
  const node = proc(['node', '--server', server(first), '--key', path.join(tmp, 'restart.key'), '--cores', '2']);
  let second;
  try {
    const nodeId = Number((await node.until(/as node (\d+)/, 'node connected'))[1]);
    await inFlight(first, id);
    // what the session wrote while it worked survives the kill
    const saved = Number(await eventually(async () => {
      const v = await db.q(`SELECT items FROM node_work WHERE node = ${nodeId}`);
      return v !== '' && Number(v) > 0 ? v : null;
    }, 'the session\'s work written while it works', 30000));
    first.child.kill('SIGKILL');
    assert.ok(saved < items, `the job was done (${saved} items) before the coordinator was killed`);
    await first.exited;
    await node.until(/lost 127\.0\.0\.1:\d+/, 'the node sees the coordinator go');
    second = await serve(['--open-enrolment', '--heartbeat-ms', '100', '--listen', `127.0.0.1:${port}`], db.url);
    const before = (node.out.match(/as node \d+/g) ?? []).length;
    await eventually(async () => (node.out.match(/as node \d+/g) ?? []).length > before, 'the node reconnected', 90000);
    const job = await jobEnded(second, id);
    sameBits(job, await localRun(items, seed));
    const total = (await api(second, 'GET', `/api/nodes/${nodeId}`)).json.items_total;
    assert.ok(total > saved && total <= items, `${saved} written before the kill, ${total} in all, of ${items}`);
    // once the live session has written its count too, it is still in the
    // total once: the first session's row plus the live count
    const n = await eventually(async () => {
      const v = (await api(second, 'GET', `/api/nodes/${nodeId}`)).json;
      const rows = await db.q(`SELECT count(*) FROM node_work WHERE node = ${nodeId} AND items = ${v.items_done}`);
      return rows === '1' ? v : null;
    }, 'the live session\'s count written', 30000);
    assert.equal(n.items_total, Number(await db.q(`SELECT sum(items) FROM node_work WHERE node = ${nodeId}`)));
    assert.equal(n.items_total, saved + n.items_done);
  } finally {
    assert.equal((await stop(node)).code, 0, node.err);
    if (second) await stop(second);
  }
});

test('a coordinator whose LISTEN session ends hands out no work until it holds its lock again', async () => {
  const db = await ownDb();
  const s = await serve(['--open-enrolment', '--chunk-ms', '100'], db.url);
  const id = await submit(s, 1e12, 43);
  const node = proc(['node', '--server', server(s), '--key', path.join(tmp, 'relock.key'), '--cores', '1']);
  const accepted = async () => Number(await db.q(`SELECT count(*) FROM journal WHERE job_id = ${id} AND type = 1`));
  const end = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'simfarm coordinator' " +
    'AND datname = current_database()';
  const lost = () => (s.err.match(/the coordinator's lock went with connection \d+: no work is handed out until it is held again/g) ?? []).length;
  let holder;
  try {
    await node.until(/as node \d+/, 'node connected');
    await eventually(async () => (await accepted()) >= 3, 'chunks accepted', 60000);

    // the session ended and the lock free: the coordinator takes it again
    // as it reconnects, and the work goes on
    await db.q(end);
    await s.until(/the coordinator's lock is held again/, 'the lock held again');
    assert.equal(lost(), 1, s.err);
    const n = await accepted();
    await eventually(async () => (await accepted()) >= n + 3, 'chunks accepted with the lock back', 30000);
    const h = await api(s, 'GET', '/health');
    assert.deepEqual([h.status, h.json.lock], [200, 'held']);
    assert.equal((await metrics(s)).simfarm_coordinator_lock_held, 1);

    // the session ended and the lock taken by another before the
    // coordinator is back: not one chunk more is handed out while it asks
    // for the lock, and then it stops
    holder = spawn('psql', ['-X', '-q', '-h', pg.host, '-p', String(pg.port), '-U', pg.user, '-d', db.name],
      { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    holder.stdout.on('data', (d) => { out += d; });
    holder.stdin.write(`${end}; SELECT pg_advisory_lock(7216058); SELECT 'locked';\n`);
    await eventually(() => out.includes('locked') && lost() === 2, 'the lock lost and taken', 10000);
    const was = await accepted();
    const wait = await eventually(async () => {
      const r = await api(s, 'GET', '/health');
      return r.status === 503 ? r : null;
    }, 'health while the lock is not held', 5000);
    assert.deepEqual([wait.json.status, wait.json.database, wait.json.lock], ['degraded', 'up', 'not held']);
    assert.equal((await metrics(s)).simfarm_coordinator_lock_held, 0);
    await s.until(/another coordinator uses this database: PostgreSQL session \d+ \(psql,/, 'the coordinator giving up');
    assert.equal((await s.exited).code, 1, s.err);
    // only what the node (one core) had in hand when the lock went came in
    // after it; had the coordinator gone on handing out 100 ms chunks, it
    // would be dozens
    const more = (await accepted()) - was;
    assert.ok(more <= 2, `${more} chunks accepted while the lock was not held\n${s.err}`);
  } finally {
    holder?.stdin.end();
    if (holder) await new Promise((resolve) => holder.on('exit', resolve));
    await stop(node);
    await stop(s);
  }
});

test('an expired claim token enrols nobody', async () => {
  const closed = await serve([], (await ownDb()).url);
  try {
    const t = await api(closed, 'POST', '/api/tokens', { kind: 'claim', owner: 'ops', tier: 'team', expires_in: 1 });
    assert.equal(t.status, 201, JSON.stringify(t.json));
    const expiry = Date.parse(t.json.expires_at);
    assert.ok(expiry > 0, JSON.stringify(t.json));
    await eventually(async () => Date.now() > expiry + 100, 'the token expired', 10000);
    const node = proc(['node', '--server', server(closed), '--key', path.join(tmp, 'late.key'), '--claim-token',
      t.json.token]);
    const e = await node.exited;
    assert.equal(e.code, 3, node.err);
    assert.match(node.err, /claim token is unknown, used up, revoked or expired/);
  } finally {
    await stop(closed);
  }
});
