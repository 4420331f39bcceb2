// The journal's writes when the database refuses them or falls behind,
// against the real binary, a real PostgreSQL and a real node
// (docs/coordinator.md, "Failed writes"):
// - journal INSERTs refused for a while (a trigger of the test's own raises
//   an error while a row of its table exists, as a full disk would answer):
//   /health says 503 with the journal "failing" and the database's words in
//   one line, /metrics the gauges, no chunk is handed out meanwhile, the log
//   says it once (and reminds); once the refusal is lifted every write
//   refused is sent again and commits, the job ends with one local run's
//   result, its accepted ranges tile [0, items) in the journal, and the log
//   says the writes succeed again;
// - a journal INSERT held by a lock: "the database is behind" is said while
//   the INSERT still waits, not once it returns.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, stop, top } from '../lib/proc.mjs';
import { accepts, assertTiles } from '../lib/journal.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { call, metrics, serve } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
// Every tier, each trusted: these tests are about the journal, not
// spot-checks, and the lone public node could not be checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-journal-writes-'));

let pg, srv;
const nodes = [];

function startNode(name) {
  const child = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key',
    path.join(tmp, `${name}.key`), '--cores', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const n = { child, out: '', exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
  child.stdout.on('data', (d) => { n.out += d; });
  child.stderr.on('data', (d) => { n.out += d; });
  nodes.push(n);
  return n;
}
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '200'] });
  // The refusal: a journal row is refused while `refuse_journal` holds a
  // row. Its message has a line break, as libpq's messages do.
  await psql(pg, `CREATE TABLE refuse_journal (why text);
    CREATE FUNCTION refuse_journal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF EXISTS (SELECT 1 FROM refuse_journal) THEN
        RAISE EXCEPTION E'journal refused by the test\\nas a full disk would';
      END IF;
      RETURN NEW; END $$;
    CREATE TRIGGER refuse_journal BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION refuse_journal();`);
  startNode('first');
});

after(async () => {
  for (const n of nodes) await stop(n);
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// confirm_large: the farm's speed measured while writes were refused is
// slow, and a job sized to outlast a held write would be refused as too long.
async function submit(items, seed) {
  const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers,
    verify: { trust: tiers }, confirm_large: true });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

const jobOf = async (id) => (await call(srv, 'GET', `/api/jobs/${id}`)).json;
const health = () => call(srv, 'GET', '/health', undefined, null);
const lines = (re) => srv.stderr().split('\n').filter((l) => re.test(l));

test('journal writes the database refuses are sent again until they commit; no work is handed out meanwhile', async () => {
  const items = 100000000;
  const seed = 21;
  const local = localRun(items, seed);
  const id = await submit(items, seed);
  await eventually(async () => (await jobOf(id)).progress?.chunks_accepted >= 2, 'chunks accepted', 60000);
  const first = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.online).id;
  const h0 = await health();
  assert.equal(h0.status, 200, h0.text);
  assert.deepEqual(h0.json.journal, { state: 'ok', retrying: 0, failing_s: null, last_error: null,
    oldest_write_s: h0.json.journal.oldest_write_s });
  assert.equal(h0.json.fence_waiting, 0);
  assert.equal(h0.json.lock, 'held');

  await psql(pg, "INSERT INTO refuse_journal VALUES ('on')");
  try {
    const h = await eventually(async () => {
      const x = await health();
      return x.json.journal.state === 'failing' && x;
    }, 'health says the journal fails', 30000);
    assert.equal(h.status, 503);
    assert.equal(h.json.status, 'degraded');
    assert.equal(h.json.database, 'up');
    assert.ok(h.json.journal.retrying >= 1, h.text);
    assert.ok(h.json.journal.failing_s >= 0, h.text);
    // the database's words, on one line
    assert.match(h.json.journal.last_error, /journal refused by the test as a full disk would/);
    assert.doesNotMatch(h.json.journal.last_error, /\n/);

    // None is handed out: the first node's slots hold the chunks whose
    // completions wait, and a node that joins now asks and gets nothing.
    const second = startNode('second');
    const joined = await eventually(async () => {
      const n = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.online && x.id !== first);
      return n && n.slots > 0 && n;
    }, 'a second node online', 30000);
    const m = await metrics(srv);
    assert.equal(m.simfarm_journal_failing, 1);
    assert.equal(m.simfarm_journal_behind, 0);
    assert.ok(m.simfarm_journal_writes_retrying >= 1, JSON.stringify(m));
    assert.ok(m.simfarm_journal_writes_failed_total >= m.simfarm_journal_writes_retrying, JSON.stringify(m));
    assert.equal(m.simfarm_db_fence_waiting_sessions, 0);

    // A reminder 10 s after the start (waited for), and through all of it
    // one line saying writes fail, not one per write.
    await eventually(() => lines(/simfarm scheduler: journal writes still fail after/).length > 0, 'a reminder', 20000);
    const n2 = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.id === joined.id);
    assert.ok(n2.online, JSON.stringify(n2));
    assert.deepEqual({ in_flight: n2.in_flight, chunks_done: n2.chunks_done }, { in_flight: 0, chunks_done: 0 },
      'the node that joined while writes failed got no chunk');
    const later = await metrics(srv);
    assert.equal(later.simfarm_claims_in_flight, 0);
    const p = (await jobOf(id)).progress;
    assert.equal(p.claims_in_flight, 0, JSON.stringify(p));
    assert.ok(p.items_done < items, JSON.stringify(p));
    assert.ok(later.simfarm_journal_writes_failed_total > m.simfarm_journal_writes_failed_total,
      'each write is sent again, and refused again');
    const warn = lines(/simfarm scheduler: journal writes fail: /);
    assert.equal(warn.length, 1, warn.join('\n'));
    assert.match(warn[0], /journal refused by the test as a full disk would/);
    assert.deepEqual(lines(/write failed/), []);
    assert.deepEqual(lines(/journal writes succeed again/), []);
  } finally {
    await psql(pg, 'DELETE FROM refuse_journal');
  }

  const end = await eventually(async () => { const j = await jobOf(id); return j.state !== 'running' && j; },
    'the job ends', 60000).catch((e) => { throw new Error(`${e.message}\n${srv.stderr().slice(-3000)}`); });
  sameBits(end, await local);
  // each range accepted once: the accepts tile [0, items)
  assertTiles(await accepts(pg, id), items);
  assert.equal(lines(/simfarm scheduler: journal writes succeed again after \d+\.\d s: [1-9]\d* writes sent again/).length, 1,
    srv.stderr());
  const h = await eventually(async () => { const x = await health(); return x.status === 200 && x; }, 'health 200', 10000);
  assert.equal(h.json.status, 'ok');
  assert.deepEqual({ ...h.json.journal, oldest_write_s: 0 },
    { state: 'ok', retrying: 0, failing_s: null, last_error: null, oldest_write_s: 0 });
  const m = await metrics(srv);
  assert.equal(m.simfarm_journal_failing, 0);
  assert.equal(m.simfarm_journal_writes_retrying, 0);
});

