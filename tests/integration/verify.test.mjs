// Verified results against a real farm: PostgreSQL, `simfarm serve`, two
// honest `simfarm node` processes of two owners, and a saboteur — the
// native node built to change its results before it signs them
// (tests/integration/saboteur.c). In every case the job's result equals a
// local run to the last bit, the saboteur is quarantined (and revoked), and
// no honest node is.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, top, stop } from '../lib/proc.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { call, metrics, serve } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const saboteur = path.join(build, 'tests/integration/saboteur');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-verify-'));

function spawnNode(bin, args, env = {}) {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const p = { child, out: '' };
  child.stdout.on('data', (d) => { p.out += d; });
  child.stderr.on('data', (d) => { p.out += d; });
  p.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return p;
}

let pg, srv, honest = [];
let keys = 0;

// A node enrolled with a claim token of `owner` (community tier).
async function node(owner, sabotage, at = srv) {
  const t = await call(at, 'POST', '/api/tokens', { kind: 'claim', owner, tier: 'community', expires_in: 600 });
  assert.equal(t.status, 201, t.text);
  const args = ['--server', `ws://127.0.0.1:${at.port}/ws/node`, '--claim-token', t.json.token,
    '--key', path.join(tmp, `key-${++keys}`)];
  const p = sabotage === undefined
    ? spawnNode(simfarm, ['node', ...args, '--cores', '1', '--backend', 'cpu'])
    : spawnNode(saboteur, args, { SIMFARM_SABOTAGE: sabotage });
  p.key = args[args.length - 1];
  return p;
}

const nodesOf = async (owner) => (await psql(pg, `SELECT id, quarantined_at IS NOT NULL, revoked_at IS NOT NULL
  FROM nodes WHERE owner = '${owner}' ORDER BY id`)).split('\n').filter(Boolean)
  .map((l) => l.split('|')).map(([id, q, r]) => ({ id: Number(id), quarantined: q === 't', revoked: r === 't' }));

// Submits an option job that no tier is trusted for (every result may be
// checked) and waits for its end.
async function farmJob(items, seed) {
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed,
    tiers: ['community'], verify: { trust: [] } });
  assert.equal(res.status, 201, res.text);
  let shown = 0;
  return eventually(async () => {
    const j = (await call(srv, 'GET', `/api/jobs/${res.json.id}`)).json;
    if (process.env.VERIFY_DEBUG && Date.now() - shown > 3000) {
      shown = Date.now();
      console.error(JSON.stringify({ state: j.state, progress: j.progress ?? null, result: j.result?.verification }));
    }
    return j.state !== 'running' && j.state !== 'pending' ? j : null;
  }, `job ${res.json.id} ended`, 240000, 200);
}

