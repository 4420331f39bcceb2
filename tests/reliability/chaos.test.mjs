// Chaos: one coordinator, PostgreSQL, six native nodes behind a
// fault-injecting proxy, and one job. A seeded schedule kills nodes
// (SIGKILL and SIGTERM) and starts them again, cuts and delays their
// connections, kills and restarts the coordinator, and restarts
// PostgreSQL. The job must complete with the result of one undisturbed
// local run to the last bit, the journal must hold each item range exactly
// once, and no process may be left behind.
//
// CHAOS_SEED picks the schedule (printed, so a failure can be replayed);
// CHAOS_ITEMS sizes the job (`make soak` runs a long one).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accepts, assertTiles } from '../lib/journal.mjs';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, serve } from '../lib/coord.mjs';
import { faultProxy } from '../lib/faultproxy.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build, run } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const SEED = Number(process.env.CHAOS_SEED ?? Date.now() % 100000);
const ITEMS = Number(process.env.CHAOS_ITEMS ?? 150000000);
const NODES = 6;
const params = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, q: 0, sigma: 0.2, T: 1, steps: 16,
  antithetic: true, greeks: true };

// mulberry32: a small seeded generator for the schedule.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

test(`chaos: the job survives node, network, coordinator and database faults (seed ${SEED})`, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-chaos-'));
  const random = rng(SEED);
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const pids = new Set();
  const faults = { sigkill: 0, sigterm: 0, drop: 0, delay: 0, coordinator: 0, database: 0 };
  const pg = await startPostgres();
  // Short chunks: what a farm whose nodes come and go would be run with.
  const flags = ['--open-enrolment', '--chunk-ms', '1000'];
  let srv = await serve(pg.url, { extra: flags });
  pids.add(srv.pid);
  const port = srv.port;
  const proxy = await faultProxy(port);
  const nodes = [];

  const start = (i) => {
    const child = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${proxy.port}/ws/node`,
      '--key', path.join(tmp, `node${i}.key`), '--cores', '1', '--grace', '2'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const n = { i, child, err: '', exited: new Promise((resolve) => child.on('exit', resolve)) };
    child.stderr.on('data', (d) => { n.err = (n.err + d).slice(-4000); });
    pids.add(child.pid);
    nodes[i] = n;
  };
  const running = () => nodes.filter((n) => n.child.exitCode === null && n.child.signalCode === null);

  try {
    for (let i = 0; i < NODES; i++) start(i);
    // The nodes join under open enrolment, as public nodes: the job names that tier.
    const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items: ITEMS, seed: SEED,
      tiers: ['own', 'team', 'community', 'public'],
      verify: { trust: ['own', 'team', 'community', 'public'] } });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    const id = res.json.id;
    console.log(`# chaos seed ${SEED}: job ${id}, ${ITEMS} items, ${NODES} nodes`);

    const deadline = Date.now() + 600000;
    let job = null, coordinatorDone = false, databaseDone = false;
    while (!job) {
      assert.ok(Date.now() < deadline, `job ${id} not complete in 600 s; faults ${JSON.stringify(faults)}`);
      await new Promise((resolve) => setTimeout(resolve, 400 + random() * 800));
      let j;
      try {
        j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
      } catch {
        continue; // the coordinator is restarting
      }
      if (j.state === 'complete') { job = j; break; }
      assert.equal(j.state, 'running', JSON.stringify(j));
      const done = (j.progress?.items_done ?? 0) / ITEMS;

      // Dead nodes come back (same key: the same node).
      for (let i = 0; i < NODES; i++) if (!running().includes(nodes[i])) start(i);
      proxy.delay(0);
      const r = random();
      if (!coordinatorDone && done > 0.3) {
        coordinatorDone = true;
        faults.coordinator++;
        process.kill(srv.pid, 'SIGKILL');
        await srv.stop();
        srv = await serve(pg.url, { extra: [...flags, '--listen', `127.0.0.1:${port}`] });
        pids.add(srv.pid);
      } else if (!databaseDone && (done > 0.55 || coordinatorDone)) {
        // at once after the coordinator's restart: a job that runs fast
        // must still see both
        databaseDone = true;
        faults.database++;
        await pg.restart();
      } else if (r < 0.3) {
        faults.sigkill++;
        pick(running()).child.kill('SIGKILL');
      } else if (r < 0.5) {
        faults.sigterm++;
        pick(running()).child.kill('SIGTERM');
      } else if (r < 0.7) {
        faults.drop++;
        proxy.drop();
      } else if (r < 0.85) {
        faults.delay++;
        proxy.delay(Math.floor(50 + random() * 250));
      }
    }
    console.log(`# chaos seed ${SEED}: faults ${JSON.stringify(faults)}`);
    assert.ok(faults.coordinator === 1 && faults.database === 1, JSON.stringify(faults));

    // Each item range accepted exactly once.
    assertTiles(await accepts(pg, id), ITEMS);

    // The result of one undisturbed local run, to the last bit.
    const pfile = path.join(tmp, 'params.json');
    fs.writeFileSync(pfile, JSON.stringify(params));
    const local = await run(simfarm, ['sim', 'option', pfile, '--items', String(ITEMS), '--seed', String(SEED), '--json'],
      { timeoutMs: 600000 });
    assert.equal(local.code, 0, local.stderr);
    assert.deepEqual(job.result.outputs.map(({ name, count, mean, stderr, min, max }) =>
      ({ name, count, mean, stderr, min, max })), JSON.parse(local.stdout).outputs);
    assert.equal(job.result.digest, JSON.parse(local.stdout).digest, 'the result\'s bytes are the local run\'s');
  } finally {
    for (const n of nodes) if (n && n.child.exitCode === null) n.child.kill('SIGTERM');
    await Promise.all(nodes.map((n) => n && Promise.race([n.exited,
      new Promise((resolve) => setTimeout(() => { n.child.kill('SIGKILL'); resolve(); }, 10000))])));
    await srv.stop();
    await proxy.close();
    await pg.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  await new Promise((resolve) => setTimeout(resolve, 200)); // reaped by the kernel
  const left = [...pids].filter(alive);
  assert.deepEqual(left, [], 'processes left behind');
});
