// GET /api/jobs/ID/convergence against a real PostgreSQL: its last point is
// the job's result even when the journal holds a row at odds with the
// others (a range overlapping an accepted one, as a coordinator that died
// mid-write can leave), because it counts the journal's rows by the rule a
// restarted coordinator restores the job by (sc_records_kept).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, top } from '../lib/proc.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-convergence-'));
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
// The node joins under open enrolment, as a public node; every tier is
// trusted, so a lone node's results need no check by another.
const tiers = ['own', 'team', 'community', 'public'];

let pg, srv, node, nodeExited;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '100'], timeoutMs: 90000 });
  node = spawn(simfarm, ['node', '--server', srv.url, '--key', path.join(tmp, 'node.key'), '--cores', '1'],
    { stdio: 'ignore' });
  nodeExited = new Promise((resolve) => node.on('exit', resolve));
});
after(async () => {
  node?.kill('SIGTERM');
  await nodeExited;
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function finished(id) {
  return eventually(async () => {
    const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    return ['complete', 'failed', 'cancelled', 'expired'].includes(j.state) ? j : null;
  }, `job ${id} ended`, 120000, 100);
}

const rows = async (sql) => (await psql(pg, sql)).split('\n').filter(Boolean).map((l) => l.split('|'));

// [items, mean, stderr] of output 0 after the last point, and the answer.
async function lastPoint(id) {
  const c = await call(srv, 'GET', `/api/jobs/${id}/convergence`);
  assert.equal(c.status, 200, c.text);
  const last = c.json.points.at(-1);
  return { last: [last[0], last[1], last[2]], json: c.json };
}

// Runs an option job of `items` to its end; resolves to the job and its
// accepted rows [seq, first_item, item_count] by first item.
async function farmJob(items, seed) {
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers,
    verify: { trust: tiers } });
  assert.equal(res.status, 201, res.text);
  const job = await finished(res.json.id);
  assert.equal(job.state, 'complete', JSON.stringify(job));
  const accepted = await rows(`SELECT seq, first_item, item_count FROM journal WHERE job_id = ${job.id} AND type = 1
    ORDER BY first_item`);
  assert.ok(accepted.length >= 3, `${accepted.length} accepted chunks: too few to overlap one with another's`);
  assert.ok(accepted.every(([, , count]) => Number(count) > 1), 'every range holds more than one item');
  return { job, accepted: accepted.map((r) => r.map(Number)) };
}

test('the last point is the result when the journal holds a row overlapping an accepted one', async () => {
  const items = 400000;
  const { job, accepted } = await farmJob(items, 11);
  const want = [items, job.result.outputs[0].mean, job.result.outputs[0].stderr];
  const before = await lastPoint(job.id);
  assert.deepEqual(before.last, want, 'the journal as written');
  assert.equal(before.json.chunks, accepted.length);

  // A copy of the first accepted row's result (it decodes and merges, as a
  // real row's would), starting one item into the second accepted range:
  // the unique index on (job, variant, first item) takes it.
  const [, first] = accepted[1];
  await psql(pg, `INSERT INTO journal (job_id, type, variant, chunk, first_item, item_count, token, result, node_id)
    SELECT job_id, 1, variant, chunk + 1000000, ${first + 1}, item_count, token, result, node_id
    FROM journal WHERE job_id = ${job.id} AND seq = ${accepted[0][0]}`);
  const after = await lastPoint(job.id);
  assert.deepEqual(after.last, want, `the overlapping row counts for nothing: last point ${JSON.stringify(after.last)}`);
  assert.equal(after.json.chunks, accepted.length, 'the chunks counted are the kept ones');
  assert.deepEqual([before.json.skipped, after.json.skipped], [0, 1], 'the overlapping row is counted as skipped');
});

test('an accept of a quarantined node counts for nothing, and its retracted ranges are listed once', async () => {
  const items = 300000;
  const { job, accepted } = await farmJob(items, 12);
  const mallory = Number(await psql(pg, `INSERT INTO nodes (public_key, owner, tier, quarantined_at, revoked_at)
    VALUES (decode(repeat('ab', 32), 'hex'), 'mallory', 'public', now(), now()) RETURNING id`));
  // An accept of the node that was written beside the commit that
  // quarantined it stays a type-1 row (docs/verification.md): the second
  // range's row becomes one. The third range's row is retracted, and
  // written twice, as a store that sent its INSERT again would.
  const [seq1, , count1] = accepted[1];
  const [seq2, first2, count2] = accepted[2];
  await psql(pg, `UPDATE journal SET node_id = ${mallory} WHERE job_id = ${job.id} AND seq = ${seq1}`);
  for (let i = 0; i < 2; i++) {
    await psql(pg, `INSERT INTO journal (job_id, type, variant, chunk, first_item, item_count, token, result, node_id)
      SELECT job_id, 7, variant, chunk, first_item, item_count, token, result, ${mallory}
      FROM journal WHERE job_id = ${job.id} AND seq = ${seq2}`);
  }
  const c = await lastPoint(job.id);
  assert.equal(c.last[0], items - count1, `the quarantined node's accept is left out: ${JSON.stringify(c.last)}`);
  assert.equal(c.json.chunks, accepted.length - 1);
  assert.equal(c.json.skipped, 0);
  const n = await call(srv, 'GET', `/api/nodes/${mallory}`);
  assert.equal(n.status, 200, n.text);
  assert.deepEqual(n.json.retracted, [{ job: job.id, variant: 0, first_item: first2, item_count: count2 }]);
});