test('"the database is behind" is said while a journal write still waits', async () => {
  const id = await submit(1e12, 22);
  await eventually(async () => (await jobOf(id)).progress?.chunks_accepted >= 2, 'chunks accepted', 60000);
  const before = lines(/the database is behind/).length;
  // A session of the test's own holds a lock on the journal that lets no
  // row in, until it commits.
  const lock = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', pg.host, '-p', String(pg.port), '-U', pg.user,
    '-d', 'postgres'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lockExited = new Promise((resolve) => lock.on('exit', resolve));
  try {
    lock.stdin.write("BEGIN;\nLOCK TABLE journal IN EXCLUSIVE MODE;\nSELECT 'locked';\n");
    let said = '';
    lock.stdout.on('data', (d) => { said += d; });
    await eventually(() => said.includes('locked'), 'the journal locked', 10000);
    const waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH r (job_id%'";
    await eventually(async () => Number(await psql(pg, waiting)) > 0, 'a journal INSERT waits for the lock', 30000);
    // 10 s (the scheduler's write_wait_ms) after the INSERT was sent, said
    // at the next tick of the scheduler
    await eventually(() => lines(/the database is behind/).length > before, 'the database is behind', 20000);
    assert.ok(Number(await psql(pg, waiting)) > 0, 'the INSERT still waits');
    const h = await health();
    assert.equal(h.status, 503);
    assert.equal(h.json.status, 'degraded');
    assert.equal(h.json.journal.state, 'behind');
    assert.ok(h.json.journal.oldest_write_s >= 10, h.text);
    assert.equal(h.json.journal.failing_s, null);
    assert.equal((await metrics(srv)).simfarm_journal_behind, 1);
    lock.stdin.end('COMMIT;\n');
    await lockExited;
  } finally {
    lock.kill();
  }
  await eventually(() => /the database caught up: chunks handed out again/.test(srv.stderr()), 'caught up', 20000);
  await eventually(async () => (await health()).status === 200, 'health 200', 10000);
  const accepted = (await jobOf(id)).progress.chunks_accepted;
  await eventually(async () => (await jobOf(id)).progress.chunks_accepted > accepted, 'work goes on', 30000);
  assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
});
