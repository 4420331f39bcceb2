// Who may run a job and how its results are checked (docs/api.md, "tiers"
// and "verify"), against the real binary and a real PostgreSQL: the fields
// accepted, stored and shown, bad ones refused with the field named, the
// default that keeps public nodes off a job, `simfarm serve --default-tiers`,
// and `simfarm submit --tiers --check-rate --trust`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-policy-'));
const job = (items, extra = {}) => ({ kernel: 'option', params: option, items, seed: 5, ...extra });

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--allow-public-nodes'] });
});
after(async () => {
  if (process.env.POLICY_DEBUG) console.log(srv?.stderr());
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// A node without a claim token: it joins as a public node.
function publicNode(s, name) {
  return spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${s.port}/ws/node`, '--key', path.join(tmp, `${name}.key`),
    '--cores', '1'], { stdio: 'ignore' });
}

async function submit(s, body) {
  const r = await call(s, 'POST', '/api/jobs', body);
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

async function finished(s, id) {
  return eventually(async () => {
    const j = (await call(s, 'GET', `/api/jobs/${id}`)).json;
    return ['complete', 'failed', 'cancelled', 'expired'].includes(j.state) && j;
  }, `job ${id} finished`, 120000);
}

test('tiers and the verification policy are stored as bits and shown as names', async () => {
  const cases = [
    [{}, ['own', 'team', 'community'], { check_rate: 0, trust: ['own'] }, '7|0|1'],
    [{ tiers: ['team', 'own'] }, ['own', 'team'], { check_rate: 0, trust: ['own'] }, '3|0|1'],
    [{ tiers: ['public'] }, ['public'], { check_rate: 0, trust: ['own'] }, '8|0|1'],
    [{ tiers: ['own', 'team', 'community', 'public'], verify: { check_rate: 0.25, trust: ['team', 'own'] } },
      ['own', 'team', 'community', 'public'], { check_rate: 0.25, trust: ['own', 'team'] }, '15|0.25|3'],
    [{ verify: { check_rate: 1, trust: [] } }, ['own', 'team', 'community'], { check_rate: 1, trust: [] }, '7|1|0'],
    [{ verify: { check_rate: 0 } }, ['own', 'team', 'community'], { check_rate: 0, trust: ['own'] }, '7|0|1'],
  ];
  for (const [extra, tiers, verify, row] of cases) {
    const id = await submit(srv, job(1000, { ...extra, priority: -1000 }));
    const one = await call(srv, 'GET', `/api/jobs/${id}`);
    assert.deepEqual(one.json.tiers, tiers, JSON.stringify(extra));
    assert.deepEqual(one.json.verify, verify, JSON.stringify(extra));
    assert.equal(await psql(pg, `SELECT tiers || '|' || check_rate || '|' || trusted_tiers FROM jobs WHERE id = ${id}`),
      row, JSON.stringify(extra));
    const listed = (await call(srv, 'GET', '/api/jobs?limit=1')).json[0];
    assert.equal(listed.id, id);
    assert.deepEqual(listed.tiers, tiers);
    assert.deepEqual(listed.verify, verify);
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  }
});

test('bad tiers and policies are refused, with the field named, and store nothing', async () => {
  const before = await psql(pg, 'SELECT count(*) FROM jobs');
  for (const [extra, field, why] of [
    [{ tiers: [] }, 'tiers', /one or more tier names/],
    [{ tiers: 'own' }, 'tiers', /list of one or more tier names/],
    [{ tiers: null }, 'tiers', /list/],
    [{ tiers: ['own', 'root'] }, 'tiers[1]', /own, team, community or public/],
    [{ tiers: ['Own'] }, 'tiers[0]', /own, team, community or public/],
    [{ tiers: [1] }, 'tiers[0]', /own, team, community or public/],
    [{ tiers: ['team', 'own', 'team'] }, 'tiers[2]', /'team' is listed twice/],
    [{ verify: 0.5 }, 'verify', /must be an object/],
    [{ verify: { check_rate: 1.5 } }, 'verify.check_rate', /from 0 to 1/],
    [{ verify: { check_rate: -0.01 } }, 'verify.check_rate', /from 0 to 1/],
    [{ verify: { check_rate: '0.5' } }, 'verify.check_rate', /from 0 to 1/],
    [{ verify: { trust: 'own' } }, 'verify.trust', /list of tier names/],
    [{ verify: { trust: ['own', 'nobody'] } }, 'verify.trust[1]', /own, team, community or public/],
    [{ verify: { trust: ['own', 'own'] } }, 'verify.trust[1]', /listed twice/],
    [{ verify: { rate: 0.5 } }, 'verify.rate', /unknown field \(known: check_rate, trust\)/],
    // trusting a tier that may not run the job
    [{ verify: { trust: ['public'] } }, 'verify.trust', /public, which may not run this job.*farm's default/],
    [{ tiers: ['own', 'team'], verify: { trust: ['own', 'community'] } }, 'verify.trust', /community, which may not run/],
  ]) {
    const r = await call(srv, 'POST', '/api/jobs', job(1000, extra));
    assert.equal(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
    assert.equal(r.json.field, field, JSON.stringify(extra));
    assert.match(r.json.error, why, JSON.stringify(extra));
  }
  // the list of known fields names the new ones
  const unknown = await call(srv, 'POST', '/api/jobs', job(1000, { tier: ['own'] }));
  assert.equal(unknown.json.field, 'tier');
  assert.match(unknown.json.error, /tiers, verify/);
  assert.equal(await psql(pg, 'SELECT count(*) FROM jobs'), before);
  // the table refuses what the API would never store
  await assert.rejects(psql(pg, `UPDATE jobs SET check_rate = 2 WHERE id = (SELECT min(id) FROM jobs)`), /check_rate/);
  await assert.rejects(psql(pg, `UPDATE jobs SET trusted_tiers = 16 WHERE id = (SELECT min(id) FROM jobs)`),
    /trusted_tiers/);
});

test('a public node runs no job of the default tiers, and one that lists public', async () => {
  // The default job comes first: a node that ignored tiers would take it.
  const closed = await submit(srv, job(400000, { priority: 100 }));
  // The open job trusts every tier: the lone public node's results could not
  // be spot-checked by another node, and would wait for a checker until
  // given up (tests/integration/verify.test.mjs is about the checks).
  const all = ['own', 'team', 'community', 'public'];
  const open = await submit(srv, job(400000, { priority: 0, tiers: all, verify: { trust: all } }));
  const node = publicNode(srv, 'public');
  try {
    const done = await finished(srv, open);
    assert.equal(done.state, 'complete');
    assert.equal(done.result.items_done, 400000);
    const nodes = (await call(srv, 'GET', '/api/nodes')).json;
    const ran = done.result.nodes.map((n) => nodes.find((x) => x.id === n.node)?.tier);
    assert.deepEqual([...new Set(ran)], ['public'], 'the public node did the work');
    // taken in by the scheduler (running), yet not one chunk of it done
    const other = (await call(srv, 'GET', `/api/jobs/${closed}`)).json;
    assert.ok(['pending', 'running'].includes(other.state), other.state);
    assert.equal(other.progress?.items_done ?? 0, 0, 'no item of the default job was done');
    assert.equal(await psql(pg, `SELECT count(*) FROM journal WHERE job_id = ${closed}`), '0');
  } finally {
    node.kill('SIGKILL');
    await call(srv, 'POST', `/api/jobs/${closed}/cancel`);
  }
});

test('simfarm serve --default-tiers sets the tiers of a job that names none', async () => {
  for (const [arg, why] of [['own,bogus', /unknown tier 'bogus'/], ['own,,team', /lists no tier/], ['', /lists no tier/],
    ['team,team', /'team' is listed twice/]]) {
    const r = await run(simfarm, ['serve', '--db', pg.url, '--default-tiers', arg]);
    assert.equal(r.code, 2, arg);
    assert.match(r.stderr, /^simfarm serve: --default-tiers: /, arg);
    assert.match(r.stderr, why, arg);
  }
  assert.match((await run(simfarm, ['serve', '--help'])).stdout, /--default-tiers LIST/);

  const s = await serve(await createDatabase(pg, 'open_default'),
    { extra: ['--allow-public-nodes', '--default-tiers', 'public,own'] });
  const node = publicNode(s, 'open-default');
  try {
    // no tiers named; the farm's default ones trusted, since no other node
    // could spot-check the lone public node
    const id = await submit(s, job(200000, { verify: { trust: ['own', 'public'] } }));
    assert.deepEqual((await call(s, 'GET', `/api/jobs/${id}`)).json.tiers, ['own', 'public']);
    // trust follows the tiers the farm gives
    const trusted = await call(s, 'POST', '/api/jobs', job(1000, { verify: { trust: ['public'] } }));
    assert.equal(trusted.status, 201, trusted.text);
    await call(s, 'POST', `/api/jobs/${trusted.json.id}/cancel`);
    const done = await finished(s, id);
    assert.equal(done.state, 'complete');
    assert.equal(done.result.items_done, 200000);
  } finally {
    node.kill('SIGKILL');
    await s.stop();
  }
});

test('simfarm submit --tiers and --check-rate put their fields in; simfarm job shows them', async () => {
  const config = path.join(tmp, 'cli.conf');
  fs.writeFileSync(config, '');
  const env = { ...process.env, SIMFARM_TOKEN: '', SIMFARM_CONFIG: config };
  const cli = (args) => run(simfarm, [...args, '--server', srv.url, '--token', srv.token], { env });
  const file = path.join(tmp, 'job.json');
  // fields the flags replace, one the flags leave (trust), and odd spacing
  fs.writeFileSync(file, `{"kernel":"option","tiers" : ["public"],"items":1000,\n"verify":{ "trust": ["team"] ,"check_rate":0.9},` +
    `"params": ${JSON.stringify(option)}, "name": "tiers \\"and\\" {policy}", "priority": -1000}\n`);
  const idOf = (r) => Number(r.stdout.match(/^job (\d+) submitted/m)?.[1]);

  const r = await cli(['submit', file, '--tiers', 'team,own', '--check-rate', '0.5']);
  assert.equal(r.code, 0, r.stderr);
  const j = (await call(srv, 'GET', `/api/jobs/${idOf(r)}`)).json;
  assert.deepEqual(j.tiers, ['own', 'team']);
  assert.deepEqual(j.verify, { check_rate: 0.5, trust: ['team'] });
  assert.equal(j.name, 'tiers "and" {policy}');
  assert.equal(j.priority, -1000);

  // only one flag; the file without verify gets one
  fs.writeFileSync(file, JSON.stringify(job(1000, { priority: -1000 })));
  const rate = await cli(['submit', file, '--check-rate', '1']);
  assert.equal(rate.code, 0, rate.stderr);
  const k = (await call(srv, 'GET', `/api/jobs/${idOf(rate)}`)).json;
  assert.deepEqual(k.tiers, ['own', 'team', 'community']);
  assert.deepEqual(k.verify, { check_rate: 1, trust: ['own'] });
  const shown = await cli(['job', String(idOf(rate))]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^ {2}tiers +own, team, community$/m);
  assert.match(shown.stdout, /^ {2}verify +trusted: own; at least 100% of the rest checked$/m);
  const tiered = await cli(['submit', file, '--tiers', 'public']);
  assert.equal(tiered.code, 0, tiered.stderr);
  assert.match((await cli(['job', String(idOf(tiered))])).stdout,
    /^ {2}tiers +public\n {2}verify +trusted: own; the rest checked as the coordinator decides$/m);

  for (const [args, why] of [[['--tiers', 'own,gods'], /--tiers: unknown tier 'gods'/],
    [['--check-rate', '2'], /--check-rate wants a number from 0 to 1, not '2'/],
    [['--check-rate', 'half'], /--check-rate wants a number from 0 to 1/]]) {
    const bad = await cli(['submit', file, ...args]);
    assert.equal(bad.code, 2, args.join(' '));
    assert.match(bad.stderr, why);
  }
  const help = await run(simfarm, ['submit', '--help']);
  assert.match(help.stdout, /--tiers LIST/);
  assert.match(help.stdout, /--check-rate R/);
  for (const id of [idOf(r), idOf(rate), idOf(tiered)]) await call(srv, 'POST', `/api/jobs/${id}/cancel`);
});

test('simfarm submit --trust sets verify.trust; none trusts no tier; a tier the job does not list is refused', async () => {
  const config = path.join(tmp, 'trust.conf');
  fs.writeFileSync(config, '');
  const env = { ...process.env, SIMFARM_TOKEN: '', SIMFARM_CONFIG: config };
  const cli = (args) => run(simfarm, [...args, '--server', srv.url, '--token', srv.token], { env });
  const file = path.join(tmp, 'trust.json');
  const idOf = (r) => Number(r.stdout.match(/^job (\d+) submitted/m)?.[1]);
  const ids = [];
  const stored = async (args) => {
    const r = await cli(['submit', file, ...args]);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    ids.push(idOf(r));
    return (await call(srv, 'GET', `/api/jobs/${idOf(r)}`)).json;
  };

  // a file without verify gets one; with --check-rate, both land in it
  fs.writeFileSync(file, JSON.stringify(job(1000, { priority: -1000 })));
  let j = await stored(['--tiers', 'own,team,public', '--trust', 'public,team']);
  assert.deepEqual(j.tiers, ['own', 'team', 'public']);
  assert.deepEqual(j.verify, { check_rate: 0, trust: ['team', 'public'] });
  j = await stored(['--trust', 'team', '--check-rate', '0.25']);
  assert.deepEqual(j.verify, { check_rate: 0.25, trust: ['team'] });
  j = await stored(['--trust', 'none']);
  assert.deepEqual(j.verify, { check_rate: 0, trust: [] });
  const shown = await cli(['job', String(ids.at(-1))]);
  assert.match(shown.stdout, /^ {2}verify +trusted: none; /m);

  // the file's verify keeps its other fields; its trust is replaced
  fs.writeFileSync(file, JSON.stringify(job(1000, { priority: -1000, verify: { trust: ['community'], check_rate: 0.5 } })));
  j = await stored(['--trust', 'own']);
  assert.deepEqual(j.verify, { check_rate: 0.5, trust: ['own'] });

  // a tier the job's tiers leave out: the coordinator refuses it, by field
  const out = await cli(['submit', file, '--tiers', 'own', '--trust', 'own,public']);
  assert.equal(out.code, 1, out.stdout);
  assert.match(out.stderr, /verify\.trust/);
  for (const [args, why] of [[['--trust', 'own,gods'], /--trust: unknown tier 'gods'/],
    [['--trust', ''], /--trust: /], [['--trust', 'none,own'], /--trust: unknown tier 'none'/]]) {
    const bad = await cli(['submit', file, ...args]);
    assert.equal(bad.code, 2, args.join(' '));
    assert.match(bad.stderr, why);
  }
  assert.match((await run(simfarm, ['submit', '--help'])).stdout, /--trust LIST/);
  for (const id of ids) await call(srv, 'POST', `/api/jobs/${id}/cancel`);
});