before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--chunk-ms', '300'] });
  honest = [await node('alice'), await node('bob')];
});
after(async () => {
  for (const n of honest) await stop(n);
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('honest nodes: results are checked, none is quarantined, the result is exact', async () => {
  const items = 4000000, seed = 11;
  const job = await farmJob(items, seed);
  sameBits(job, await localRun(items, seed));
  const v = job.result.verification;
  assert.ok(v.checks_passed > 0, 'new nodes are checked');
  assert.equal(v.checks_failed, 0);
  assert.equal(v.checks_waiting, 0, 'complete once every check is decided');
  assert.deepEqual(v.quarantined_nodes, []);
  assert.equal(v.verified_items + v.trusted_items + v.unchecked_items, items);
  for (const owner of ['alice', 'bob'])
    for (const n of await nodesOf(owner)) assert.equal(n.quarantined, false, `${owner}'s node quarantined`);
});

for (const [sabotage, seed] of [['bias:0.01', 21], ['zeros', 22], ['fabricate', 23], ['every:3:0.5', 24]]) {
  test(`a saboteur (${sabotage}) is quarantined and undone: the result is exact`, async () => {
    const owner = `mallory-${seed}`;
    const bad = await node(owner, sabotage);
    try {
      const items = 6000000;
      const job = await farmJob(items, seed);
      if (process.env.VERIFY_DEBUG) console.error(srv.stderr());
      sameBits(job, await localRun(items, seed));
      const [m] = await nodesOf(owner);
      assert.ok(m, 'the saboteur enrolled');
      assert.ok(m.quarantined && m.revoked, `the saboteur is quarantined and revoked:\n${bad.out}`);
      assert.ok(job.result.verification.quarantined_nodes.includes(m.id));
      // the node's retracted ranges, listed with it: each of this job. An
      // accept of it whose write was in flight beside its quarantine's can
      // stay a plain accept row (left out all the same by every restore, as
      // the result shows): the list holds at most what the job retracted.
      const listed = (await call(srv, 'GET', `/api/nodes/${m.id}`)).json;
      assert.ok(listed.quarantined_at, JSON.stringify(listed));
      for (const r of listed.retracted) assert.equal(r.job, job.id);
      assert.ok(listed.retracted.reduce((n, r) => n + r.item_count, 0) <= job.result.verification.retracted_items);
      assert.ok(job.result.verification.checks_failed > 0 || job.result.verification.retracted_items > 0);
      for (const o of ['alice', 'bob'])
        for (const n of await nodesOf(o)) assert.equal(n.quarantined, false, `${o}'s node quarantined`);
      const mt = await metrics(srv);
      assert.ok(mt['simfarm_nodes_quarantined_total'] >= 1);
      // its session is ended with the reason, and it cannot come back: its
      // key is revoked, whatever claim token it shows
      await eventually(() => /quarantined/.test(bad.out), 'the saboteur told', 30000);
      const again = spawnNode(saboteur, ['--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', bad.key],
        { SIMFARM_SABOTAGE: sabotage });
      const e = await again.exited;
      assert.notEqual(e.code, 0, again.out);
      assert.match(again.out, /revoked/);
    } finally {
      await stop(bad);
    }
  });
}

test('a coordinator killed mid-job and restarted loses no check and no quarantine', async () => {
  const url = await createDatabase(pg, 'restart');
  const q = (sql) => psql(pg, sql, { db: 'restart' });
  const first = await serve(url, { extra: ['--chunk-ms', '300'] });
  const nodes = [await node('carol', undefined, first), await node('dave', undefined, first)];
  const bad = await node('mallory-restart', 'zeros', first);
  let second;
  try {
    const items = 200000000, seed = 31;
    const res = await call(first, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed,
      tiers: ['community'], verify: { trust: [] } });
    assert.equal(res.status, 201, res.text);
    const id = res.json.id;
    // killed once the saboteur is caught and part of the job is done
    await eventually(async () => (await q(`SELECT count(*) FROM nodes WHERE owner = 'mallory-restart'
      AND quarantined_at IS NOT NULL`)) === '1', 'the saboteur quarantined', 120000, 100);
    await eventually(async () => Number(await q(`SELECT count(*) FROM journal WHERE job_id = ${id} AND type = 1
      AND checked`)) > 0, 'results chosen for checks', 120000, 100);
    const done = Number(await q(`SELECT coalesce(sum(item_count), 0) FROM journal WHERE job_id = ${id} AND type = 1`));
    process.kill(first.pid, 'SIGKILL');
    await first.exited;
    assert.ok(done < items, `the job was done (${done} items) before the coordinator was killed`);
    second = await serve(url, { extra: ['--chunk-ms', '300', '--listen', `127.0.0.1:${first.port}`] });
    const job = await eventually(async () => {
      const j = (await call(second, 'GET', `/api/jobs/${id}`)).json;
      return j.state !== 'running' && j.state !== 'pending' ? j : null;
    }, 'the job ended after the restart', 240000, 200);
    sameBits(job, await localRun(items, seed));
    const [m] = await (async () => (await q(`SELECT id FROM nodes WHERE owner = 'mallory-restart'`))
      .split('\n').filter(Boolean).map(Number))();
    assert.ok(job.result.verification.quarantined_nodes.includes(m), JSON.stringify(job.result.verification));
    assert.equal(job.result.verification.checks_abandoned, 0);
    // every result chosen for a check was checked, before or after the kill
    assert.equal(await q(`SELECT count(*) FROM journal a WHERE a.job_id = ${id} AND a.type = 1 AND a.checked
      AND NOT EXISTS (SELECT 1 FROM journal v WHERE v.job_id = a.job_id AND v.type = 5 AND v.variant = a.variant
      AND v.first_item = a.first_item)`), '0');
    // the saboteur, which reconnects by itself, is refused
    await eventually(() => /revoked|quarantined/.test(bad.out), 'the saboteur refused', 60000);
  } finally {
    for (const n of [...nodes, bad]) await stop(n);
    if (second) await second.stop();
    else await first.stop().catch(() => {});
  }
});
