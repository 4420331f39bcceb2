// What a new user of the dashboard sees, in Chromium at 1280 px, against a
// real coordinator, a real PostgreSQL and a real native node lending 1 of
// its machine's cores: a finished job's throughput plot and its convergence
// band (the axis not set by the first chunk), the jobs list whole at 1280
// px with how long each job ran and its result, a cancel that asks first,
// a job submitted again (its Download JSON posted as it is, and its form
// filled by Resubmit), a refusal for a missing token gone once the token is
// given, an idle node and fleet at 0 items/s, the cores lent, a node's own
// page, a tournament's winner and ranking, stat_weights' weights with their
// errors, why no node can run a job (none of its tiers, or none online), and
// the warning a job submitted before the farm knows its speed comes with.
// Screenshots go to build/artifacts/dashboard/views-STEP.png.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, stop, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';
import { open } from './browsers.mjs';
import { estimate, int, num } from '../../web/js/format.js';

const simfarm = path.join(build, 'bin/simfarm');
const shots = path.join(build, 'artifacts/dashboard');
const DESKTOP = { width: 1280, height: 900 };
// The farm's node joins as a public node: the jobs list every tier and
// trust them (no node of another owner could check its results).
const ALL_TIERS = ['own', 'team', 'community', 'public'];
const call100 = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1 };

