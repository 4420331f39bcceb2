// Who can run a job, said in words: a job no node online may run carries
// progress.blocked (why) in the API, its events and the CLI, and loses it
// when a node that may run it joins; a size that would take the farm over a
// day at its measured speed needs "confirm_large" (simfarm submit --yes), and
// any size while no speed is measured is taken with a warning;
// the CLI ends a stat_weights or tournament job with its weights or its
// winner, and lists a complete tournament as 100% done, as the dashboard
// does. A real coordinator, PostgreSQL and native node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call, tailEvents } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-eligibility-'));
const european = JSON.parse(fs.readFileSync(path.join(top, 'examples/european.json'), 'utf8'));
const all = ['own', 'team', 'community', 'public'];
// Every tier trusted: a lone node's results could not be checked by another
// (tests/integration/verify.test.mjs is about that).
const verify = { trust: all };

let pg, srv, events, node;
const env = () => {
  const e = { ...process.env, HOME: tmp, XDG_CONFIG_HOME: tmp, SIMFARM_SERVER: srv.url, SIMFARM_TOKEN: srv.token };
  delete e.SIMFARM_CONFIG;
  return e;
};
const cli = (args, timeoutMs = 60000) => run(simfarm, args, { env: env(), timeoutMs });
const file = (name, job) => {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, JSON.stringify(job));
  return p;
};
const job = async (id) => (await call(srv, 'GET', `/api/jobs/${id}`)).json;
const submit = async (body) => {
  const r = await call(srv, 'POST', '/api/jobs', body);
  assert.equal(r.status, 201, r.text);
  return r.json.id;
};

