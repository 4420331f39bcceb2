// The journal under a database that does not take its writes: a lock that
// holds them, the previous coordinator's sessions stopped with writes in
// hand, a disk that fills. A real PostgreSQL, real `simfarm serve` and two
// real `simfarm node` processes, one option job each.
//
// 1. A transaction holds LOCK TABLE journal IN EXCLUSIVE MODE (SELECTs go
//    on, INSERTs wait); once a journal write of the coordinator waits on it,
//    the coordinator is killed (SIGKILL) and another started on the same
//    database; the lock is let go once the new one's own journal write
//    waits on it too (it has loaded the job and handed its ranges out).
//    Its writes must not meet those of the killed one, still queued behind
//    the lock: the new coordinator ends the previous one's sessions before
//    it reads the journal.
// 2. The coordinator's pool sessions are stopped (SIGSTOP to their
//    backends) with writes in hand, the coordinator killed, another
//    started: while those sessions live it reads no journal and hands out
//    no work (/health 503, "lock":"fencing", "fence_waiting" >= 1, a log
//    line naming the previous coordinator); once they are let go (SIGCONT)
//    it ends them and goes on.
// 3. The journal's tablespace on a small tmpfs that is filled mid-job: its
//    INSERTs fail (No space left on device). /health 503 with the journal
//    "failing" and the error, the failing and retrying gauges in /metrics,
//    no new chunk handed out (a node that joins then gets none; the job's
//    accepted items stay within what was in flight); the coordinator killed
//    in that window and started again finds the same; once the disk has
//    room, /health 200 and the job completes. Skipped, with the reason,
//    where this machine does not let the test mount a tmpfs.
//
// After each: the journal's accepts tile [0, items) once per variant, the
// last point of /convergence is the job's result, and that result equals
// one local run (`simfarm sim --json`) to the last bit.
//
// JOURNAL_ITEMS sizes the jobs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { metrics } from '../lib/coord.mjs';
import { accepts, assertTiles } from '../lib/journal.mjs';
import { ScriptedNode } from '../lib/nodeproto.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { freePort, get, holdLock, launch, sessions, signal, tmpfs } from '../lib/pgfault.mjs';
import { build, eventually, top } from '../lib/proc.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';

const simfarm = path.join(build, 'bin/simfarm');
// examples/option.json, as localRun() computes it: with chunks of a second
// (--chunk-ms 1000), two nodes of one core each take about 10 s over it
// on a 2-core machine, and each node holds a chunk when a fault comes.
const ITEMS = Number(process.env.JOURNAL_ITEMS ?? 300000000);
const NODES = 2;
const params = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
// The nodes join under open enrolment, as public nodes; every tier is
// trusted, so no result waits for a check by another owner's node.
const tiers = ['own', 'team', 'community', 'public'];
const TEST_MS = 240000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// eventually(), its failure saying what say() says then (a coordinator's
// log by the deadline, not at the start).
async function until(check, say, ms, every = 100) {
  try {
    return await eventually(check, 'condition', ms, every);
  } catch (e) {
    throw new Error(`${await say()} (${e.message})`);
  }
}

