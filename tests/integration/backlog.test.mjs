// The store's backlog while PostgreSQL is away: /health and /metrics show
// what the coordinator holds for the database and how long it has been
// gone; with a small bound, writes past it are refused (and /health says
// 503), and once the database is back the job completes with the result
// of one local run, every accepted range in the journal exactly once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top, stop } from '../lib/proc.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { startPostgres, psql } from '../lib/pg.mjs';

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
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-backlog-'));

function proc(args) {
  const child = spawn(simfarm, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const p = { out: '', child, exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
  child.stdout.on('data', (d) => { p.out += d; });
  child.stderr.on('data', (d) => { p.out += d; });
  return p;
}

let pg;
const procs = [];
before(async () => { pg = await startPostgres(); });
after(async () => {
  for (const p of procs) await stop(p);
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

let serves = 0;
async function serve(extra) {
  const tokenFile = path.join(tmp, `token-${++serves}`);
  const s = proc(['serve', '--db', pg.url, '--listen', '127.0.0.1:0', '--token-file', tokenFile, '--open-enrolment',
    '--chunk-ms', '200', ...extra]);
  procs.push(s);
  const m = await eventually(() => s.out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/), 'listening', 30000);
  await eventually(() => /database up/.test(s.out), 'database up', 30000);
  s.port = Number(m[1]);
  s.url = `http://127.0.0.1:${s.port}`;
  s.token = fs.readFileSync(tokenFile, 'utf8').trim();
  return s;
}

async function health(s) {
  const res = await fetch(`${s.url}/health`, { signal: AbortSignal.timeout(10000) });
  return { status: res.status, json: await res.json() };
}

async function job(s, id) {
  const res = await fetch(`${s.url}/api/jobs/${id}`, { signal: AbortSignal.timeout(15000) });
  return res.json();
}

async function submit(s, items, seed) {
  const res = await fetch(`${s.url}/api/jobs`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` },
    body: JSON.stringify({ kernel: 'option', params: option, items, seed, tiers, verify }), signal: AbortSignal.timeout(15000) });
  assert.equal(res.status, 201);
  return (await res.json()).id;
}

// Each accepted range of the job once, and no two overlapping.
async function journalOnce(id) {
  const rows = (await psql(pg, `SELECT variant, first_item, item_count FROM journal WHERE job_id = ${id} AND type = 1 ` +
    'ORDER BY variant, first_item')).split('\n').filter(Boolean).map((l) => l.split('|').map(Number));
  for (let i = 1; i < rows.length; i++)
    if (rows[i][0] === rows[i - 1][0])
      assert.ok(rows[i][1] >= rows[i - 1][1] + rows[i - 1][2], `journal ranges overlap: ${rows[i - 1]} and ${rows[i]}`);
  return rows;
}

// A job the node works on for a while; the database goes away under it.
// quiet: the node is killed before the outage (its claims are handed out
// again later) and another joins after it, so only the test's own requests
// reach the store while the database is away.
async function outage(s, { items, seed, cores, during, quiet = false }) {
  const id = await submit(s, items, seed);
  const local = localRun(items, seed);
  const startNode = (k) => {
    const n = proc(['node', '--server', `ws://127.0.0.1:${s.port}/ws/node`, '--key', path.join(tmp, `n${serves}-${k}.key`),
      '--cores', String(cores)]);
    procs.push(n);
    return n;
  };
  let node = startNode(1);
  await eventually(async () => (await job(s, id)).progress?.chunks_accepted >= 4, 'chunks accepted', 60000);
  if (quiet) {
    node.child.kill('SIGKILL');
    await node.exited;
  }
  await pg.pause();
  try {
    await during(id);
  } finally {
    await pg.resume();
  }
  if (quiet)
    node = startNode(2);
  const h = await eventually(async () => { const x = await health(s); return x.status === 200 && x; }, 'healthy again');
  assert.equal(h.json.database, 'up');
  const done = await eventually(async () => { const j = await job(s, id); return j.state !== 'running' && j; },
    'job ended', 120000).catch((e) => { throw new Error(`${e.message}\n${s.out.slice(-3000)}\n${node.out.slice(-2000)}`); });
  sameBits(done, await local);
  await journalOnce(id);
  const after = await health(s);
  assert.equal(after.json.backlog.queries, 0);
  assert.equal(after.json.backlog.bytes, 0);
  await stop(node);
  return after;
}

test('with the database away, /health and /metrics show the backlog and the outage', async () => {
  const s = await serve([]);
  const h0 = await health(s);
  assert.equal(h0.status, 200);
  assert.equal(h0.json.database_unreachable_s, 0);
  assert.deepEqual(h0.json.backlog, { state: 'accepting', queries: 0, bytes: 0, limit_bytes: 256 * 1048576, refused: 0 });
  await outage(s, {
    items: 900000000, seed: 11, cores: 4,
    during: async () => {
      // The node's results of the chunks it holds queue up, and stay.
      const h = await eventually(async () => {
        const x = await health(s);
        return x.json.database === 'down' && x.json.backlog.queries >= 1 && x.json.database_unreachable_s > 0.5 && x;
      }, 'a backlog while the database is away', 30000);
      assert.equal(h.status, 503);
      assert.equal(h.json.status, 'degraded');
      assert.ok(h.json.backlog.bytes > 200 * h.json.backlog.queries, JSON.stringify(h.json));
      const later = await eventually(async () => {
        const x = await health(s);
        return x.json.database_unreachable_s > h.json.database_unreachable_s + 0.5 && x;
      }, 'the outage grows', 10000);
      assert.ok(later.json.backlog.queries >= h.json.backlog.queries);
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^simfarm_database_up 0$/m);
      assert.match(m, /^simfarm_db_backlog_queries [1-9]\d*$/m);
      assert.match(m, /^simfarm_db_backlog_bytes [1-9]\d*$/m);
      assert.match(m, /^simfarm_db_backlog_limit_bytes 268435456$/m);
      assert.match(m, /^simfarm_db_backlog_refusing 0$/m);
      assert.match(m, /^simfarm_database_unreachable_seconds \d+\.\d$/m);
    },
  });
  await stop(s);
});

