// The dashboard (web/) in Chromium and in Firefox against a real
// coordinator, a real PostgreSQL and a real native node: the token box, the
// submit form built from GET /api/kernels with the server's refusals at
// their fields, an option job watched to 100% with its price, convergence
// plot and histogram, the node tiers, the check rate and the trusted tiers
// a job is given and its page shows, the jobs and nodes pages (also on a phone-sized
// screen), a stat_weights job's weights and a tournament's ladder, and
// cancelling a running job, and how much of a checked job's result is
// verified, with its quarantined node. The same tests run in each browser
// (browsers.mjs), each against a farm of its own.
// Screenshots go to build/artifacts/dashboard/BROWSER-STEP.png.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, top } from '../lib/proc.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';
import { browsers, open } from './browsers.mjs';
import { estimate } from '../../web/js/format.js';

const simfarm = path.join(build, 'bin/simfarm');
const shots = path.join(build, 'artifacts/dashboard');
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };
// The farm's one node joins without a claim token, as a public node: it
// runs only jobs that list public. No node of another owner can check its
// results, so a job meant to end soon trusts the tiers it runs on.
const ALL_TIERS = ['own', 'team', 'community', 'public'];

for (const name of browsers) describe(name, () => dashboard(name));

function dashboard(name) {
  let pg, srv, node, nodeExited, page, tmp;

  before(async () => {
    fs.mkdirSync(shots, { recursive: true });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-dash-'));
    pg = await startPostgres();
    srv = await serve(pg.url, { extra: ['--allow-public-nodes', '--web', path.join(top, 'web')] });
    node = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'node.key'),
      '--cores', '2'], { stdio: 'ignore' });
    nodeExited = new Promise((resolve) => node.on('exit', resolve));
    page = await open(name, DESKTOP);
  });

  after(async () => {
    await page?.close();
    if (node) {
      node.kill('SIGTERM'); // drains: a few seconds at most, the long job is cancelled
      const timer = setTimeout(() => node.kill('SIGKILL'), 10000);
      await nodeExited;
      clearTimeout(timer);
    }
    await srv?.stop();
    await pg?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const shot = (step) => page.screenshot(path.join(shots, `${name}-${step}.png`));

  // The page's errors but the refusals the form test asks for, which
  // Chromium logs as failed loads (400).
  const pageErrors = () => page.errors.filter((e) => !e.includes('status of 400'));

  // Waits until the page does not scroll sideways at the width it has.
  function fitsWidth() {
    return page.waitFor(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);
  }

  // The job's id from a page at #/jobs/ID, once it is there.
  async function jobId() {
    await page.waitFor(() => /^#\/jobs\/\d+$/.test(location.hash));
    return Number((await page.url()).split('/').at(-1));
  }

  // Keeps the bodies the page POSTs from now on, as sent, in
  // window.posted (until the next page load).
  function keepPosts() {
    return page.evaluate(() => {
      window.posted = [];
      const send = window.fetch;
      window.fetch = (url, init) => {
        if (init?.method === 'POST') window.posted.push({ url: String(url), body: init.body });
        return send(url, init);
      };
    });
  }

  async function fillOption(values) {
    await page.goto(`${srv.url}/#/submit`);
    await page.waitVisible('#p-S0');
    for (const [id, v] of Object.entries(values)) await page.fill(`#${id}`, String(v));
  }

  test('the page loads its modules and uPlot from the coordinator, with their types', async () => {
    for (const [p, type] of [['/', 'text/html'], ['/js/app.js', 'text/javascript'], ['/dashboard.css', 'text/css'],
      ['/node_modules/uplot/dist/uPlot.esm.js', 'text/javascript'], ['/node_modules/uplot/dist/uPlot.min.css', 'text/css']]) {
      const res = await fetch(srv.url + p);
      assert.equal(res.status, 200, p);
      assert.ok(res.headers.get('content-type').startsWith(type), `${p}: ${res.headers.get('content-type')}`);
    }
    const k = await call(srv, 'GET', '/api/kernels', undefined, null);
    assert.equal(k.status, 200);
    assert.deepEqual(k.json.kernels.map((x) => x.name), ['option', 'combat']);
  });

  test('the API token is kept in the browser', async () => {
    await page.goto(`${srv.url}/#/jobs`);
    await page.click('#token-summary');
    await page.fill('#token-input', srv.token);
    await page.click('#token-form button[type="submit"]');
    await page.waitFor(() => document.querySelector('#token-summary').textContent === 'API token ✓');
    assert.equal(await page.evaluate(() => localStorage.getItem('simfarm.token')), srv.token);
  });

  test('an invalid form gets the server\'s error next to the field', async () => {
    await fillOption({ 'p-S0': -5, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1 });
    // the form carries the kernel's ranges from GET /api/kernels
    assert.equal(await page.attr('#p-S0', 'max'), '1000000');
    assert.equal(await page.value('#p-steps'), '1');
    await page.click('#submit');
    await page.waitVisible('#p-S0-error');
    assert.equal(await page.text('#p-S0-error'), 'must be in (0, 1000000], got -5');
    assert.equal(await page.attr('#p-S0', 'aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'p-S0');
    await shot('submit-error');

    await page.fill('#p-S0', '100');
    await page.fill('#j-items', '0');
    await page.click('#submit');
    await page.waitVisible('#j-items-error');
    assert.equal(await page.text('#j-items-error'), 'must be a whole number from 1 to 2^50');
    assert.equal(await page.visible('#p-S0-error'), false, 'the old error is gone');
    const jobs = await call(srv, 'GET', '/api/jobs');
    assert.deepEqual(jobs.json, [], 'nothing was submitted');
  });

  test('a refusal of a whole list is shown under the list', async () => {
    await page.goto(`${srv.url}/#/submit?kernel=combat`);
    await page.waitVisible('#p-power');
    await page.fill('#p-power', '10000');
    const list = 'fieldset[data-param="abilities"]';
    // The form keeps to 1 … 8 abilities; past its buttons (enabled here by
    // the test), none and then 9 go to the server, which refuses the list
    // itself: {"field": "params.abilities"}.
    await page.evaluate((sel) => {
      const rm = [...document.querySelectorAll(`${sel} button`)].find((b) => b.textContent === 'Remove abilities[0]');
      rm.disabled = false;
      rm.click();
    }, list);
    assert.equal(await page.count(`${list} fieldset`), 0);
    const refused = async (n) => {
      await page.click('#submit');
      await page.waitVisible('#p-abilities-error');
      assert.equal(await page.text('#p-abilities-error'), 'must be a list of 1 to 8 abilities in priority order', `${n} abilities`);
      assert.equal(await page.visible('#form-error'), false, `${n} abilities: not a form-level error`);
      assert.ok((await page.attr('#p-abilities', 'aria-describedby')).split(' ').includes('p-abilities-error'));
      assert.ok(await page.evaluate((sel) => document.querySelector(sel).contains(document.activeElement), list),
        `${n} abilities: the focus is in the list`);
    };
    await refused(0);
    await page.evaluate((sel) => {
      const add = [...document.querySelectorAll(`${sel} button`)].find((b) => b.textContent === 'Add to abilities');
      for (let i = 0; i < 9; i++) { add.disabled = false; add.click(); }
    }, list);
    assert.equal(await page.count(`${list} fieldset`), 9);
    await refused(9);
    await shot('submit-list-error');
    assert.deepEqual((await call(srv, 'GET', '/api/jobs')).json, [], 'nothing was submitted');
  });

  test('a refusal inside a tournament\'s candidates or the weights is shown under the variants box', async () => {
    for (const [strategy, variants, field] of [
      ['tournament', '[{"name": "A", "params": {}}, {"name": "B", "params": {"sigma": -1}}]', 'candidates[1].params.sigma'],
      ['stat_weights', '[{"param": "S0", "step": 0}]', 'weights[0].step'],
      ['tournament', '{"candidates": [{"name": "A", "params": {}}, {"name": "B", "params": {}}], "tournament": {"growth": 0}}',
        'tournament.growth']]) {
      await fillOption({ 'p-S0': 100, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1, 'j-items': 1000000 });
      await page.select('#j-strategy', strategy);
      await page.waitVisible('#j-variants');
      await page.fill('#j-variants', variants);
      await page.click('#submit');
      await page.waitVisible('#j-variants-error');
      const text = await page.text('#j-variants-error');
      assert.ok(text.startsWith(`${field}: `) && text.length > field.length + 2, `${strategy}: ${text}`);
      assert.equal(await page.visible('#form-error'), false, `${strategy}: not a form-level error`);
      assert.equal(await page.attr('#j-variants', 'aria-invalid'), 'true');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'j-variants');
    }
    await shot('submit-variants-error');
    assert.deepEqual((await call(srv, 'GET', '/api/jobs')).json, [], 'nothing was submitted');
  });

  test('a field\'s refusal is announced', async () => {
    await fillOption({ 'p-S0': -5, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1 });
    await page.click('#submit');
    await page.waitVisible('#p-S0-error');
    assert.equal(await page.attr('#p-S0-error', 'role'), 'alert');
    // every field's error, the job's fields and a list's included
    const roles = () => page.evaluate(() => [...document.querySelectorAll('.field-error')].map((e) => `${e.id} ${e.getAttribute('role')}`));
    const option = await roles();
    assert.ok(option.length > 10 && option.every((r) => r.endsWith(' alert')), option.join(', '));
    await page.goto(`${srv.url}/#/submit?kernel=combat`);
    await page.waitVisible('#p-power');
    const combat = await roles();
    assert.ok(combat.includes('p-abilities-error alert') && combat.includes('p-abilities-0-coefficient-error alert'), combat.join(', '));
    assert.ok(combat.every((r) => r.endsWith(' alert')), combat.join(', '));
  });

  test('the form sends the node tiers, the check rate and the trusted tiers, refused at their field when wrong; the job page shows them', async () => {
    await fillOption({ 'p-S0': 100, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1, 'j-items': 1000, 'j-check_rate': 1.5 });
    // none ticked: the coordinator's default, left out of the body
    for (const t of ALL_TIERS) assert.equal(await page.evaluate((id) => document.getElementById(id).checked, `j-tier-${t}`), false, t);
    assert.match(await page.text('#j-tiers-help'), /none ticked: the coordinator's default/);
    // nor any trusted tier: the default, own, left out of the body too
    for (const t of ALL_TIERS) assert.equal(await page.evaluate((id) => document.getElementById(id).checked, `j-trust-${t}`), false, t);
    assert.match(await page.text('#j-trust-help'), /None ticked: the default, own$/);
    assert.equal(await page.attr('#j-trust', 'role'), 'group');
    assert.ok((await page.text('#as-curl')).includes('"items":1000,"verify":{"check_rate":1.5}}'), await page.text('#as-curl'));
    await page.click('#submit');
    await page.waitVisible('#j-check_rate-error');
    assert.equal(await page.text('#j-check_rate-error'), 'must be a number from 0 to 1');
    assert.equal(await page.attr('#j-check_rate', 'aria-invalid'), 'true');
    assert.deepEqual((await call(srv, 'GET', '/api/jobs')).json, [], 'nothing was submitted');

    await page.fill('#j-check_rate', '0.25');
    await page.click('#j-tier-team');
    await page.click('#j-tier-own');
    let curl = await page.text('#as-curl');
    assert.ok(curl.includes('"items":1000,"tiers":["own","team"],"verify":{"check_rate":0.25}}'), curl);

    // trusting a tier the job leaves out: refused at the trust control
    await page.click('#j-trust-public');
    await page.click('#j-trust-team');
    curl = await page.text('#as-curl');
    assert.ok(curl.includes('"tiers":["own","team"],"verify":{"check_rate":0.25,"trust":["team","public"]}}'), curl);
    await page.click('#submit');
    await page.waitVisible('#j-trust-error');
    assert.match(await page.text('#j-trust-error'), /^verify\.trust: lists public, which may not run this job/);
    // the group's first box takes the focus and the mark, as the tiers' do
    assert.equal(await page.attr('#j-trust-own', 'aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'j-trust-own');
    assert.equal(await page.visible('#form-error'), false);
    assert.deepEqual((await call(srv, 'GET', '/api/jobs')).json, [], 'nothing was submitted');

    await page.click('#j-trust-public');
    curl = await page.text('#as-curl');
    const body = '"items":1000,"tiers":["own","team"],"verify":{"check_rate":0.25,"trust":["team"]}}';
    assert.ok(curl.includes(body), curl);
    await keepPosts();
    await page.click('#submit');
    const id = await jobId();
    // what went to the API is what the curl line shows
    const posted = await page.evaluate(() => window.posted);
    assert.equal(posted.length, 1, JSON.stringify(posted));
    assert.ok(posted[0].url.endsWith('api/jobs'), posted[0].url);
    assert.deepEqual(JSON.parse(posted[0].body).verify, { check_rate: 0.25, trust: ['team'] });
    assert.ok(posted[0].body.endsWith(body), posted[0].body);
    await page.waitFor(() => document.querySelector('#tiers')?.textContent === 'own, team');
    assert.equal(await page.text('#verify'), 'trusted: team; at least 25% of the rest checked');
    const api = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    assert.deepEqual([api.tiers, api.verify], [['own', 'team'], { check_rate: 0.25, trust: ['team'] }]);
    // the public node takes none of it
    assert.equal(api.progress?.items_done ?? 0, 0);
    await shot('job-tiers');
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  });

  test('an option job submitted through the form runs to 100% and shows the API\'s price, plots and nodes', async () => {
    await fillOption({ 'p-S0': 100, 'p-K': 100, 'p-r': 0.05, 'p-sigma': 0.2, 'p-T': 1, 'j-items': 60000000, 'j-name': 'dash call' });
    for (const t of ALL_TIERS) await page.click(`#j-tier-${t}`);
    for (const t of ALL_TIERS) await page.click(`#j-trust-${t}`);
    const curl = await page.text('#as-curl');
    const body = '{"kernel":"option","params":{"S0":100,"K":100,"r":0.05,"sigma":0.2,"T":1},"items":60000000,"name":"dash call",'
      + '"tiers":["own","team","community","public"],"verify":{"trust":["own","team","community","public"]}}';
    assert.ok(curl.endsWith(`-d '${body}'`), curl);
    assert.equal(await page.text('#as-cli'), `echo '${body}' | simfarm submit - --server ${srv.url}`);
    await page.click('#submit');
    const id = await jobId();

    // complete, and the row read back with its end (finished_at is only in the row)
    const bar = '[role="progressbar"][aria-label="job progress"]';
    await page.waitFor(() => document.querySelector('[aria-label="job progress"]')?.getAttribute('aria-valuenow') === '100.0'
      && document.querySelector('.state')?.textContent === 'complete'
      && document.querySelector('#finished-at')?.textContent !== '–');
    assert.equal(await page.attr(bar, 'aria-valuenow'), '100.0');

    const api = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    assert.equal(api.state, 'complete');
    assert.equal(api.name, 'dash call');
    assert.equal(await page.text('#tiers'), 'own, team, community, public');
    assert.equal(await page.text('#verify'), 'trusted: own, team, community, public; the rest checked as the coordinator decides');
    assert.deepEqual(api.verify, { check_rate: 0, trust: ALL_TIERS });
    assert.equal(api.result.verification.trusted_items, 60000000);
    const price = api.result.outputs.find((o) => o.name === 'price');
    const cell = 'tr[data-output="price"] td.mean';
    assert.equal(await page.attr(cell, 'data-exact'), String(price.mean));
    assert.equal(await page.text(cell), price.mean.toFixed(Math.ceil(-Math.log10(price.stderr)) + 1));
    assert.equal(await page.text(cell), estimate(price.mean, price.stderr));
    assert.ok(Math.abs(price.mean - 10.4506) < 4 * price.stderr, `price ${price.mean} ± ${price.stderr}`);
    // Black–Scholes beside the estimate, and the distance in standard errors
    assert.ok(Math.abs(price.closed_form - 10.450584) < 1e-6, `closed form ${price.closed_form}`);
    assert.equal(await page.attr('tr[data-output="price"] td.closed', 'data-exact'), String(price.closed_form));
    assert.equal(await page.text('tr[data-output="price"] td.z'),
      ((price.mean - price.closed_form) / price.stderr).toFixed(2));

    // The plots hold drawn data: the estimate's blue line, the histogram's green bars.
    await page.drawn('#convergence', [11, 92, 173], 20);
    await page.drawn('#convergence', [194, 65, 12], 20); // the closed form, dashed
    assert.match(await page.attr('#convergence', 'aria-label'), /and its closed form 10\.4505835\d* \(dashed\)$/);
    await page.drawn('#histogram', [23, 102, 58], 200);
    assert.equal(price.hist.bins.reduce((a, b) => a + b, 0) + price.hist.under + price.hist.over, price.count);

    // the whole record (Download JSON is the submission: dashboard-views.test.mjs)
    const dl = await page.download('#download-record');
    assert.equal(dl.name, `simfarm-job-${id}-record.json`);
    assert.deepEqual(JSON.parse(dl.text).result, api.result);

    // The journal's curve ends on the result exactly, and a page opened
    // afresh draws all of it.
    const conv = (await call(srv, 'GET', `/api/jobs/${id}/convergence`)).json;
    assert.equal(conv.outputs, 1);
    assert.equal(conv.chunks, api.result.nodes[0].chunks);
    assert.ok(conv.points.length >= 2, JSON.stringify(conv));
    assert.deepEqual(conv.points.at(-1), [60000000, price.mean, price.stderr]);
    await page.reload();
    await page.waitFor((n) => document.querySelector('#convergence')?.dataset.points === String(n), conv.points.length);
    await page.drawn('#convergence', [11, 92, 173], 20);

    // What each node contributed: one node, every item.
    assert.equal(api.result.nodes.length, 1);
    assert.equal(api.result.nodes[0].items, 60000000);
    const contrib = await page.texts('section[aria-labelledby="h-nodes"] tbody tr td');
    assert.equal(contrib[2], '60,000,000');
    // opened after the end, the counts come from the result, and the
    // throughput from the row's times
    assert.match(await page.text('#rate-note'), /^Ran (< 1 s|\d+ s|\d+ min \d+ s): [\d.]+ [kMG]? ?items\/s on average\.$/);
    assert.equal(api.result.chunks_accepted, api.result.nodes[0].chunks);
    assert.equal(await page.text('#chunks'), api.result.chunks_accepted.toLocaleString('en-US'));
    assert.equal(await page.text('#chunks-failed'), '0');
    await shot('job-complete');

    // On a phone the plots shrink to the screen and nothing scrolls sideways.
    await page.viewport(PHONE.width, PHONE.height);
    await fitsWidth();
    await page.waitFor((w) => document.querySelector('#histogram canvas').getBoundingClientRect().right <= w, PHONE.width);
    await shot('job-complete-phone');
    await page.viewport(DESKTOP.width, DESKTOP.height);
  });

  test('the jobs list filters, and the nodes page shows the fleet', async () => {
    await page.goto(`${srv.url}/#/jobs?state=complete`);
    const row = 'tbody tr[data-job]';
    await page.waitVisible(row);
    assert.equal(await page.count(row), 1);
    assert.equal(await page.value('#f-state'), 'complete');
    await page.select('#f-state', 'failed');
    await page.waitFor(() => document.querySelector('main').textContent.includes('No jobs match'));
    await page.select('#f-state', '');
    await page.waitVisible(row);
    await shot('jobs');

    await page.click('a[data-nav="nodes"]');
    await page.waitVisible('tr[data-node] .online');
    const fleet = await page.texts('#fleet .card');
    assert.equal(fleet[0], 'online1 of 1');
    const cells = await page.texts('tr[data-node] td');
    assert.match(cells[5], /^cpu/);
    assert.match(cells[6], /^2 \/ \d+$/, 'the 2 cores it lends of its machine\'s');
    assert.match(cells[9], /^[0-2] \/ 2$/, 'chunks in flight of the 2 it takes at once');
    // its work in all: the API's totals, exact in the cell's title
    const [n] = (await call(srv, 'GET', '/api/nodes')).json;
    assert.ok(n.items_total >= 60000000, `${n.items_total} items in all`);
    const title = await page.attr('tr[data-node] td.total', 'title');
    assert.equal(title.replace(/[^\d ]/g, '').trim().split(/ +/).map(Number).join(' '), `${n.items_total} ${n.chunks_total}`);
    await shot('nodes');
  });

  test('the pages fit a phone-sized screen', async () => {
    await page.viewport(PHONE.width, PHONE.height);
    try {
      // Each page once drawn: nothing scrolls sideways (wide tables scroll
      // inside their box), and the navigation and the page's first control
      // are on the screen.
      for (const [hash, ready, control, step] of [['#/jobs', 'tbody tr[data-job]', '#f-state', 'jobs-phone'],
        ['#/submit', '#p-S0', '#p-S0', 'submit-phone'], ['#/nodes', 'tr[data-node] .online', '#fleet .card', 'nodes-phone']]) {
        await page.goto(`${srv.url}/${hash}`);
        await page.waitVisible(ready);
        await fitsWidth();
        for (const sel of ['a[data-nav="nodes"]', '#token-summary', control]) {
          const r = await page.evaluate((s) => document.querySelector(s).getBoundingClientRect().toJSON(), sel);
          assert.ok(r.width > 0 && r.left >= 0 && r.right <= PHONE.width, `${hash}: ${sel} at ${JSON.stringify(r)}`);
        }
        await shot(step);
      }
    } finally {
      await page.viewport(DESKTOP.width, DESKTOP.height);
    }
  });

  test('a precision target sets the items from a pilot job\'s spread', async () => {
    await fillOption({ 'p-S0': 100, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1, 'j-target': 0.02, 'j-name': 'to 0.02' });
    await page.click('#j-tier-public'); // the pilot and the job both
    await page.click('#j-trust-public');
    await page.click('#submit');
    const id = await jobId();
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'complete'
      && document.querySelector('#finished-at')?.textContent !== '–');
    // the pilot ended (and its row was written) before the job was submitted
    const pilot = (await call(srv, 'GET', '/api/jobs?limit=10')).json.find((j) => j.name === 'pilot of to 0.02');
    assert.equal(pilot.items, 100000);
    assert.ok(pilot.id < id && pilot.state === 'complete', JSON.stringify(pilot));
    const o = pilot.result.outputs[0];
    const job = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    assert.equal(job.name, 'to 0.02');
    assert.deepEqual([pilot.tiers, job.tiers], [['public'], ['public']]);
    assert.deepEqual([pilot.verify.trust, job.verify.trust], [['public'], ['public']]);
    assert.equal(job.items, Math.ceil((o.stderr * Math.sqrt(o.count) / 0.02) ** 2));
    const done = job.result.outputs[0];
    assert.ok(Math.abs(done.stderr - 0.02) < 0.002, `standard error ${done.stderr} for a target of 0.02`);
    await shot('job-precision-target');
  });

  test('a stat_weights job shows its weights, a tournament its ladder', async () => {
    const call100 = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1 };
    const w = await call(srv, 'POST', '/api/jobs', { kernel: 'option', strategy: 'stat_weights', params: call100,
      weights: [{ param: 'S0', step: 1, name: 'delta' }, { param: 'sigma', step: 0.01, name: 'vega' }], items: 400000,
      tiers: ALL_TIERS, verify: { trust: ALL_TIERS } });
    assert.equal(w.status, 201, w.text);
    await page.goto(`${srv.url}/#/jobs/${w.json.id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'complete'
      && [...document.querySelectorAll('h2')].some((e) => e.textContent === 'Weights'));
    const api = (await call(srv, 'GET', `/api/jobs/${w.json.id}`)).json.result.weights;
    const rows = await page.texts('section table tr th[scope=row]');
    for (const x of api) assert.ok(rows.includes(x.name), `${x.name} in ${rows}`);
    assert.equal(await page.count('[aria-label^="delta from "]'), 1, 'delta has its error bar');
    await shot('job-stat-weights');

    const combat = JSON.parse(fs.readFileSync(path.join(top, 'examples/combat-tournament.json'), 'utf8'));
    const t = await call(srv, 'POST', '/api/jobs', { ...combat, items: 8000, tournament: { phase_items: 500, growth: 2 },
      verify: { trust: combat.tiers } });
    assert.equal(t.status, 201, t.text);
    await page.goto(`${srv.url}/#/jobs/${t.json.id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'complete'
      && [...document.querySelectorAll('h3')].some((e) => e.textContent === 'Tournament ladder'));
    const phases = (await call(srv, 'GET', `/api/jobs/${t.json.id}`)).json.result.phases;
    const items = await page.texts('#ladder li');
    assert.equal(items.length, phases.length);
    assert.equal(items[0], `phase 1: ${phases[0].alive} left${phases[0].dropped.length ? `; dropped ${phases[0].dropped.join(', ')}` : ''}`);
    await shot('job-tournament');
    assert.deepEqual(pageErrors(), []);
  });

  test('a running job is cancelled from its page', async () => {
    const sub = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: { S0: 100, K: 100, sigma: 0.2, T: 1, steps: 50 },
      items: 1e12, name: 'long', tiers: ALL_TIERS });
    // the node holds its chunks (no chunk of 50 steps ends soon at the speed it measured)
    assert.equal(sub.status, 201);
    await page.goto(`${srv.url}/#/jobs/${sub.json.id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'running'
      && Number(document.querySelector('#claims')?.textContent) > 0);
    await page.press('Tab'); // the controls take the keyboard
    await page.focus('#cancel');
    if (page.keysActivateButtons) await page.press('Enter');
    else await page.click('#cancel');
    // it asks first, the focus on keeping the job
    await page.waitFor(() => document.activeElement?.id === 'cancel-keep');
    assert.equal((await call(srv, 'GET', `/api/jobs/${sub.json.id}`)).json.state, 'running');
    await page.focus('#cancel-confirm');
    if (page.keysActivateButtons) await page.press('Enter');
    else await page.click('#cancel-confirm');
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'cancelled'
      && document.querySelector('#finished-at')?.textContent !== '–');
    assert.equal((await call(srv, 'GET', `/api/jobs/${sub.json.id}`)).json.state, 'cancelled');
    assert.equal(await page.visible('#cancel'), false);
    await shot('job-cancelled');
    assert.deepEqual(pageErrors(), []);
  });

  test('a fleet of hundreds: the nodes page shows 200 at a time, narrowed by status or text', async () => {
    await psql(pg, `INSERT INTO nodes (public_key, tier, name, owner)
      SELECT decode(lpad(to_hex(i), 64, '0'), 'hex'), 'community', 'rack-' || i, 'ops' FROM generate_series(1, 450) i`);
    await page.goto(`${srv.url}/#/nodes`);
    const row = 'tr[data-node]';
    await page.waitFor(() => document.querySelector('#fleet .card')?.textContent === 'online1 of 451');
    assert.equal(await page.count(row), 200);
    assert.equal(await page.count(`${row} .online`), 1, 'the node online first');
    assert.equal(await page.text('#n-count'), '200 shown of 451 matching (451 in all)');
    await page.click('#n-more');
    await page.waitFor((s) => document.querySelectorAll(s).length === 400, row);
    assert.equal(await page.text('#n-more'), 'Show 51 more');
    await page.click('#n-more');
    await page.waitFor((s) => document.querySelectorAll(s).length === 451, row);
    assert.equal(await page.visible('#n-more'), false);
    await page.select('#n-show', 'online');
    await page.waitFor((s) => document.querySelectorAll(s).length === 1, row);
    assert.equal(await page.count(`${row} .online`), 1);
    await page.select('#n-show', 'offline');
    await page.waitFor((s) => document.querySelectorAll(s).length === 200, row);
    await page.fill('#n-find', 'rack-317');
    await page.waitFor((s) => document.querySelectorAll(s).length === 1, row);
    assert.equal((await page.texts(`${row} td`))[1], 'rack-317');
    assert.equal(await page.text('#n-count'), '1 of 451 nodes match');
    await shot('nodes-fleet');
    await page.fill('#n-find', 'no such node');
    await page.waitFor(() => document.querySelector('main').textContent.includes('No nodes match.'));
    assert.deepEqual(pageErrors(), []);
  });

  test('a private farm: the token box asks for a token, and with it the jobs and the live events show', async () => {
    await psql(pg, 'CREATE DATABASE private');
    const priv = await serve(pg.url.replace('dbname=postgres', 'dbname=private'),
      { extra: ['--private', '--web', path.join(top, 'web')] });
    try {
      const { id } = (await call(priv, 'POST', '/api/jobs', { kernel: 'option', params: { S0: 100, K: 100, r: 0.05,
        sigma: 0.2, T: 1 }, items: 1000, seed: 4 })).json;
      // another origin (port): no token kept for it yet
      await page.goto(`${priv.url}/#/jobs`);
      await page.waitFor(() => document.querySelector('#token-box').open);
      assert.equal(await page.text('#token-note'), 'This farm is private: viewing it needs an API token.');
      await page.waitFor(() => document.querySelector('#live').textContent === 'needs an API token');
      assert.equal(await page.count('tbody tr[data-job]'), 0);
      await shot('private-token');
      await page.fill('#token-input', priv.token);
      await page.click('#token-form button[type="submit"]');
      await page.waitVisible(`tbody tr[data-job="${id}"]`);
      await page.waitFor(() => document.querySelector('#live').textContent === 'live');
      assert.equal(await page.text('#token-summary'), 'API token ✓');
      // the events come through the ticketed connection: a job submitted now shows up by itself
      const second = (await call(priv, 'POST', '/api/jobs', { kernel: 'option', params: { S0: 100, K: 100, r: 0.05,
        sigma: 0.2, T: 1 }, items: 1000, seed: 5 })).json.id;
      await page.waitVisible(`tbody tr[data-job="${second}"]`);
      // what the browser logged: the reads refused before the token, and the
      // one events connection tried before the page knew the farm is private
      const errors = pageErrors().filter((e) => !e.includes('status of 401'));
      assert.ok(errors.length <= 1 && errors.every((e) => /\/ws\/events\b/.test(e)), errors.join('\n'));
      // those were this farm's, and expected: the tests after it start clean
      page.errors.length = 0;
    } finally {
      await priv.stop();
    }
  });

  test('a job\'s page shows how much of it is verified, live and final; the nodes page marks the quarantined node', async () => {
    const params = { S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1 };
    const facts = () => page.evaluate(() => Object.fromEntries(['v-verified', 'v-trusted', 'v-unchecked', 'v-passed',
      'v-failed', 'v-waiting', 'v-abandoned', 'v-retracted', 'v-quarantined']
      .map((id) => [id, document.getElementById(id)?.textContent ?? null])));
    const shown = (v, items) => {
      const g = (n) => n.toLocaleString('en-US'), pct = (n) => `${(100 * n / items).toFixed(1)}%`;
      return { 'v-verified': `${g(v.verified_items)} (${pct(v.verified_items)})`,
        'v-trusted': `${g(v.trusted_items)} (${pct(v.trusted_items)})`,
        'v-unchecked': `${g(v.unchecked_items)} (${pct(v.unchecked_items)})`,
        'v-passed': g(v.checks_passed), 'v-failed': g(v.checks_failed), 'v-waiting': g(v.checks_waiting),
        'v-abandoned': g(v.checks_abandoned), 'v-retracted': g(v.retracted_items),
        'v-quarantined': v.quarantined_nodes.length === 0 ? 'No node quarantined.'
          : `Quarantined: ${v.quarantined_nodes.map((n) => `node ${n}`).join(', ')}` };
    };

    // Live: the farm's one node is public and no other owner's node is
    // online, so the check of its result waits; the page shows it waiting.
    const lone = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items: 200000, seed: 41,
      tiers: ['public'], verify: { trust: [] }, name: 'waits for a check' });
    assert.equal(lone.status, 201, lone.text);
    await page.goto(`${srv.url}/#/jobs/${lone.json.id}`);
    await page.waitFor(() => document.querySelector('.state')?.textContent === 'running'
      && Number(document.getElementById('v-waiting')?.textContent) >= 1);
    const live = (await call(srv, 'GET', `/api/jobs/${lone.json.id}`)).json;
    assert.equal(live.state, 'running', 'the job waits for its check');
    assert.deepEqual(await facts(), shown(live.progress.verification, live.items));
    assert.equal(await page.text('#v-verified'), '0 (0.0%)');
    await shot('job-verification-waiting');
    assert.equal((await call(srv, 'POST', `/api/jobs/${lone.json.id}/cancel`)).status, 200);

    // Final: two honest nodes of two owners and a saboteur of a third, all
    // enrolled as community nodes; a job that trusts no tier is checked, and
    // the saboteur quarantined.
    const nodes = [];
    try {
      for (const [owner, bin, env] of [['alice', simfarm, {}], ['bob', simfarm, {}],
        ['mallory', path.join(build, 'tests/integration/saboteur'), { SIMFARM_SABOTAGE: 'zeros' }]]) {
        const t = await call(srv, 'POST', '/api/tokens', { kind: 'claim', owner, tier: 'community', expires_in: 600 });
        assert.equal(t.status, 201, t.text);
        const args = ['--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--claim-token', t.json.token,
          '--key', path.join(tmp, `${owner}.key`)];
        const child = spawn(bin, bin === simfarm ? ['node', ...args, '--cores', '1', '--backend', 'cpu'] : args,
          { stdio: 'ignore', env: { ...process.env, ...env } });
        nodes.push({ child, exited: new Promise((resolve) => child.on('exit', resolve)) });
      }
      const items = 6000000;
      const sub = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items, seed: 42,
        tiers: ['community'], verify: { trust: [] }, name: 'checked' });
      assert.equal(sub.status, 201, sub.text);
      const id = sub.json.id;
      await page.goto(`${srv.url}/#/jobs/${id}`);
      await page.waitFor(() => document.querySelector('.state')?.textContent === 'complete'
        && document.querySelector('#finished-at')?.textContent !== '–'
        && document.querySelector('#v-quarantined a') !== null);
      const job = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
      assert.equal(job.state, 'complete');
      const v = job.result.verification;
      assert.ok(v.checks_passed > 0, JSON.stringify(v));
      const mallory = Number(await psql(pg, "SELECT id FROM nodes WHERE owner = 'mallory'"));
      assert.deepEqual(v.quarantined_nodes, [mallory], JSON.stringify(v));
      assert.deepEqual(await facts(), shown(v, items));
      assert.match(await page.attr('#v-bar', 'aria-label'), new RegExp(`^of 6,000,000 items: ${(100 * v.verified_items / items)
        .toFixed(1)}% verified, 0\\.0% trusted, ${(100 * v.unchecked_items / items).toFixed(1).replace('.', '\\.')}% unchecked$`));
      await shot('job-verification');

      // the link names the node; the nodes page shows it quarantined, with its failed check
      await page.click(`#v-quarantined a[data-node="${mallory}"]`);
      await page.waitFor((n) => document.querySelector(`tr[data-node="${n}"] .quarantined`) !== null, mallory);
      assert.equal(await page.value('#n-find'), String(mallory));
      const row = (await call(srv, 'GET', '/api/nodes')).json.find((n) => n.id === mallory);
      assert.ok(row.quarantined_at && row.checks_failed >= 0, JSON.stringify(row));
      const cells = await page.texts(`tr[data-node="${mallory}"] td`);
      assert.equal(cells[2], 'quarantined');
      assert.equal(cells.at(-1), row.checks_passed + row.checks_failed > 0
        ? `${row.checks_passed} / ${row.checks_failed}` : '–');
      await page.select('#n-show', 'quarantined');
      await page.fill('#n-find', '');
      await page.waitFor(() => document.querySelectorAll('tr[data-node]').length === 1);
      const alice = Number(await psql(pg, "SELECT id FROM nodes WHERE owner = 'alice'"));
      const honest = (await call(srv, 'GET', '/api/nodes')).json.find((n) => n.id === alice);
      assert.equal(honest.quarantined_at, null);
      await shot('nodes-quarantined');
      assert.deepEqual(pageErrors(), []);
    } finally {
      for (const n of nodes) {
        if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGTERM');
        const timer = setTimeout(() => n.child.kill('SIGKILL'), 20000);
        await n.exited;
        clearTimeout(timer);
      }
    }
  });
}