// A cluster, a coordinator on a port that stays the same across its
// restarts (the nodes come back to it by themselves), two nodes, and
// everything they started, ended by close().
class Farm {
  static async start() {
    const f = new Farm();
    f.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-journal-'));
    f.coords = [];
    f.nodes = [];
    f.stopped = new Set(); // backends under SIGSTOP: sent SIGCONT by close()
    f.locks = [];
    f.pg = await startPostgres();
    f.port = await freePort();
    f.tokenFile = path.join(f.tmp, 'token');
    try {
      const c = f.serve();
      await c.listening;
      await c.up;
      for (let i = 0; i < NODES; i++) {
        const child = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${f.port}/ws/node`,
          '--key', path.join(f.tmp, `node${i}.key`), '--cores', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
        const n = { child, err: '', exited: new Promise((resolve) => child.on('exit', resolve)) };
        child.stderr.on('data', (d) => { n.err = (n.err + d).slice(-4000); });
        f.nodes.push(n);
      }
    } catch (e) {
      await f.close();
      throw e;
    }
    return f;
  }

  // A new coordinator on the farm's database and port (the previous one
  // killed first), returned before its database is up.
  serve() {
    const c = launch(this.pg.url, { port: this.port, tokenFile: this.tokenFile,
      extra: ['--open-enrolment', '--chunk-ms', '1000'] });
    this.coords.push(c);
    this.coord = c;
    return c;
  }

  async submit(seed) {
    const c = this.coord;
    await c.listening;
    const res = await fetch(`${c.url}/api/jobs`, { method: 'POST', signal: AbortSignal.timeout(15000),
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kernel: 'option', params, items: ITEMS, seed, tiers, verify: { trust: tiers } }) });
    const text = await res.text();
    assert.equal(res.status, 201, text);
    return JSON.parse(text).id;
  }

  // The job as GET /api/jobs/ID has it, or null while nothing answers.
  async job(id) {
    const r = await get(this.coord, `/api/jobs/${id}`, this.coord.token);
    return r?.status === 200 ? r.json : null;
  }

  // Items of the job's accepts in the journal.
  async accepted(id) {
    return Number(await psql(this.pg, `SELECT coalesce(sum(item_count), 0) FROM journal WHERE job_id = ${id} AND type = 1`));
  }

  // Resolves once the journal holds a twentieth of the job: its chunks
  // have their full size, and most of the job is still to come.
  async underway(id) {
    await eventually(async () => {
      const j = await this.job(id);
      if (j && j.state !== 'running' && j.state !== 'pending') throw new Error(`job ${id} ended early: ${JSON.stringify(j)}`);
      return (await this.accepted(id)) >= ITEMS / 20;
    }, `job ${id} a twentieth done`, 60000, 100);
  }

  // The job once it has ended.
  async finished(id, ms = 120000) {
    let j;
    return until(async () => {
      j = (await this.job(id)) ?? j;
      return j && !['pending', 'running'].includes(j.state) ? j : null;
    }, () => `job ${id} has not ended: ${JSON.stringify(j)}; the coordinator said:\n${this.coord.stderr().slice(-3000)}`,
    ms, 200);
  }

  stop(pids) {
    for (const p of pids) this.stopped.add(p);
    signal(pids, 'SIGSTOP');
  }

  cont(pids) {
    signal(pids, 'SIGCONT');
    for (const p of pids) this.stopped.delete(p);
  }

  async close() {
    signal([...this.stopped], 'SIGCONT');
    for (const l of this.locks) await l.kill().catch(() => {});
    for (const n of this.nodes) if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGKILL');
    await Promise.all(this.nodes.map((n) => n.exited));
    for (const c of this.coords) await c.kill();
    await this.pg?.stop();
    fs.rmSync(this.tmp, { recursive: true, force: true });
  }
}

// What every scenario ends with: the job complete, its accepts tiling
// [0, ITEMS) once per variant, the last point of its convergence its
// result, and that result one local run's to the last bit.
async function checkJob(f, id, local) {
  const job = await f.finished(id);
  assert.equal(job.state, 'complete', JSON.stringify(job));

  assertTiles(await accepts(f.pg, id), ITEMS);

  const conv = await get(f.coord, `/api/jobs/${id}/convergence`);
  assert.equal(conv?.status, 200, conv?.text);
  const last = conv.json.points.at(-1);
  assert.equal(last[0], ITEMS, `the convergence's last point counts ${last[0]} items, not ${ITEMS}: ${JSON.stringify(conv.json).slice(0, 400)}`);
  assert.equal(conv.json.outputs, job.result.outputs.length);
  job.result.outputs.forEach((o, i) => {
    assert.equal(last[1 + 2 * i], o.mean, `convergence: the mean of ${o.name}`);
    assert.equal(last[2 + 2 * i], o.stderr, `convergence: the standard error of ${o.name}`);
  });

  sameBits(job, await local);
}

// Sessions of the cluster waiting on a heavyweight lock, but the one holding it.
const lockWaiters = async (f, holder) => (await sessions(f.pg)).filter((s) => s.pid !== holder && s.waitType === 'Lock');

test('journal INSERTs held by a lock, coordinator killed: the new one ends the held writes before it reads the journal',
  { timeout: TEST_MS }, async () => {
    const f = await Farm.start();
    try {
      const id = await f.submit(43);
      await f.underway(id);
      const local = localRun(ITEMS, 43);
      const lock = await holdLock(f.pg, 'journal', 'EXCLUSIVE');
      f.locks.push(lock);
      const held = await eventually(async () => {
        const w = await lockWaiters(f, lock.pid);
        return w.length > 0 ? w : null;
      }, 'a journal write of the coordinator waiting on the lock', 60000, 50);
      // Every session of the killed coordinator: its listener and its pool.
      const old = (await sessions(f.pg)).filter((s) => s.pid !== lock.pid);
      console.log(`# job ${id}: ${held.length} journal write(s) wait on the lock (pids ${held.map((s) => s.pid)}); ` +
        `the coordinator's sessions: ${JSON.stringify(old.map(({ pid, app }) => ({ pid, app })))}`);
      await f.coord.kill();

      const c2 = f.serve();
      // The new coordinator has read the journal and handed out ranges
      // once a journal write of its own waits on the lock.
      const mine = await until(async () => {
        const w = (await lockWaiters(f, lock.pid)).filter((s) => !old.some((o) => o.pid === s.pid));
        return w.length > 0 ? w : null;
      }, async () => `no journal write of the new coordinator waits on the lock; sessions: ` +
        `${JSON.stringify(await sessions(f.pg))}; /health ${(await get(c2, '/health'))?.text}; it said:\n${c2.stderr()}`,
      90000);
      const left = (await sessions(f.pg)).filter((s) => old.some((o) => o.pid === s.pid));
      console.log(`# the new coordinator's write waits (pids ${mine.map((s) => s.pid)}); ` +
        `sessions of the killed one still there: ${JSON.stringify(left)}`);
      await lock.release();

      await checkJob(f, id, local);
      assert.deepEqual(left, [], 'the new coordinator wrote the journal while sessions of the killed one, their ' +
        'writes queued behind the lock, were still there to commit them');
    } finally {
      await f.close();
    }
  });

test('pool backends stopped, coordinator killed: the new one waits for them, ends them, then goes on',
  { timeout: TEST_MS }, async () => {
    const f = await Farm.start();
    try {
      const id = await f.submit(4243);
      await f.underway(id);
      const local = localRun(ITEMS, 4243);
      const all = await sessions(f.pg);
      // The pool sessions name themselves and hold the fence's lock shared;
      // a coordinator that does neither: each of its sessions but the
      // listener's.
      let pool = all.filter((s) => s.app === 'simfarm coordinator pool' || s.fence);
      if (pool.length === 0) pool = all.filter((s) => s.app !== 'simfarm coordinator');
      const pids = pool.map((s) => s.pid);
      assert.ok(pids.length >= 1, `the coordinator's pool sessions: ${JSON.stringify(all)}`);
      f.stop(pids);
      // Writes in hand: more queries held than there are stopped sessions,
      // so each of them has one (sent, unanswered) and more wait.
      await eventually(async () => (await metrics(f.coord))['simfarm_db_backlog_queries'] > pids.length,
        'queries held for the stopped sessions', 30000, 50);
      const c1 = f.coord;
      console.log(`# job ${id}: pool sessions ${pids} stopped with ${(await metrics(c1))['simfarm_db_backlog_queries']} ` +
        'queries held');
      await c1.kill();

      const c2 = f.serve();
      let seen;
      const h = await until(async () => {
        const r = await get(c2, '/health');
        if (r) seen = r;
        return r && (r.status === 200 || r.json?.lock === 'fencing') ? r : null;
      }, () => `the new coordinator's /health does not say "fencing": ${seen?.status} ${seen?.text}; it said:\n` +
        c2.stderr(), 60000, 50);
      assert.equal(h.json?.lock, 'fencing', 'the new coordinator serves while the pool sessions of the killed one ' +
        `(PostgreSQL pids ${pids}, stopped with writes in hand) are there to commit them: /health ${h.status} ${h.text}`);
      assert.equal(h.status, 503, h.text);
      assert.ok(h.json.fence_waiting >= 1, `fence_waiting: ${h.text}`);
      await c2.until(() => c2.stderr().includes('previous coordinator'), 'a log line about the previous coordinator');
      // It holds there: no job loaded, no claim, /health still fencing.
      const holdUntil = Date.now() + 3000;
      while (Date.now() < holdUntil) {
        const r = await get(c2, '/health');
        assert.equal(r?.status, 503, `/health while the stopped sessions live: ${r?.status} ${r?.text}`);
        assert.equal(r.json.lock, 'fencing', r.text);
        const m = await metrics(c2);
        assert.equal(m.simfarm_jobs_running, 0, 'no job loaded while the stopped sessions live');
        assert.equal(m.simfarm_claims_in_flight, 0, 'no chunk handed out while the stopped sessions live');
        await sleep(250);
      }
      const there = (await sessions(f.pg)).filter((s) => pids.includes(s.pid)).map((s) => s.pid);
      assert.deepEqual(there, pids, 'the stopped sessions are still there (stopped, they cannot end)');

      f.cont(pids);
      await until(async () => (await sessions(f.pg)).every((s) => !pids.includes(s.pid)),
        () => `the new coordinator has not ended the previous one's sessions; it said:\n${c2.stderr()}`, 30000, 50);
      await until(async () => (await get(c2, '/health'))?.status === 200,
        async () => `/health after the fence: ${(await get(c2, '/health'))?.text}; it said:\n${c2.stderr()}`, 30000);
      await checkJob(f, id, local);
    } finally {
      await f.close();
    }
  });

test('the database disk fills mid-job: the journal is failing, no work handed out, then the job completes',
  { timeout: TEST_MS }, async (t) => {
    const disk = await tmpfs(16);
    if (disk.skip) {
      t.skip(disk.skip);
      return;
    }
    let f;
    try {
      f = await Farm.start();
      // The journal (not its indexes) on the tmpfs, after the coordinator
      // migrated the schema. A fillfactor of 10 leaves each page of it to
      // one row (a row is over 800 bytes), so the INSERT after the disk
      // fills needs a new page, and fails, rather than use up free space
      // pages already hold.
      await psql(f.pg, `CREATE TABLESPACE journal_disk LOCATION '${disk.dir}'`);
      await psql(f.pg, 'ALTER TABLE journal SET TABLESPACE journal_disk');
      await psql(f.pg, 'ALTER TABLE journal SET (fillfactor = 10)');
      const id = await f.submit(434343);
      await f.underway(id);
      const local = localRun(ITEMS, 434343);
      const filled = disk.fill();
      console.log(`# job ${id}: the journal's disk filled (${filled} bytes more)`);

      // Failing, said by /health and /metrics.
      const failing = async (c, what) => {
        let last;
        try {
          return await eventually(async () => {
            const j = await f.job(id);
            if (j && j.state !== 'running') throw new Error(`job ${id} ${j.state} with its journal's disk full: ${JSON.stringify(j)}`);
            last = await get(c, '/health');
            return last?.json?.journal?.state === 'failing' ? last : null;
          }, 'failing', 30000, 100);
        } catch (e) {
          throw new Error(`${what}: /health does not say the journal is failing (${e.message}); it says ` +
            `${last?.status} ${last?.text}; the coordinator said:\n${c.stderr().slice(-3000)}`);
        }
      };
      const h = await failing(f.coord, 'the disk full');
      assert.equal(h.status, 503, h.text);
      assert.match(String(h.json.journal.last_error), /No space left/, h.text);
      const m = await metrics(f.coord);
      assert.equal(m.simfarm_journal_failing, 1, 'simfarm_journal_failing');
      assert.ok(m.simfarm_journal_writes_retrying > 0, `simfarm_journal_writes_retrying ${m.simfarm_journal_writes_retrying}`);

      // No new chunk: the items accepted stay within those done or in
      // flight when the failing began, and a node that joins now gets
      // nothing, for as long as it lasts (5 s here).
      const p0 = (await f.job(id)).progress;
      const bound = p0.items_done + p0.items_in_flight;
      const probe = await ScriptedNode.connect(f.port);
      try {
        await probe.hello();
        const end = Date.now() + 5000;
        while (Date.now() < end) {
          const assigns = probe.msgs.filter((x) => x.type === 'assign');
          assert.deepEqual(assigns.map((x) => x.body), [], 'a node that joined while the journal fails was handed work');
          const p = (await f.job(id)).progress;
          assert.ok(p.items_done <= bound, `items accepted ${p.items_done} while the journal fails, past the ` +
            `${p0.items_done} done and ${p0.items_in_flight} in flight when it began`);
          const r = await get(f.coord, '/health');
          assert.equal(r?.json?.journal?.state, 'failing', `/health while the disk is full: ${r?.text}`);
          await sleep(250);
        }
      } finally {
        await probe.close();
      }

      // Killed in that window and started again: the new coordinator finds
      // its journal writes failing too.
      await f.coord.kill();
      const c2 = f.serve();
      await c2.listening;
      const h2 = await failing(c2, 'restarted with the disk full');
      assert.equal(h2.status, 503, h2.text);
      assert.match(String(h2.json.journal.last_error), /No space left/, h2.text);

      disk.unfill();
      await until(async () => (await get(c2, '/health'))?.status === 200,
        async () => `/health once the disk has room: ${(await get(c2, '/health'))?.text}; it said:\n` +
          c2.stderr().slice(-3000), 60000);
      await checkJob(f, id, local);
    } finally {
      try {
        await f?.close();
      } finally {
        await disk.unmount();
      }
    }
  });
