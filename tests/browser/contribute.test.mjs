// The browser node end to end: PostgreSQL, `simfarm serve --allow-public-nodes`
// serving web/ (with the bundle `make` builds into web/node/), and Debian's
// Chromium opening /contribute. Started with 2 cores, the tab enrols as a
// public node; the job it computes is accepted chunk by chunk (each
// completion's signature checked by the coordinator) and equals the native
// single-process result bit for bit. Its cores slider adds and removes
// workers without leaving the session; a compute worker that fails to load
// is replaced, and its chunk handed out again. A tab closed in the middle of a chunk
// gives its chunks back, and the job still completes; one whose coordinator
// is killed and started again comes back by itself. The page also works
// over https and under a proxy's path prefix.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { serve, call, metrics } from '../lib/coord.mjs';
import { selfSigned } from '../lib/tls.mjs';
import { prefixProxy } from '../lib/prefixproxy.mjs';
import { launch } from './chromium.mjs';
import { contributeFarm } from './farm.mjs';

const harness = path.join(build, 'tests/wasm/node_actor');
const artifacts = path.join(build, 'test-artifacts');
const option = fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8');
// The tabs join as public nodes (open enrolment): the jobs name that tier
// (a job that names none leaves public nodes out).
// Every tier, and every tier trusted: these tests are about farming, not
// spot-checks (tests/integration/verify.test.mjs), and a lone node could not be
// checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };

let pg, srv, browser;
let farm;
before(async () => {
  farm = await contributeFarm();
  ({ pg, srv, browser } = farm);
});
after(() => farm?.close());