test('past a small bound, queries are refused, and nothing taken is lost', async () => {
  // 16 KiB: a few dozen API reads, held while the database is away, fill it.
  // (Results that come while it refuses are not tested here: see
  // docs/coordinator.md, "The backlog bound".)
  const s = await serve(['--db-backlog-mb', '0.015625']);
  assert.equal((await health(s)).json.backlog.limit_bytes, 16384);
  const statuses = [];
  let reads;
  const after = await outage(s, {
    items: 300000000, seed: 12, cores: 2, quiet: true,
    during: async (id) => {
      await eventually(async () => (await health(s)).json.database === 'down', 'the store sees the outage', 30000);
      reads = Promise.all(Array.from({ length: 80 }, () => fetch(`${s.url}/api/jobs/${id}`,
        { signal: AbortSignal.timeout(120000) }).then(async (r) => {
        statuses.push(r.status);
        return { status: r.status, json: await r.json() };
      })));
      const h = await eventually(async () => {
        const x = await health(s);
        return x.json.backlog.refused > 0 && x;
      }, 'queries refused', 30000);
      assert.equal(h.status, 503);
      assert.equal(h.json.status, 'refusing');
      assert.equal(h.json.backlog.state, 'refusing');
      assert.ok(h.json.backlog.bytes <= 16384, JSON.stringify(h.json));
      // Refused at once, while the database is still away: the caller is told.
      await eventually(() => statuses.includes(503), 'a refused read answered 503', 10000);
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^simfarm_db_backlog_refusing 1$/m);
      assert.match(m, /^simfarm_db_backlog_refused_total [1-9]\d*$/m);
      assert.match(s.out, /backlog full/);
    },
  });
  // Every read was answered: the refused ones 503 with why, the held ones
  // with the job once the database was back.
  const answers = await reads;
  const refused = answers.filter((a) => a.status === 503);
  assert.ok(refused.length > 0 && refused.length < answers.length, answers.map((a) => a.status).join(' '));
  assert.match(refused[0].json.error.message ?? JSON.stringify(refused[0].json), /backlog is full/);
  assert.ok(answers.every((a) => a.status === 503 || a.status === 200), answers.map((a) => a.status).join(' '));
  assert.equal(after.json.backlog.state, 'accepting');
  assert.ok(after.json.backlog.refused >= refused.length);
  await stop(s);
});

test('a database that stops answering: the coordinator sees it within seconds (its lock given up, health 503) and goes on once it answers', async () => {
  const own = await startPostgres();
  const tokenFile = path.join(tmp, 'frozen-token');
  const s = proc(['serve', '--db', own.url, '--listen', '127.0.0.1:0', '--token-file', tokenFile, '--open-enrolment',
    '--chunk-ms', '200']);
  let node;
  try {
    const m = await eventually(() => s.out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/), 'listening', 30000);
    await eventually(() => /database up/.test(s.out), 'database up', 30000);
    s.url = `http://127.0.0.1:${m[1]}`;
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    const res = await fetch(`${s.url}/api/jobs`, { method: 'POST', headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ kernel: 'option', params: option, items: 1e12, seed: 9, tiers, verify }) });
    assert.equal(res.status, 201);
    const { id } = await res.json();
    node = proc(['node', '--server', `ws://127.0.0.1:${m[1]}/ws/node`, '--key', path.join(tmp, 'frozen.key'), '--cores', '1']);
    await eventually(async () => (await job(s, id)).progress?.items_done > 0, 'work accepted', 60000);
    assert.equal((await health(s)).status, 200);

    own.freeze(); // its sockets stay open; nothing answers
    try {
      // A read that needs it gets its 503 when the wait for the database
      // ends, not a connection closed before the answer.
      const slow = await fetch(`${s.url}/api/jobs/${id}`, { signal: AbortSignal.timeout(30000) });
      assert.equal(slow.status, 503);
      assert.match((await slow.json()).error, /did not answer in time/);
      await eventually(() => /no answer from the database to SELECT 1 within 10 s/.test(s.out), 'the probe unanswered', 30000);
      assert.match(s.out, /the coordinator's lock went with connection \d+: no work is handed out until it is held again/);
      const h = await health(s);
      assert.deepEqual([h.status, h.json.status, h.json.lock], [503, 'degraded', 'not held']);
    } finally {
      own.thaw();
    }
    await eventually(() => /the coordinator's lock is held again/.test(s.out), 'the lock held again', 60000);
    await eventually(async () => (await health(s)).status === 200, 'health 200 again', 30000);
    const before = (await job(s, id)).progress.items_done;
    await eventually(async () => (await job(s, id)).progress.items_done > before, 'work accepted again', 60000);
  } finally {
    if (node) await stop(node);
    await stop(s);
    await own.stop();
  }
});