function startNode() {
  const child = spawn(simfarm, ['node', '--server', srv.url, '--key', path.join(tmp, 'node.key'), '--cores', '2'],
    { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return { child, exited };
}
async function stopNode() {
  node.child.kill('SIGTERM');
  await node.exited;
  node = undefined;
}

before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '200'] });
  events = tailEvents(srv);
  // the stream starts with a snapshot: from then on no event is missed
  await events.until((e) => e.type === 'snapshot', 'the events stream\'s snapshot');
});
after(async () => {
  if (node) await stopNode();
  await events?.close();
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('no node online: the job says so in the API, its events and the CLI; a node of its tiers unblocks it', async () => {
  // Before any job has run, the farm's speed is not known: a large size is
  // taken, with a warning that says so, in the API and from simfarm submit.
  const huge = await call(srv, 'POST', '/api/jobs', { ...european, items: 2 ** 50 });
  assert.equal(huge.status, 201, huge.text);
  assert.equal(huge.json.warning, 'no node has reported a speed for option jobs yet, so how long this one takes is '
    + 'not known: 1,125,899,906,842,624 items (1.1 quadrillion)');
  const confirmed = await call(srv, 'POST', '/api/jobs', { ...european, items: 2 ** 50, confirm_large: true });
  assert.equal(confirmed.status, 201, confirmed.text);
  assert.equal(confirmed.json.warning, undefined, 'confirm_large says a long job is meant');
  const warned = await cli(['submit', file('huge.json', { ...european, items: 5e6 })]);
  assert.equal(warned.code, 0, warned.stderr);
  assert.equal(warned.stderr, 'simfarm submit: warning: no node has reported a speed for option jobs yet, so how long '
    + 'this one takes is not known: 5,000,000 items (5 million)\n');
  assert.match(warned.stdout, /^job \d+ submitted: /);
  const warnedId = Number(/^job (\d+)/.exec(warned.stdout)[1]);
  for (const j of [huge.json.id, confirmed.json.id, warnedId]) await call(srv, 'POST', `/api/jobs/${j}/cancel`);

  const id = await submit({ ...european, items: 5e6, tiers: all, verify });
  const none = await eventually(async () => (await job(id)).progress?.blocked, 'progress.blocked', 30000);
  assert.match(none, /^no node is online: it runs once a node of tier own, team, community or public joins$/);
  const ev = await events.until((e) => e.type === 'job.progress' && e.job === id && e.blocked, 'a blocked job.progress');
  assert.equal(ev.blocked, none);
  const listed = (await call(srv, 'GET', '/api/jobs')).json.find((j) => j.id === id);
  assert.equal(listed.progress.blocked, none, 'GET /api/jobs carries the progress too');

  const one = await cli(['job', String(id)]);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stdout, /^ {2}blocked {3}no node is online: /m);
  const list = await cli(['jobs']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, new RegExp(`^${id} +blocked +admin +option`, 'm'));
  assert.match(list.stdout, new RegExp(`^job ${id} is blocked: no node is online: `, 'm'));

  // watch (piped) says it, then follows the job to its end once a node joins
  const watch = spawn(simfarm, ['watch', String(id)], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  watch.stdout.on('data', (d) => { out += d; });
  const watched = new Promise((resolve) => watch.on('exit', resolve));
  await eventually(() => out.includes('\n'), 'a first line from watch', 15000);
  assert.match(out, new RegExp(`^job ${id} (pending|running), blocked: no node is online: `));

  const own = await submit({ ...european, items: 1e6, tiers: ['own'] });
  node = startNode(); // open enrolment: a public node
  const done = await eventually(async () => ((await job(id)).state === 'complete'), 'the job completes', 120000);
  assert.ok(done);
  assert.equal(await watched, 0, out);
  const unblocked = events.events.filter((e) => e.type === 'job.progress' && e.job === id).at(-1);
  assert.equal(unblocked.blocked, null, 'the last progress says it is not blocked');

  // the public node may not run an own-only job: it says why
  const why = await eventually(async () => {
    const b = (await job(own)).progress?.blocked;
    return b?.startsWith('no node online may run it') && b;
  }, 'blocked by tier', 30000);
  assert.equal(why, 'no node online may run it: it runs on own nodes, and the nodes online are public');
  const shown = await cli(['job', String(own)]);
  assert.match(shown.stdout, /^ {2}blocked {3}no node online may run it: it runs on own nodes, and the nodes online are public$/m);

  // the node leaves: the public job left running is blocked again, with an event
  const left = await submit({ ...european, items: 1e12, tiers: all, verify, confirm_large: true });
  await eventually(async () => (await job(left)).progress?.items_done > 0, 'the long job started', 60000);
  await stopNode();
  await events.until((e) => e.type === 'job.progress' && e.job === left && /^no node is online/.test(e.blocked ?? ''),
    'blocked again once the node left');
  for (const j of [own, left]) await call(srv, 'POST', `/api/jobs/${j}/cancel`);
});

test('a size that would take the farm over a day at its speed needs confirm_large, or submit --yes', async () => {
  node = startNode();
  try {
    const long = await submit({ ...european, items: 1e12, tiers: all, verify, confirm_large: true });
    await eventually(async () => (await job(long)).progress?.items_per_s > 0, 'a measured speed', 60000);
    const big = { ...european, items: 2 ** 50, tiers: all };
    // the speed is published at the scheduler's next sweep (every second)
    const refused = await eventually(async () => {
      const r = await call(srv, 'POST', '/api/jobs', big);
      if (r.status === 201) await call(srv, 'POST', `/api/jobs/${r.json.id}/cancel`);
      return r.status === 422 && r;
    }, 'a refusal of 2^50 items', 30000);
    assert.equal(refused.json.field, 'items');
    assert.match(refused.json.error, /^at the farm's speed for option jobs now \(\d+ items\/s\) this takes about [\d.]+ (days|years): send "confirm_large": true to submit it anyway \(simfarm submit --yes\)$/);
    const small = await call(srv, 'POST', '/api/jobs', { ...big, items: 1000 });
    assert.equal(small.status, 201, 'a small job is taken as before');
    assert.equal(small.json.warning, undefined, 'with a speed known, no warning');
    const bad = await call(srv, 'POST', '/api/jobs', { ...big, confirm_large: 'yes' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.field, 'confirm_large');

    const f = file('big.json', big);
    const no = await cli(['submit', f]);
    assert.equal(no.code, 1);
    assert.match(no.stderr, /^simfarm submit: items: at the farm's speed .* \(simfarm submit --yes\)\n$/);
    const yes = await cli(['submit', f, '--yes', '--json']);
    assert.equal(yes.code, 0, yes.stderr);
    const { id } = JSON.parse(yes.stdout);
    assert.equal((await job(id)).spec.confirm_large, true);
    for (const j of [long, id]) await call(srv, 'POST', `/api/jobs/${j}/cancel`);
  } finally {
    await stopNode();
  }
});

test('watch ends a stat_weights job with its weights and a tournament with its winner; jobs shows it 100% done', async () => {
  node = startNode();
  try {
    const greeks = JSON.parse(fs.readFileSync(path.join(top, 'examples/asian-greeks.json'), 'utf8'));
    const w = await cli(['submit', file('greeks.json', { ...greeks, items: 200000, verify }), '--watch'], 120000);
    assert.equal(w.code, 0, w.stderr);
    assert.match(w.stdout, /^ {2}weights {3}\(change of the first output per unit of step\)$/m);
    for (const name of ['delta', 'vega', 'rho', 'maturity'])
      assert.match(w.stdout, new RegExp(`^ {4}${name} +-?[\\d.e+-]+ ± [\\d.e+-]+ +\\(step -?[\\d.]+\\)$`, 'm'));

    const tour = JSON.parse(fs.readFileSync(path.join(top, 'examples/combat-tournament.json'), 'utf8'));
    const t = await cli(['submit', file('tour.json', { ...tour, verify }), '--watch'], 120000);
    assert.equal(t.code, 0, t.stderr);
    const winner = /^ {2}winner {4}(.+)$/m.exec(t.stdout)?.[1];
    assert.ok(tour.candidates.some((c) => c.name === winner), t.stdout);
    assert.match(t.stdout, new RegExp(`^ {4}#1 +${winner} `, 'm'));

    const id = Number(/^job (\d+) complete/m.exec(t.stdout)[1]);
    const list = await cli(['jobs', '--limit', '1']);
    assert.match(list.stdout, new RegExp(`^${id} +complete +admin +combat +128k +100% `, 'm'));
  } finally {
    await stopNode();
  }
});