// Asks check() every 100 ms until it gives a value; fails at the deadline.
async function job(id) {
  const r = await call(srv, 'GET', `/api/jobs/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

async function browserNodes() {
  const r = await call(srv, 'GET', '/api/nodes');
  assert.equal(r.status, 200, r.text);
  const list = Array.isArray(r.json) ? r.json : r.json.nodes;
  return list.filter((n) => n.capabilities?.arch === 'wasm32');
}

// Waits for a job to complete (get() reads it), up to ms; a failure says
// what the tab's log held, and what more() adds.
async function untilComplete(get, ms, tab, more = async () => '') {
  return eventually(async () => {
    const j = await get();
    return j.state === 'complete' ? j : null;
  }, 'job complete', ms).catch(async (e) => {
    if (tab) e.message += `${await more()}\npage log:\n${await tab.locator('#log').textContent()}`;
    throw e;
  });
}

// A finished job's outputs against the native single-process run of the
// same items and seed, bit for bit.
async function sameAsNative(done, items, seed) {
  const local = await run(harness, ['sim', 'option', option, String(items), String(seed)], { timeoutMs: 120000 });
  assert.equal(local.code, 0, local.stderr);
  const lines = local.stdout.trim().split('\n');
  assert.equal(done.result.outputs.length, lines.length);
  for (const o of done.result.outputs) {
    const line = lines.find((l) => l.startsWith(o.name + ' '));
    assert.ok(line, `native output ${o.name}`);
    const [, count, mean, se, min, max] = line.split(' ');
    assert.equal(o.count, Number(count), `${o.name} count`);
    // %.17g on both sides: equal numbers are equal bits.
    assert.equal(o.mean, Number(mean), `${o.name} mean`);
    assert.equal(o.stderr, Number(se), `${o.name} stderr`);
    assert.equal(o.min, Number(min), `${o.name} min`);
    assert.equal(o.max, Number(max), `${o.name} max`);
  }
}

// Opens /contribute (fragment: after #) in a fresh context (its own
// IndexedDB: a new key), sets the cores and starts; resolves once the page
// says it is running.
async function contribute(cores, { fragment = '', pauseHidden = false, server = srv, via = browser, init, route } = {}) {
  const context = await via.newContext();
  if (init) await context.addInitScript(init);
  if (route) await context.route(route.url, route.handler);
  const tab = await context.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  // its workers' requests too
  const wasmFetches = [];
  context.on('request', (r) => { if (r.url().endsWith('/simfarm-node.wasm')) wasmFetches.push(r.url()); });
  const res = await tab.goto(`${server.url}/contribute${fragment ? '#' + fragment : ''}`);
  assert.equal(res.status(), 200);
  if (pauseHidden) await tab.locator('#pause-hidden').check();
  await tab.locator('#cores').fill(String(cores));
  assert.equal(await tab.locator('#cores-out').textContent(), String(cores));
  await tab.locator('#start').click();
  await tab.waitForFunction(() => document.getElementById('state').textContent === 'running', null,
    { timeout: 30000 });
  return { context, tab, errors, wasmFetches };
}

test('a tab with 2 cores computes a job that equals the native single-process run', async () => {
  const items = 2000000, seed = 11;
  const { context, tab, errors, wasmFetches } = await contribute(2);
  try {
    const [node] = await eventually(async () => {
      const n = (await browserNodes()).filter((x) => x.online);
      return n.length === 1 ? n : null;
    }, 'the browser node online', 15000);
    assert.equal(node.tier, 'public');
    assert.equal(node.capabilities.max_parallel, 2);
    assert.equal(node.capabilities.backends[0].kind, 'wasm');
    assert.match(node.version, /\(wasm\)/);
    // The node reports the SHA-256 of the WebAssembly it runs.
    const wasm = fs.readFileSync(path.join(top, 'web/node/simfarm-node.wasm'));
    assert.equal(node.capabilities.checksum, (await import('node:crypto')).createHash('sha256').update(wasm).digest('hex'));

    const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json;
    const done = await untilComplete(() => job(id), 240000);

    // Every chunk came from the tab and was accepted (the journal's
    // contributions), each completion's Ed25519 signature checked first.
    assert.equal(done.result.nodes.length, 1, JSON.stringify(done.result.nodes));
    const [mine] = done.result.nodes;
    assert.equal(mine.node, node.id);
    assert.equal(mine.items, items);
    assert.ok(mine.chunks >= 2, `chunks from the tab: ${mine.chunks}`);
    assert.equal(done.progress?.chunks_failed ?? 0, 0);
    assert.equal(done.result.items_done, items);
    assert.equal(done.result.items_failed, 0);

    await sameAsNative(done, items, seed);
    // The compute workers run the bytes the node worker fetched and hashed.
    assert.equal(wasmFetches.length, 1, wasmFetches.join('\n'));

    await tab.waitForFunction(() => Number(document.getElementById('chunks').textContent) >= 2, null,
      { timeout: 10000 });
    // no chunk in hand once the job is complete
    await tab.waitForFunction(() => document.getElementById('job').textContent === 'none', null, { timeout: 10000 });
    // what this browser has done in all, from the coordinator (refreshed every 10 s)
    const total = `${items.toLocaleString('en')} items in ${mine.chunks.toLocaleString('en')} chunks`;
    await tab.waitForFunction((t) => document.getElementById('total').textContent === t, total, { timeout: 20000 });
    fs.mkdirSync(artifacts, { recursive: true });
    await tab.screenshot({ path: path.join(artifacts, 'contribute.png'), fullPage: true });

    // Stop drains: the page says so and the coordinator sees the node leave.
    await tab.locator('#start').click();
    await tab.waitForFunction(() => document.getElementById('state').textContent === 'stopped', null,
      { timeout: 30000 });
    await eventually(async () => !(await browserNodes()).find((x) => x.id === node.id).online, 'node offline', 15000);
    // kept by the coordinator: the page opened again, not started, shows it
    const again = await context.newPage();
    await again.goto(`${srv.url}/contribute`);
    await again.waitForFunction((t) => document.getElementById('total').textContent === t, total, { timeout: 10000 });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('the cores slider changes the workers within the session: more at once, fewer once their chunks end', async () => {
  // A coordinator of its own (a database of its own) with one-second
  // chunks, so the tab's chunks end often.
  await psql(pg, 'CREATE DATABASE cores');
  const quick = await serve(pg.url.replace('dbname=postgres', 'dbname=cores'),
    { extra: ['--allow-public-nodes', '--web', path.join(top, 'web'), '--chunk-ms', '1000'] });
  const { context, tab, errors } = await contribute(1, { server: quick });
  try {
    const me = async () => (await call(quick, 'GET', '/api/nodes')).json.find((n) => n.online);
    const first = await eventually(me, 'the browser node online', 15000);
    const cores = await tab.evaluate(() => navigator.hardwareConcurrency);
    assert.ok(cores >= 2, `the slider needs 2 cores here, the browser has ${cores}`);
    assert.deepEqual([first.capabilities.cores, first.capabilities.max_parallel, first.slots], [cores, 1, 1]);
    const items = 150000000, seed = 21;
    const created = await call(quick, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json;
    const live = (what, pred) => eventually(async () => { const n = await me(); return n && pred(n) ? n : null; },
      what, 30000);
    await live('one chunk in hand', (n) => n.in_flight === 1 && n.chunks_done >= 2);

    await tab.locator('#cores').fill('2');
    const two = await live('two chunks in hand at once', (n) => n.slots === 2 && n.in_flight === 2);
    assert.equal(two.id, first.id);
    assert.equal(two.connected_ms, first.connected_ms, 'the same session');
    assert.equal(two.max_parallel, 2);

    await tab.locator('#cores').fill('1');
    await live('one slot', (n) => n.slots === 1);
    // the second worker's chunk ends and is not followed by another
    const one = await live('one chunk in hand', (n) => n.in_flight <= 1);
    assert.equal(one.connected_ms, first.connected_ms, 'the same session');
    // Back and forth faster than chunks end: no chunk is lost on the way
    // (the job below completes, every item accounted for).
    for (const c of ['2', '1', '2', '1']) await tab.locator('#cores').fill(c);
    await live('one slot again', (n) => n.slots === 1 && n.max_parallel === 1);

    const done = await untilComplete(async () => (await call(quick, 'GET', `/api/jobs/${id}`)).json, 240000, tab,
      async () => `\njob: ${(await call(quick, 'GET', `/api/jobs/${id}`)).text}\nnode: ${JSON.stringify(await me())}` +
        `\ncoordinator:\n${quick.stderr().slice(-4000)}`);
    assert.equal(done.result.nodes.length, 1);
    assert.equal(done.result.items_done, items);
    assert.equal(done.result.items_failed, 0);
    await sameAsNative(done, items, seed);
    const log = await tab.locator('#log').textContent();
    assert.match(log, /2 cores from now on/);
    assert.match(log, /1 core from now on/);
    assert.doesNotMatch(log, /stopped/);
    assert.equal((await me()).connected_ms, first.connected_ms, 'one session all along');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await quick.stop();
  }
});

test('a compute worker that fails to load is ended and replaced: its chunk goes back and the node goes on', async () => {
  // The module's script, as the compute worker loads it, fails once (the
  // network dropped it), after the worker was given its first chunk. The
  // node worker loads it first; each compute worker after it.
  await psql(pg, 'CREATE DATABASE brokenworker');
  const quick = await serve(pg.url.replace('dbname=postgres', 'dbname=brokenworker'),
    { extra: ['--allow-public-nodes', '--web', path.join(top, 'web'), '--heartbeat-ms', '500'] });
  let loads = 0, held = null;
  const route = {
    url: '**/node/simfarm-node.js',
    handler: (r) => {
      if (++loads === 2) held = r; // compute worker 0's: dropped below
      else r.continue();
    },
  };
  const { context, tab, errors } = await contribute(1, { server: quick, route });
  try {
    const me = async () => (await call(quick, 'GET', '/api/nodes')).json.find((n) => n.online);
    const node = await eventually(me, 'the browser node online', 15000);
    const items = 40000, seed = 31;
    const created = await call(quick, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json;
    await eventually(async () => (await me())?.in_flight === 1, 'a chunk in the tab', 15000);
    await tab.waitForFunction(() => document.getElementById('job').textContent !== 'none', null, { timeout: 15000 });
    assert.ok(held, 'the compute worker asked for its script');
    await held.abort('connectionfailed');
    // given back once the node had listed it no more for two heartbeats,
    // not when its lease (30 s) would have run out
    const m = await eventually(async () => { // the scheduler's figures, refreshed every second
      const x = await metrics(quick);
      return x['simfarm_claims_reclaimed_total{why="given_back"}'] === 1 ? x : null;
    }, 'the claim counted as given back', 15000);
    assert.equal(m['simfarm_claims_reclaimed_total{why="lease"}'], 0);
    // A node is not handed again a range it gave back (docs/scheduling.md):
    // the tab computes every other range of the job and then waits, idle,
    // while the job waits for another node to take that one.
    await tab.waitForFunction(
      () => /failed: device or driver error[\s\S]*idle, waiting for work/.test(document.getElementById('log').textContent),
      null, { timeout: 60000 });
    const waiting = (await call(quick, 'GET', `/api/jobs/${id}`)).json;
    assert.equal(waiting.state, 'running', 'the job waits for another node');
    assert.ok(waiting.progress.items_done < items, JSON.stringify(waiting.progress));
    assert.equal((await me()).in_flight, 0, 'the range given back is not handed to the tab again');
    // A second tab takes it, and the job completes.
    const second = await contribute(1, { server: quick });
    let done;
    try {
      done = await untilComplete(async () => (await call(quick, 'GET', `/api/jobs/${id}`)).json, 60000, second.tab);
      assert.deepEqual(second.errors, []);
    } finally {
      await second.context.close();
    }
    const ran = done.result.nodes.map((n) => n.node);
    assert.equal(ran.length, 2, JSON.stringify(done.result.nodes));
    assert.ok(ran.includes(node.id), 'the first tab computed the rest');
    await sameAsNative(done, items, seed);
    const log = await tab.locator('#log').textContent();
    assert.match(log, /compute worker 0: .*simfarm-node\.js/);
    assert.match(log, /failed: device or driver error/);
    assert.equal(await tab.locator('#state').textContent(), 'running');
    assert.equal((await me()).connected_ms, node.connected_ms, 'the same session');
    assert.ok(loads >= 3, `script loads: ${loads}`);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await quick.stop();
  }
});

test('a cancel stops the chunk a tab computes: its worker takes the next job long before the chunk would end', async () => {
  // Chunks sized to take five minutes; one compute worker. A database of its
  // own: a coordinator loads every pending job of its database.
  const db = await startPostgres();
  const slow = await serve(db.url, { extra: ['--allow-public-nodes', '--web', path.join(top, 'web'), '--chunk-ms', '300000'] });
  const { context, tab, errors } = await contribute(1, { server: slow });
  try {
    const tabNode = async () => (await call(slow, 'GET', '/api/nodes')).json.find((n) => n.online);
    const me = (await eventually(tabNode, 'the browser node online', 15000)).id;
    const asian = { ...JSON.parse(option), style: 'asian_arithmetic', steps: 2000, greeks: false };
    const a = await call(slow, 'POST', '/api/jobs', { kernel: 'option', params: asian, items: 1e12, seed: 3, tiers, verify });
    assert.equal(a.status, 201, a.text);
    // The first chunks are small probes; once the tab's speed is known the
    // next one is sized to minutes. Wait until the chunk in hand is worth a
    // minute at least at the measured speed.
    const seen = [];
    await eventually(async () => {
      const n = (await call(slow, 'GET', '/api/nodes')).json.find((x) => x.id === me);
      const p = (await call(slow, 'GET', `/api/jobs/${a.json.id}`)).json.progress;
      const now = `${n?.items_per_s} items/s, ${p?.items_in_flight} in flight, ${n?.chunks_done} chunks done`;
      if (seen.at(-1) !== now) seen.push(now);
      return n && n.items_per_s > 0 && p && p.items_in_flight >= 60 * n.items_per_s;
    }, 'a chunk of a minute or more in hand', 90000).catch((e) => {
      e.message += `\nthe node and the job as seen: ${seen.slice(-20).join('; ')}`;
      throw e;
    });
    // The page shows the work inside that chunk as it goes: items computed
    // grow, and the rate is live, while no chunk ends.
    const shown = async () => ({
      chunks: await tab.locator('#chunks').textContent(),
      computed: Number((await tab.locator('#computed').textContent()).replace(/,/g, '')),
      rate: Number((await tab.locator('#rate').textContent()).replace(/,/g, '')),
    });
    const first = await shown();
    const later = await eventually(async () => {
      const s = await shown();
      return s.computed > first.computed ? s : null;
    }, 'items computed growing inside the chunk', 10000);
    assert.equal(later.chunks, first.chunks, 'no chunk ended meanwhile');
    assert.ok(later.rate > 0, `items/s ${later.rate}`);
    assert.equal((await call(slow, 'POST', `/api/jobs/${a.json.id}/cancel`)).status, 200);
    // The worker is free: a second job is computed at once, not after the
    // minutes the cancelled chunk would have taken.
    const items = 4000, seed = 9;
    const b = await call(slow, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
    assert.equal(b.status, 201, b.text);
    const done = await eventually(async () => {
      const j = (await call(slow, 'GET', `/api/jobs/${b.json.id}`)).json;
      return j.state === 'complete' ? j : null;
    }, 'the next job complete', 30000);
    assert.equal(done.result.nodes[0].node, me);
    await sameAsNative(done, items, seed);
    assert.equal((await tabNode()).in_flight, 0);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await slow.stop();
    await db.stop();
  }
});

test('a tab closed in the middle of a chunk gives it back and the job completes', async () => {
  // Chunks of about a second or more: the first ones go out before the
  // coordinator knows the tab's speed.
  const items = 60000000, seed = 12;
  const { context } = await contribute(2);
  const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
  assert.equal(created.status, 201, created.text);
  const { id } = created.json;
  await eventually(async () => {
    const p = (await job(id)).progress;
    return p && p.claims_in_flight >= 1;
  }, 'chunks in the tab', 30000);
  await context.close();

  await eventually(async () => {
    const p = (await job(id)).progress;
    return p && p.reclaims >= 1 && p.claims_in_flight === 0;
  }, 'the chunks given back', 30000);

  // A second tab finishes the job.
  const second = await contribute(2);
  try {
    const done = await untilComplete(() => job(id), 400000);
    assert.equal(done.result.items_done, items);
    assert.equal(done.result.items_failed, 0);
  } finally {
    await second.context.close();
  }
});

test('a coordinator killed and restarted: the tab says so, comes back by itself as the same node and the job completes', async () => {
  // A coordinator of its own, killed (no bye, no close frame) while the tab
  // computes, then started again on the same port, database and admin
  // token. Nothing is pressed in the tab meanwhile.
  await psql(pg, 'CREATE DATABASE restart');
  const db = pg.url.replace('dbname=postgres', 'dbname=restart');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-restart-'));
  const extra = ['--allow-public-nodes', '--web', path.join(top, 'web'), '--chunk-ms', '1000'];
  const first = await serve(db, { extra, tokenFile: path.join(dir, 'token') });
  let second = null;
  const { context, tab, errors } = await contribute(1, { server: first });
  try {
    const me = async (s) => (await call(s, 'GET', '/api/nodes')).json.find((n) => n.online);
    const node = await eventually(() => me(first), 'the browser node online', 15000);
    const items = 100000000, seed = 51;
    const created = await call(first, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json;
    await eventually(async () => (await me(first))?.chunks_done >= 2, 'two chunks accepted', 60000);
    process.kill(first.pid, 'SIGKILL');
    await first.stop();
    await pageState(tab, 'coordinator unavailable');

    second = await serve(db, { extra: [...extra, '--listen', `127.0.0.1:${first.port}`], tokenFile: path.join(dir, 'token') });
    await pageState(tab, 'running');
    const back = await eventually(() => me(second), 'the browser node online again', 30000);
    assert.equal(back.id, node.id, 'the same node, by its key');
    const done = await untilComplete(async () => (await call(second, 'GET', `/api/jobs/${id}`)).json, 240000, tab);
    assert.equal(done.result.items_done, items);
    assert.equal(done.result.items_failed, 0);
    await sameAsNative(done, items, seed);
    const log = await tab.locator('#log').textContent();
    assert.match(log, /lost 127\.0\.0\.1:\d+ \(connection lost\); trying again/);
    assert.equal((log.match(new RegExp(`as node ${node.id},`, 'g')) ?? []).length, 2, log);
    assert.doesNotMatch(log, /stopped/);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await second?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// What the page sees when its tab is hidden or shown again.
function setVisibility(tab, state) {
  return tab.evaluate((v) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => v });
    document.dispatchEvent(new Event('visibilitychange'));
  }, state);
}

const pageState = (tab, want) => tab.waitForFunction((w) => document.getElementById('state').textContent === w,
  want, { timeout: 30000 });

test('a claim token in the fragment enrols the tab under its owner and tier; hidden, it pauses and resumes', async () => {
  const tok = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'team' });
  assert.equal(tok.status, 201, tok.text);
  const { context, tab } = await contribute(1, { fragment: `claim=${tok.json.token}`, pauseHidden: true });
  try {
    await tab.waitForFunction(() => location.hash === '', null, { timeout: 10000 }); // used up: not sent again
    assert.equal(await tab.locator('#enrolment').textContent(), 'enrolled with the claim token');
    const node = await eventually(async () => (await browserNodes()).find((n) => n.online && n.tier === 'team'),
      'the enrolled tab online', 15000);
    assert.equal(node.owner, tok.json.owner);
    const first = node.connected_ms;

    // Hidden: paused (the coordinator is told `bye draining`).
    await setVisibility(tab, 'hidden');
    await pageState(tab, 'paused');

    // A job submitted while it is paused waits for it (the paused session's
    // waiting claim was withdrawn, so nothing is handed to it).
    // The job trusts the tab's tier: no other node could spot-check its
    // results here, which would wait for a check until given up (120 s).
    const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option),
      items: 200000, seed: 13, verify: { trust: ['own', 'team'] } });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json;

    // Visible again: a new session, which computes the job.
    await setVisibility(tab, 'visible');
    await eventually(async () => {
      const n = (await browserNodes()).find((x) => x.id === node.id);
      return n.online && n.connected_ms > first;
    }, 'a new session', 15000);
    await pageState(tab, 'running');
    const done = await untilComplete(() => job(id), 120000, tab);
    assert.deepEqual(done.result.nodes.map((n) => n.node), [node.id]);
  } finally {
    await context.close();
  }
});

test('on battery power the tab pauses, and resumes on mains power; the contributor\'s choices are kept', async () => {
  // The browser's battery, as the page sees it: Chromium here has none and
  // says it is charging, so the test stands in for it and says when the
  // power changes.
  const init = () => {
    const b = new EventTarget();
    b.charging = true;
    b.level = 0.5;
    Object.defineProperty(navigator, 'getBattery', { configurable: true, value: () => Promise.resolve(b) });
    window.testBattery = (charging) => { b.charging = charging; b.dispatchEvent(new Event('chargingchange')); };
  };
  const { context, tab, errors } = await contribute(2, { init }); // not the default (half the cores) here
  try {
    assert.equal(await tab.locator('#pause-battery').isChecked(), true, 'on by default');
    const me = await eventually(async () => (await browserNodes()).find((n) => n.online), 'the tab online', 15000);
    await tab.evaluate(() => window.testBattery(false));
    await pageState(tab, 'paused');
    assert.match(await tab.locator('#log').textContent(), /pausing: on battery power/);
    await tab.evaluate(() => window.testBattery(true));
    await pageState(tab, 'running');
    await eventually(async () => {
      const n = (await browserNodes()).find((x) => x.id === me.id);
      return n.online && n.connected_ms > me.connected_ms;
    }, 'a new session on mains power', 15000);

    // Unticked, the battery is no reason to pause.
    await tab.locator('#pause-battery').uncheck();
    await tab.evaluate(() => window.testBattery(false));
    const log = await tab.locator('#log').textContent();
    assert.equal(log.match(/pausing/g).length, 1, log);
    assert.equal(await tab.locator('#state').textContent(), 'running');

    // The same browser profile opening the page again finds its choices.
    await tab.locator('#pause-hidden').check();
    const again = await context.newPage();
    await again.goto(`${srv.url}/contribute`);
    assert.equal(await again.locator('#pause-battery').isChecked(), false);
    assert.equal(await again.locator('#pause-hidden').isChecked(), true);
    assert.equal(await again.locator('#cores').inputValue(), '2');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

// A 400,000-item job submitted to server, computed by the browser node
// alone and equal to the native run; resolves to its id.
async function computedBy(node, server, seed) {
  const items = 400000;
  const created = await call(server, 'POST', '/api/jobs', { kernel: 'option', params: JSON.parse(option), items, seed, tiers, verify });
  assert.equal(created.status, 201, created.text);
  const done = await eventually(async () => {
    const j = (await call(server, 'GET', `/api/jobs/${created.json.id}`)).json;
    return j.state === 'complete' ? j : null;
  }, `job ${created.json.id} complete`, 120000);
  assert.deepEqual(done.result.nodes.map((n) => n.node), [node.id]);
  await sameAsNative(done, items, seed);
  return created.json.id;
}

// The dashboard at url, in a new page of context, once it is live and lists
// job id: {page, errors}.
async function dashboardListing(context, url, id) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: 15000 });
  await page.waitForFunction((j) => [...document.querySelectorAll('main a')].some((a) => a.textContent.trim() === String(j)),
    id, { timeout: 15000 });
  return { page, errors };
}

test('over https: the page, its workers and the node\'s WebSocket over wss, trusting the coordinator\'s certificate', async () => {
  // A coordinator of its own (one per database) with a self-signed
  // certificate for 127.0.0.1. Chromium is told to trust that key alone;
  // certificate errors are not ignored wholesale.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-contribute-tls-'));
  await psql(pg, 'CREATE DATABASE tls');
  const good = await selfSigned(dir, 'coordinator');
  const secure = await serve(pg.url.replace('dbname=postgres', 'dbname=tls'), { ca: good.cert,
    extra: ['--allow-public-nodes', '--web', path.join(top, 'web'), '--tls-cert', good.cert, '--tls-key', good.key] });
  const spki = new crypto.X509Certificate(fs.readFileSync(good.cert)).publicKey.export({ type: 'spki', format: 'der' });
  const hash = crypto.createHash('sha256').update(spki).digest('base64');
  const trusting = await launch([`--ignore-certificate-errors-spki-list=${hash}`]);
  let context;
  try {
    assert.match(secure.url, /^https:/);
    // Without that trust, the page does not open.
    const plain = await browser.newContext();
    await assert.rejects(plain.newPage().then((t) => t.goto(`${secure.url}/contribute`)), /ERR_CERT_AUTHORITY_INVALID/);
    await plain.close();

    let tab, errors;
    ({ context, tab, errors } = await contribute(2, { server: secure, via: trusting }));
    assert.match(tab.url(), /^https:\/\/127\.0\.0\.1:\d+\/contribute$/);
    // An https page may open no ws:// socket (mixed content): the node
    // online is the node over wss.
    const node = await eventually(async () => (await call(secure, 'GET', '/api/nodes')).json.find((n) => n.online),
      'the browser node online over wss', 15000);
    assert.equal(node.capabilities.arch, 'wasm32');
    const id = await computedBy(node, secure, 21);
    assert.deepEqual(errors, []);

    // The dashboard on the same origin: its scripts load whole and its live
    // events come over wss.
    const board = await dashboardListing(context, `${secure.url}/`, id);
    assert.deepEqual(board.errors, []);
  } finally {
    await context?.close();
    await trusting.close();
    await secure.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('under a proxy\'s path prefix: the page, its workers, the node\'s WebSocket and the dashboard stay under it', async () => {
  // The operator's proxy serves the coordinator at /farm/, keeping the Host
  // header (the audience the tab signs for is the proxy's host and port).
  const proxy = await prefixProxy(srv.port, '/farm');
  let context;
  try {
    let tab, errors;
    ({ context, tab, errors } = await contribute(2, { server: proxy }));
    const node = await eventually(async () => (await browserNodes()).find((n) => n.online),
      'the browser node online through the proxy', 15000);
    const id = await computedBy(node, srv, 23);
    assert.deepEqual(errors, []);

    // The dashboard under the prefix: its modules, uPlot, the API and the
    // live events; the submit form's command names the prefixed address.
    const board = await dashboardListing(context, `${proxy.url}/`, id);
    await board.page.goto(`${proxy.url}/#/submit`);
    await board.page.waitForFunction((u) => document.body.textContent.includes(`simfarm submit - --server ${u}`),
      proxy.url, { timeout: 15000 });
    assert.deepEqual(board.errors, []);

    assert.deepEqual(proxy.stray, [], 'requests outside the prefix');
    assert.ok(proxy.upgrades.includes('/farm/ws/node'), proxy.upgrades.join(' '));
    assert.ok(proxy.upgrades.includes('/farm/ws/events'), proxy.upgrades.join(' '));
  } finally {
    await context?.close();
    await proxy.close();
  }
});
