// Tournament and stat_weights jobs through the API, farmed to a real node:
// the variants travel in the work context, a tournament's chunks name their
// candidate, and the result carries the weights or the ladder.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-strategies-'));
const call100 = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1, antithetic: true };
const combat = JSON.parse(fs.readFileSync(path.join(top, 'examples/combat.json'), 'utf8'));
// The node joins under open enrolment, as a public node: the jobs name that tier.
// Every tier, and every tier trusted: these tests are about farming, not
// spot-checks (tests/integration/verify.test.mjs), and a lone node could not be
// checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };

let pg, srv, node;
before(async () => {
  pg = await startPostgres();
  // Chunks of about 200 ms: a stat_weights error comes from the chunks'
  // batch means, and from a few of them (1 s chunks) it is itself too noisy
  // to check a weight against (an estimate of half the error was seen).
  srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '200'] });
  node = spawn(simfarm, ['node', '--server', srv.url, '--key', path.join(tmp, 'node.key'), '--cores', '2'],
    { stdio: 'ignore' });
});
after(async () => {
  node?.kill('SIGTERM');
  await new Promise((resolve) => (node.exitCode !== null ? resolve() : node.on('exit', resolve)));
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function finished(id, timeoutMs = 120000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    if (['complete', 'failed', 'cancelled'].includes(j.state)) return j;
    if (Date.now() > end) throw new Error(`job ${id} not finished in ${timeoutMs} ms: ${JSON.stringify(j)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// Black–Scholes call price.
function bs(S, K, r, sigma, T) {
  const erf = (x) => { // Abramowitz–Stegun 7.1.26 is not enough here: use the series to 1e-15
    let sum = x, term = x;
    for (let n = 1; n < 200; n++) { term *= -x * x / n; sum += term / (2 * n + 1); }
    return (2 / Math.sqrt(Math.PI)) * sum;
  };
  const N = (x) => 0.5 * (1 + erf(x / Math.SQRT2));
  const d1 = (Math.log(S / K) + (r + sigma * sigma / 2) * T) / (sigma * Math.sqrt(T)), d2 = d1 - sigma * Math.sqrt(T);
  return S * N(d1) - K * Math.exp(-r * T) * N(d2);
}

test('stat_weights: each weight is the finite difference of the price, with its error', async () => {
  const items = 2000000, seed = 5;
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', strategy: 'stat_weights', params: call100,
    weights: [{ param: 'S0', step: 1, name: 'delta' }, { param: 'sigma', step: 0.01, name: 'vega' }], items, seed, tiers, verify });
  assert.equal(res.status, 201, res.text);
  const job = await finished(res.json.id);
  assert.equal(job.state, 'complete', JSON.stringify(job.result));
  assert.equal(job.strategy, 'stat_weights');
  const w = job.result.weights;
  assert.deepEqual(w.map((x) => [x.name, x.step]), [['delta', 1], ['vega', 0.01]]);
  const base = bs(100, 100, 0.05, 0.2, 1);
  const want = [bs(101, 100, 0.05, 0.2, 1) - base, (bs(100, 100, 0.05, 0.21, 1) - base) / 0.01];
  for (let i = 0; i < 2; i++) {
    assert.ok(w[i].stderr > 0 && w[i].stderr < 0.05 * Math.abs(want[i]), JSON.stringify(w[i]));
    assert.ok(Math.abs(w[i].weight - want[i]) < 5 * w[i].stderr, `${w[i].name}: ${w[i].weight} ± ${w[i].stderr}, ` +
      `Black–Scholes finite difference ${want[i]}`);
  }
  // The convergence shows the baseline unless asked for a bumped variant.
  const conv = (await call(srv, 'GET', `/api/jobs/${res.json.id}/convergence`)).json;
  assert.equal(conv.variant, 0);
  assert.deepEqual(conv.points.at(-1).slice(0, 3), [items, job.result.outputs[0].mean, job.result.outputs[0].stderr]);
  const vega = (await call(srv, 'GET', `/api/jobs/${res.json.id}/convergence?variant=2`)).json;
  assert.equal(vega.variant, 2);
  assert.equal(vega.points.at(-1)[0], items);
  assert.ok(vega.points.at(-1)[1] > conv.points.at(-1)[1], 'a higher sigma prices the call higher');
  const cli = await run(simfarm, ['job', String(res.json.id), '--server', srv.url, '--token', srv.token]);
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stdout, /^ {4}delta +0\.6\d+ ± [\d.e-]+ +\(step 1\)$/m);
  // The baseline's outputs carry its closed form (Black–Scholes), which
  // `simfarm job` prints beside the estimate.
  const price = job.result.outputs[0];
  assert.ok(Math.abs(price.closed_form - base) < 1e-9, `closed form ${price.closed_form}, Black–Scholes ${base}`);
  const z = ((price.mean - price.closed_form) / price.stderr).toFixed(2);
  assert.match(cli.stdout, new RegExp(`^ +price .*closed form 10\\.450584, z ${z.replace('-', '\\-')}$`, 'm'));
  // The outputs are the baseline's: one local run of the unperturbed parameters, to the last bit.
  const pfile = path.join(tmp, 'call.json');
  fs.writeFileSync(pfile, JSON.stringify(call100));
  const local = await run(simfarm, ['sim', 'option', pfile, '--items', String(items), '--seed', String(seed), '--json']);
  assert.equal(local.code, 0, local.stderr);
  assert.deepEqual(job.result.outputs.map(({ name, count, mean, stderr }) => ({ name, count, mean, stderr })),
    JSON.parse(local.stdout).outputs.map(({ name, count, mean, stderr }) => ({ name, count, mean, stderr })));
  assert.equal(job.result.digest, JSON.parse(local.stdout).digest, 'the baseline\'s bytes are the local run\'s');
});

test('tournament: the strongest candidate wins, the others drop out phase by phase', async () => {
  const base = { ...combat, stat_weights: false };
  delete base.delta;
  const candidates = [
    { name: 'weak', params: { power: 9000 } },
    { name: 'strong', params: { power: 10100 } },
    { name: 'middling', params: { power: 9900 } },
    { name: 'base', params: {} },
  ];
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'combat', strategy: 'tournament', params: base,
    candidates, tournament: { phase_items: 200, growth: 2 }, items: 3200, seed: 9, tiers, verify });
  assert.equal(res.status, 201, res.text);
  const job = await finished(res.json.id);
  assert.equal(job.state, 'complete', JSON.stringify(job.result));
  const r = job.result;
  assert.equal(r.winner, 'strong');
  const by = Object.fromEntries(r.candidates.map((c) => [c.name, c]));
  assert.equal(by.strong.alive, true);
  assert.equal(by.strong.rank, 1);
  assert.ok(by.weak.alive === false && by.weak.dropped_after >= 1, JSON.stringify(by.weak));
  assert.ok(by.strong.mean > by.middling.mean && by.middling.mean > by.weak.mean, JSON.stringify(r.candidates));
  assert.ok(by.strong.items > by.weak.items, 'the leader ran more items than a dropped candidate');
  // Seed 9 gives this ladder: the two far behind go after phase 1, the close second after phase 2.
  assert.deepEqual(r.phases.map((p) => [p.phase, [...p.dropped].sort(), p.alive]),
    [[1, ['middling', 'weak'], 2], [2, ['base'], 1]]);
  // The convergence follows the winner, or the candidate asked for.
  const conv = async (q) => call(srv, 'GET', `/api/jobs/${res.json.id}/convergence${q}`);
  for (const [q, v] of [['', 1], ['?variant=1', 1], ['?variant=0', 0], ['?variant=3', 3]]) {
    const c = await conv(q);
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.variant, v, q);
    const last = c.json.points.at(-1), want = r.candidates[v];
    assert.deepEqual([last[0], last[1], last[2]], [want.items, want.mean, want.stderr], `${q}: ${c.text}`);
  }
  for (const [q, why] of [['?variant=4', /has 4 variants: 0 \.\. 3/], ['?variant=-1', /whole number/],
    ['?variant=1x', /whole number/]]) {
    const c = await conv(q);
    assert.deepEqual([c.status, c.json.field], [400, 'variant'], q);
    assert.match(c.json.error, why, q);
  }
  // `simfarm job` shows the same.
  const cli = await run(simfarm, ['job', String(res.json.id), '--server', srv.url, '--token', srv.token]);
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stdout, /^ {2}winner {4}strong$/m);
  assert.match(cli.stdout, /^ {4}#1 +strong +[\d.]+ ± [\d.]+ +400 items, in to the end$/m);
  assert.match(cli.stdout, /^ {4}#4 +weak +[\d.]+ ± [\d.]+ +200 items, dropped after phase 1$/m);
});

test('a tournament of candidates that never part runs phase after phase, and its result holds every phase', async () => {
  // Identical candidates: the same numbers on common random numbers, so
  // no phase drops anyone and the ladder grows until the items run out.
  const candidates = [{ name: 'a', params: {} }, { name: 'b', params: {} }];
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', strategy: 'tournament', params: call100,
    candidates, tournament: { phase_items: 1, growth: 2 }, items: 2 ** 26, seed: 3, tiers, verify });
  assert.equal(res.status, 201, res.text);
  const job = await finished(res.json.id);
  assert.equal(job.state, 'complete', JSON.stringify(job.result));
  const { phases, candidates: c } = job.result;
  assert.ok(phases.length >= 20, `${phases.length} phases`);
  assert.deepEqual(phases.map((p) => p.phase), phases.map((_, i) => i + 1));
  assert.ok(phases.every((p) => p.dropped.length === 0 && p.alive === 2), JSON.stringify(phases));
  assert.deepEqual(c.map((x) => [x.name, x.alive, x.mean]), [['a', true, c[0].mean], ['b', true, c[0].mean]]);
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
});

test('bad strategy submissions name the field', async () => {
  const cases = [
    [{ kernel: 'option', params: call100, items: 10, strategy: 'stat_weights' }, 'weights'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'stat_weights', weights: [{ param: 'q', step: 0.01 }] },
      'weights[0].param'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'stat_weights', weights: [{ param: 'S0', step: 0 }] },
      'weights[0].step'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'stat_weights', weights: [{ param: 'sigma', step: -1 }] },
      'weights[0].sigma'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'tournament', candidates: [{ params: {} }] }, 'candidates'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'tournament',
      candidates: [{ params: {} }, { params: { sigma: 9 } }] }, 'candidates[1].params.sigma'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'tournament',
      candidates: [{ params: {} }, { params: { greeks: true } }] }, 'candidates'],
    [{ kernel: 'option', params: call100, items: 10, strategy: 'tournament', candidates: [{ params: {} }, { params: {} }],
      tournament: { growth: 1 } }, 'tournament.growth'],
    [{ kernel: 'option', params: call100, items: 10, weights: [] }, 'weights'],
  ];
  for (const [body, field] of cases) {
    const r = await call(srv, 'POST', '/api/jobs', body);
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.json.field, field, `${JSON.stringify(body)}: ${r.text}`);
  }
  // The examples are accepted as they are.
  for (const f of ['asian-greeks.json', 'combat-tournament.json']) {
    const r = await call(srv, 'POST', '/api/jobs', JSON.parse(fs.readFileSync(path.join(top, 'examples', f), 'utf8')));
    assert.equal(r.status, 201, `${f}: ${r.text}`);
    await call(srv, 'POST', `/api/jobs/${r.json.id}/cancel`);
  }
  const k = await call(srv, 'GET', '/api/kernels');
  assert.deepEqual(k.json.strategies, ['single', 'tournament', 'stat_weights']);
});