describe('chromium', () => {
  let pg, srv, node, page, tmp;
  const jobs = {}; // name -> the job as the API answers once complete

  before(async () => {
    fs.mkdirSync(shots, { recursive: true });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-views-'));
    pg = await startPostgres();
    // small chunks: a job of a few seconds has many points
    srv = await serve(pg.url, { extra: ['--allow-public-nodes', '--chunk-ms', '100', '--web', path.join(top, 'web')] });
    node = nativeNode(['--key', path.join(tmp, 'node.key')]);
    page = await open('chromium', DESKTOP);
    await page.goto(`${srv.url}/#/jobs`);
    await page.evaluate((t) => localStorage.setItem('simfarm.token', t), srv.token);
  });

  after(async () => {
    await page?.close();
    if (node) await stop(node);
    await srv?.stop();
    await pg?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  // `simfarm node --cores 1` with more arguments: { child, exited } for stop().
  function nativeNode(args) {
    const child = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--cores', '1', ...args],
      { stdio: 'ignore' });
    return { child, exited: new Promise((resolve) => child.on('exit', resolve)) };
  }

  const shot = (step) => page.screenshot(path.join(shots, `views-${step}.png`));

  async function submit(body) {
    const r = await call(srv, 'POST', '/api/jobs', { tiers: ALL_TIERS, verify: { trust: ALL_TIERS }, ...body });
    assert.equal(r.status, 201, r.text);
    return r.json.id;
  }

  function complete(id, what = `job ${id} complete`) {
    return eventually(async () => {
      const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
      return j.state === 'complete' && j.finished_at ? j : null;
    }, what, 120000);
  }

  test('a job submitted before the farm knows its speed is taken, and its page shows the warning', async () => {
    // no option job has run yet: no speed is known, so nothing says how long one takes
    await page.goto(`${srv.url}/#/submit`);
    await page.waitVisible('#p-S0');
    for (const [f, v] of [['p-S0', 100], ['p-K', 100], ['p-sigma', 0.2], ['p-T', 1], ['j-items', 5e6]]) await page.fill(`#${f}`, String(v));
    await page.click('#submit');
    await page.waitFor(() => /^#\/jobs\/\d+$/.test(location.hash));
    const id = Number((await page.url()).split('/').at(-1));
    await page.waitVisible('#submit-warning');
    assert.equal(await page.text('#submit-warning'), 'Submitted with a warning: no node has reported a speed for option '
      + 'jobs yet, so how long this one takes is not known: 5,000,000 items (5 million).');
    assert.equal((await call(srv, 'GET', `/api/jobs/${id}`)).json.items, 5e6);
    await shot('submit-warning');
    // said once: the page opened again has no warning
    await page.goto(`${srv.url}/#/jobs`);
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitFor(() => document.querySelector('.state') !== null);
    assert.equal(await page.visible('#submit-warning'), false);
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  });

  test('the jobs of the farm run: an option job, stat_weights and a tournament', async () => {
    jobs.option = await complete(await submit({ kernel: 'option', params: call100, items: 40000000, name: 'call, 40 M paths' }));
    jobs.weights = await complete(await submit({ kernel: 'option', strategy: 'stat_weights', params: call100, items: 400000,
      weights: [{ param: 'S0', step: 1, name: 'delta' }, { param: 'sigma', step: 0.01, name: 'vega' }], name: 'greeks' }));
    const combat = JSON.parse(fs.readFileSync(path.join(top, 'examples/combat-tournament.json'), 'utf8'));
    jobs.tournament = await complete(await submit({ ...combat, items: 8000, tournament: { phase_items: 500, growth: 2 } }));
  });

  test('a finished job\'s throughput plot has points, and its convergence axis shows the late band', async () => {
    const { id, result } = jobs.option;
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitFor(() => Number(document.querySelector('#throughput')?.dataset.points) >= 2);
    await page.drawn('#throughput', [138, 58, 185], 50);
    assert.match(await page.text('#rate-note'), /items\/s on average/);

    const conv = (await call(srv, 'GET', `/api/jobs/${id}/convergence`)).json;
    const pts = conv.points;
    await page.waitFor((n) => document.querySelector('#convergence')?.dataset.points === String(n), pts.length);
    const [first, last] = [pts[0], pts.at(-1)];
    // what makes the question worth asking: the first chunk's band is far wider
    assert.ok(pts.length >= 4 && first[2] > 4 * last[2], `points ${pts.length}, first ${first}, last ${last}`);
    assert.deepEqual(last, [40000000, result.outputs[0].mean, result.outputs[0].stderr]);
    const y = await page.evaluate(() => [Number(document.querySelector('#convergence').dataset.yMin),
      Number(document.querySelector('#convergence').dataset.yMax)]);
    const band = [last[1] - 1.96 * last[2], last[1] + 1.96 * last[2]];
    assert.ok(y[0] <= band[0] && y[1] >= band[1], `axis ${y} covers the last band ${band}`);
    assert.ok(y[1] - y[0] < (2 * 1.96 * first[2]) / 2, `axis ${y} narrower than half the first band (± ${1.96 * first[2]})`);
    await page.drawn('#convergence', [11, 92, 173], 20);
    await shot('job-plots');
  });

  test('at 1280 px the jobs list shows every column, with how long each job ran and its result', async () => {
    await submit({ kernel: 'option', params: call100, items: 1000, name: 'a job whose name is long enough to wrap in its '
      + 'cell rather than push the columns after it out of the list' });
    await page.goto(`${srv.url}/#/jobs`);
    await page.waitFor((id) => document.querySelector(`tr[data-job="${id}"]`) !== null, jobs.option.id);
    // the first test's, cancelled, the three that ran and this one
    await page.waitFor(() => document.querySelectorAll('tbody tr[data-job]').length === 5);
    const fit = await page.evaluate(() => {
      const wrap = document.querySelector('main .table-wrap');
      const ths = [...wrap.querySelectorAll('th')];
      return { scroll: wrap.scrollWidth, client: wrap.clientWidth, right: wrap.getBoundingClientRect().right,
        lastRight: ths.at(-1).getBoundingClientRect().right, last: ths.at(-1).textContent, heads: ths.map((t) => t.textContent) };
    });
    assert.ok(fit.scroll <= fit.client, `the list scrolls sideways: ${fit.scroll} > ${fit.client}`);
    assert.equal(fit.last, 'items');
    assert.ok(fit.lastRight <= fit.right, JSON.stringify(fit));
    assert.ok(fit.heads.includes('ran') && fit.heads.includes('result'), fit.heads.join(', '));

    const cells = (id) => page.evaluate((i) => {
      const tr = document.querySelector(`tr[data-job="${i}"]`);
      return { ran: tr.querySelector('td.duration').textContent, result: tr.querySelector('td.result').textContent };
    }, id);
    const o = jobs.option.result.outputs[0];
    const row = await cells(jobs.option.id);
    assert.equal(row.result, `price ${estimate(o.mean, o.stderr)} ± ${estimate(1.96 * o.stderr, o.stderr)}`);
    assert.match(row.ran, /^(< 1 s|\d+ s|\d+ min \d+ s)$/);
    assert.equal((await cells(jobs.tournament.id)).result, `winner: ${jobs.tournament.result.winner}`);
    await shot('jobs-1280');
  });

  test('a job\'s Download JSON is a submission the API takes, and Resubmit fills the form with it', async () => {
    const { id } = jobs.weights;
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitVisible('#download');
    const dl = await page.download('#download');
    const sub = JSON.parse(dl.text);
    for (const k of ['id', 'state', 'result', 'owner', 'created_at', 'progress']) assert.equal(sub[k], undefined, k);
    const again = await call(srv, 'POST', '/api/jobs', sub);
    assert.equal(again.status, 201, again.text);
    const orig = jobs.weights;
    // the same submission (the row keeps it as jsonb: its keys in jsonb's
    // order, so the work context's bytes, and ctx_hash, may differ)
    const copy = (await call(srv, 'GET', `/api/jobs/${again.json.id}`)).json;
    assert.deepEqual(copy.spec, orig.spec);

    // Resubmit: the form filled with it, sent as it is
    await page.click('#clone');
    await page.waitFor(() => location.hash.startsWith('#/submit') && document.querySelector('#j-variants')?.value.length > 0);
    assert.equal(await page.value('#j-items'), String(orig.items));
    assert.equal(await page.value('#j-strategy'), 'stat_weights');
    assert.equal(await page.value('#p-S0'), '100');
    await page.click('#submit');
    await page.waitFor((old) => /^#\/jobs\/\d+$/.test(location.hash) && location.hash !== `#/jobs/${old}`, id);
    const made = Number((await page.url()).split('/').at(-1));
    assert.ok(made > again.json.id, `${made}`);
    const form = (await call(srv, 'GET', `/api/jobs/${made}`)).json;
    assert.deepEqual([form.items, form.strategy, form.tiers, form.verify, form.name, form.seed, form.spec.weights],
      [orig.items, orig.strategy, orig.tiers, orig.verify, orig.name, orig.seed, orig.spec.weights]);
    // both computed the same bytes as the original: the same work
    for (const j of [again.json.id, made]) {
      const done = await complete(j);
      assert.equal(done.result.digest, orig.result.digest, `job ${j}`);
      assert.deepEqual(done.result.weights, orig.result.weights, `job ${j}`);
    }
  });

  test('stat_weights shows each weight with its step and standard error', async () => {
    const { id, result } = jobs.weights;
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitFor(() => document.querySelectorAll('#weights tbody tr').length > 0);
    assert.equal(await page.count('#weights tbody tr'), result.weights.length);
    for (const w of result.weights) {
      const row = await page.evaluate((n) => {
        const tr = document.querySelector(`#weights tr[data-weight="${n}"]`);
        return tr && { step: tr.querySelector('.step').textContent, value: tr.querySelector('.value').textContent,
          stderr: tr.querySelector('.stderr').textContent, ci: tr.querySelector('.ci').textContent };
      }, w.name);
      assert.deepEqual(row, { step: num(w.step), value: estimate(w.weight, w.stderr), stderr: num(w.stderr, 3),
        ci: estimate(1.96 * w.stderr, w.stderr) }, w.name);
    }
    await shot('job-weights');
  });

  test('a tournament names its winner and ranks its candidates, at 100%', async () => {
    const { id, result } = jobs.tournament;
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitVisible('#winner');
    assert.equal(await page.text('#winner'), `Winner: ${result.winner}`);
    const order = await page.evaluate(() => [...document.querySelectorAll('#candidates tbody tr')].map((r) => r.dataset.candidate));
    assert.deepEqual(order, [...result.candidates].sort((a, b) => a.rank - b.rank).map((c) => c.name));
    assert.equal(await page.evaluate(() => document.querySelector('#candidates tbody tr td:nth-child(3)').textContent), 'winner');
    assert.equal(await page.text('#pct'), '100.0%');
    await page.goto(`${srv.url}/#/jobs?state=complete`);
    await page.waitFor((i) => document.querySelector(`tr[data-job="${i}"] [role=progressbar]`)?.getAttribute('aria-valuenow')
      === '100.0', id);
    await shot('job-tournament');
  });

  test('an idle node and the fleet show 0 items/s, the cores lent, and the node\'s own page', async () => {
    const [n] = (await call(srv, 'GET', '/api/nodes')).json;
    // the API keeps the last measured rate of a node with nothing in flight
    assert.ok(n.online && n.in_flight === 0, JSON.stringify(n));
    assert.ok(n.items_per_s > 0, `the API's items/s of the idle node: ${n.items_per_s}`);
    await page.goto(`${srv.url}/#/nodes`);
    await page.waitVisible('tr[data-node] .online');
    assert.equal(await page.evaluate(() => document.querySelector('tr[data-node] td.rate').textContent), 'idle');
    assert.equal(await page.text('#f-rate'), '0');
    // it lends 1 core (--cores 1) of its machine's
    assert.equal(n.max_parallel, 1);
    assert.equal(await page.text('#f-cores'), '1');
    assert.equal(await page.evaluate(() => document.querySelector('tr[data-node] td.cores').textContent),
      `1 / ${int(n.capabilities.cores)}`);
    await shot('nodes-idle');

    await page.click(`tr[data-node="${n.id}"] td a`);
    await page.waitFor((i) => location.hash === `#/nodes/${i}` && document.querySelector('#node-items-total') !== null, n.id);
    const now = (await call(srv, 'GET', `/api/nodes/${n.id}`)).json;
    assert.equal(await page.text('h1'), `Node ${n.id}${now.name ? `: ${now.name}` : ''}`);
    assert.equal(await page.text('#node-items-total'), int(now.items_total));
    assert.equal(await page.text('#node-chunks-total'), int(now.chunks_total));
    assert.equal(await page.text('#node-tier'), 'public');
    assert.equal(await page.text('#node-cores'), `1 / ${int(now.capabilities.cores)}`);
    assert.equal(await page.text('#node-rate'), 'idle');
    assert.match(await page.text('#node-devices'), /^cpu/);
    await shot('node-page');
  });

  test('a refusal for a missing token is gone once the token is given and another refusal comes', async () => {
    await page.goto(`${srv.url}/#/submit`);
    await page.evaluate(() => localStorage.removeItem('simfarm.token'));
    await page.reload();
    await page.waitVisible('#p-S0');
    for (const [f, v] of [['p-S0', 100], ['p-K', 100], ['p-sigma', 0.2], ['p-T', 1], ['j-items', 1000]]) await page.fill(`#${f}`, String(v));
    await page.click('#submit');
    await page.waitVisible('#form-error');
    assert.match(await page.text('#form-error'), /needs an API token/);
    await page.fill('#token-input', srv.token);
    await page.click('#token-form button[type="submit"]');
    await page.fill('#p-S0', '-5');
    await page.click('#submit');
    await page.waitVisible('#p-S0-error');
    assert.equal(await page.visible('#form-error'), false, await page.text('#form-error'));
    await shot('submit-token-then-field');
  });

  test('cancel asks first: kept, then cancelled', async () => {
    const id = await submit({ kernel: 'option', params: { ...call100, steps: 50 }, items: 1e12, name: 'long' });
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'running'
      && Number(document.querySelector('#claims')?.textContent) > 0);
    await page.click('#cancel');
    await page.waitVisible('#cancel-confirm');
    assert.match(await page.text('#cancel-question'), new RegExp(`^Cancel job ${id}\\?`));
    assert.equal((await call(srv, 'GET', `/api/jobs/${id}`)).json.state, 'running', 'not cancelled by the first click');
    await shot('job-cancel-confirm');
    await page.click('#cancel-keep');
    await page.waitFor(() => document.querySelector('#cancel-confirm') === null);
    assert.equal((await call(srv, 'GET', `/api/jobs/${id}`)).json.state, 'running');
    await page.click('#cancel');
    await page.click('#cancel-confirm');
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'cancelled');
    assert.equal((await call(srv, 'GET', `/api/jobs/${id}`)).json.state, 'cancelled');
  });

  test('a job no node can run says why on its page and in the list, and not once a node can', async () => {
    // the farm's only node is public: a job for own nodes only cannot run
    const id = await submit({ kernel: 'option', params: call100, items: 2000000, tiers: ['own'], verify: { trust: ['own'] },
      name: 'own nodes only' });
    const why = await eventually(async () => (await call(srv, 'GET', `/api/jobs/${id}`)).json.progress?.blocked ?? null,
      'progress.blocked', 30000);
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitVisible('#blocked');
    assert.equal(await page.text('#blocked'), `no node can run this: ${why}`);
    await page.goto(`${srv.url}/#/jobs`);
    await page.waitVisible(`[data-blocked="${id}"]`);
    assert.equal(await page.text(`[data-blocked="${id}"]`), `no node can run this: ${why}`);
    await shot('job-blocked');
    // a node of the own tier joins: it runs, and the note goes
    const claim = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'own', expires_in: 600 });
    assert.equal(claim.status, 201, claim.text);
    const own = nativeNode(['--claim-token', claim.json.token, '--key', path.join(tmp, 'own.key')]);
    try {
      await page.waitFor((i) => document.querySelector(`[data-blocked="${i}"]`) === null
        && document.querySelector(`tr[data-job="${i}"]`) !== null, id);
      await complete(id);
    } finally {
      await stop(own);
    }
  });

  test('a job over a day at the farm\'s speed is refused under items until the form confirms it', async () => {
    // a job running, so the farm knows its speed for option jobs now
    const busy = await submit({ kernel: 'option', params: call100, items: 2 ** 40, confirm_large: true, name: 'busy' });
    await eventually(async () => (await call(srv, 'GET', `/api/jobs/${busy}`)).json.progress?.items_per_s > 0,
      'the running job measured', 30000);
    // and, once its sweep has read that speed (every second), refuses such a size
    await eventually(async () => {
      const probe = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: call100, items: 2 ** 50, tiers: ALL_TIERS });
      if (probe.status === 201) await call(srv, 'POST', `/api/jobs/${probe.json.id}/cancel`);
      return probe.status === 422;
    }, 'a size of 2^50 refused by the API', 15000, 500);
    await page.goto(`${srv.url}/#/submit`);
    await page.waitVisible('#p-S0');
    for (const [f, v] of [['p-S0', 100], ['p-K', 100], ['p-sigma', 0.2], ['p-T', 1], ['j-items', 2 ** 50]]) await page.fill(`#${f}`, String(v));
    for (const t of ALL_TIERS) await page.click(`#j-tier-${t}`);
    await page.click('#submit');
    await page.waitVisible('#j-items-error');
    assert.match(await page.text('#j-items-error'), /days: send "confirm_large": true/);
    await page.click('#j-confirm_large');
    assert.ok((await page.text('#as-curl')).includes('"confirm_large":true'), await page.text('#as-curl'));
    await page.click('#submit');
    await page.waitFor(() => /^#\/jobs\/\d+$/.test(location.hash));
    const id = Number((await page.url()).split('/').at(-1));
    const job = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    assert.equal(job.items, 2 ** 50);
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
    assert.equal((await call(srv, 'POST', `/api/jobs/${busy}/cancel`)).status, 200);
  });

  test('with no node online a job says so on its page and in the list, not while a node runs it, and again once the last one leaves', async () => {
    await stop(node);
    node = undefined;
    // a job that outlasts the test, cancelled at its end
    const id = await submit({ kernel: 'option', params: { ...call100, steps: 50 }, items: 1e12, confirm_large: true,
      name: 'no node online' });
    const none = /^no node can run this: no node is online: it runs once a node of tier own, team, community or public joins$/;
    const shown = async () => {
      await page.goto(`${srv.url}/#/jobs/${id}`);
      await page.waitVisible('#blocked');
      assert.match(await page.text('#blocked'), none);
      await page.goto(`${srv.url}/#/jobs`);
      await page.waitVisible(`[data-blocked="${id}"]`);
      assert.match(await page.text(`[data-blocked="${id}"]`), none);
    };
    await shown();
    await shot('job-no-node');

    node = nativeNode(['--key', path.join(tmp, 'node.key')]);
    await page.waitFor((i) => document.querySelector(`[data-blocked="${i}"]`) === null
      && document.querySelector(`tr[data-job="${i}"]`) !== null, id);
    await page.goto(`${srv.url}/#/jobs/${id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'running'
      && Number(document.querySelector('#claims')?.textContent) > 0);
    assert.equal(await page.visible('#blocked'), false, 'a node runs it');

    // the last node leaves: the open page says so again, and so does the list
    await stop(node);
    node = undefined;
    await page.waitVisible('#blocked');
    assert.match(await page.text('#blocked'), none);
    await shown();
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  });

  test('the page logged no error', () => {
    // the refusals the tests asked for (400, 401, 422) are logged as failed loads
    assert.deepEqual(page.errors.filter((e) => !/status of (400|401|422)\b/.test(e)), []);
  });
});
