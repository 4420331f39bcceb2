// The contribute page's controls and what it shows: a pause (and a resume)
// or a Stop asked for while the module still loads, the enrolment marked
// once the coordinator welcomes the node (paused or not), the Enrolment
// field for a key enrolled earlier, the battery checkbox where the browser
// gives no battery, and the current job once no chunk is in hand.
// On contributeFarm() (farm.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, top } from '../lib/proc.mjs';
import { call } from '../lib/coord.mjs';
import { contributeFarm } from './farm.mjs';

const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
// The tabs join as public nodes (open enrolment): the jobs name that tier
// (a job that names none leaves public nodes out).
// Every tier, and every tier trusted: these tests are about farming, not
// spot-checks (tests/integration/verify.test.mjs), and a lone node could not be
// checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };

let srv, browser;
let farm;
before(async () => {
  farm = await contributeFarm();
  ({ srv, browser } = farm);
});
after(() => farm?.close());

// The browser's battery as the page sees it (Chromium here has none and
// says it is charging): charging or not at first, and
// window.testBattery(charging) when the power changes.
function battery(charging) {
  const b = new EventTarget();
  b.charging = charging;
  b.level = 0.5;
  Object.defineProperty(navigator, 'getBattery', { configurable: true, value: () => Promise.resolve(b) });
  window.testBattery = (c) => { b.charging = c; b.dispatchEvent(new Event('chargingchange')); };
}

// A fresh browser profile (its own IndexedDB: a new key); init, with arg,
// runs in its pages before their scripts.
async function profile(init, arg) {
  const context = await browser.newContext();
  if (init) await context.addInitScript(init, arg);
  return context;
}

// Opens /contribute (fragment: after #) in a new page of context.
async function open(context, fragment = '') {
  const tab = await context.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  const res = await tab.goto(`${srv.url}/contribute${fragment ? '#' + fragment : ''}`);
  assert.equal(res.status(), 200);
  await tab.locator('#cores').fill('1');
  return { tab, errors };
}

const text = (tab, id) => tab.locator(`#${id}`).textContent();
const shows = (tab, id, want, timeout = 30000) =>
  tab.waitForFunction(([i, w]) => document.getElementById(i).textContent === w, [id, want], { timeout });

// Resolves to the node's id once the coordinator has welcomed it (the
// detail line says "node N", in state running or paused alike).
async function welcomed(tab) {
  await tab.waitForFunction(() => /^node \d+$/.test(document.getElementById('detail').textContent), null,
    { timeout: 30000 });
  return Number((await text(tab, 'detail')).slice(5));
}

async function nodes() {
  const r = await call(srv, 'GET', '/api/nodes');
  assert.equal(r.status, 200, r.text);
  return Array.isArray(r.json) ? r.json : r.json.nodes;
}

// Submits an option job; resolves to it once it is complete.
async function computed(items, seed) {
  const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers, verify });
  assert.equal(created.status, 201, created.text);
  return eventually(async () => {
    const j = (await call(srv, 'GET', `/api/jobs/${created.json.id}`)).json;
    return j.state === 'complete' ? j : null;
  }, `job ${created.json.id} complete`, 120000);
}

// Holds the node worker's fetch of the module until release() is called;
// requested resolves once the fetch has been made.
async function holdModule(context) {
  let release, requested;
  const gate = new Promise((resolve) => { release = resolve; });
  const asked = new Promise((resolve) => { requested = resolve; });
  await context.route('**/simfarm-node.wasm', async (route) => {
    requested();
    await gate;
    await route.continue();
  });
  return { requested: asked, release };
}

// What this profile's IndexedDB says of its key.
const storedKey = (tab) => tab.evaluate(() => new Promise((resolve, reject) => {
  const o = indexedDB.open('simfarm-node', 1);
  o.onerror = () => reject(o.error);
  o.onsuccess = () => {
    const r = o.result.transaction('key', 'readonly').objectStore('key').get('node');
    r.onsuccess = () => { o.result.close(); resolve(r.result ? { enrolled: r.result.enrolled } : null); };
  };
}));

test('a tab started on battery power is welcomed paused, and computes once the power is back', async () => {
  const context = await profile(battery, false);
  try {
    const { tab, errors } = await open(context);
    await tab.locator('#start').click();
    // The pause was asked for before the node existed: it holds from the
    // welcome on (the coordinator is told `bye draining` at once).
    const me = await welcomed(tab);
    assert.equal(await text(tab, 'state'), 'paused', await text(tab, 'log'));
    assert.match(await text(tab, 'log'), /pausing: on battery power/);

    // On mains power: a new session, which computes the job.
    const first = (await nodes()).find((n) => n.id === me);
    assert.ok(first?.online, 'the paused tab keeps its session');
    await tab.evaluate(() => window.testBattery(true));
    await shows(tab, 'state', 'running');
    await eventually(async () => {
      const n = (await nodes()).find((x) => x.id === me);
      return n.online && n.connected_ms > first.connected_ms;
    }, 'a new session on mains power', 15000);
    const done = await computed(200000, 31);
    assert.deepEqual(done.result.nodes.map((n) => n.node), [me]);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a pause and a resume both asked for while the module loads leave the node running', async () => {
  const context = await profile(battery, false);
  try {
    const held = await holdModule(context);
    const { tab, errors } = await open(context);
    await tab.locator('#start').click();
    await held.requested;
    await tab.evaluate(() => window.testBattery(true));
    assert.match(await text(tab, 'log'), /pausing: on battery power[^]*resuming/);
    held.release();
    await welcomed(tab);
    assert.equal(await text(tab, 'state'), 'running');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('Stop pressed while the module loads ends the start: no node connects and the page is stopped again', async () => {
  const context = await profile();
  try {
    const held = await holdModule(context);
    const { tab, errors } = await open(context);
    const before = (await nodes()).length;
    await tab.locator('#start').click();
    await held.requested;
    assert.equal(await text(tab, 'start'), 'Stop');
    await tab.locator('#start').click();
    assert.equal(await text(tab, 'start'), 'Stop now');
    held.release();
    // The worker ends the start once the module is there, and the page
    // ends the worker: nothing is left that could connect later.
    await shows(tab, 'start', 'Start', 15000);
    assert.equal(await text(tab, 'state'), 'stopped');
    assert.equal((await nodes()).length, before, 'a node connected');
    assert.match(await text(tab, 'log'), /stopped \(0\)/);

    // Started again, it runs.
    await context.unroute('**/simfarm-node.wasm');
    await tab.locator('#start').click();
    const me = await welcomed(tab);
    assert.equal(await text(tab, 'state'), 'running');
    assert.equal((await nodes()).length, before + 1);
    assert.ok((await nodes()).find((n) => n.id === me).online);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a claim token used by a tab that is paused from the start: enrolled on the welcome, the fragment dropped', async () => {
  const tok = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'team' });
  assert.equal(tok.status, 201, tok.text);
  const context = await profile(battery, false);
  try {
    const { tab, errors } = await open(context, `claim=${tok.json.token}`);
    assert.equal(await text(tab, 'enrolment'), 'enrolling with a claim token');
    await tab.locator('#start').click();
    const me = await welcomed(tab);
    assert.equal(await text(tab, 'state'), 'paused');
    await tab.waitForFunction(() => location.hash === '', null, { timeout: 10000 });
    await shows(tab, 'enrolment', 'enrolled with the claim token', 10000);
    assert.deepEqual(await storedKey(tab), { enrolled: true });
    const node = (await nodes()).find((n) => n.id === me);
    assert.equal(node.tier, 'team');
    assert.equal(node.owner, tok.json.owner);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a key enrolled earlier: the Enrolment field says so, and a claim token in the address is dropped unused', async () => {
  const tok = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'team' });
  const other = await call(srv, 'POST', '/api/tokens', { kind: 'claim', tier: 'team' });
  assert.equal(tok.status, 201, tok.text);
  assert.equal(other.status, 201, other.text);
  const context = await profile();
  try {
    // The first visit enrols the key.
    const first = await open(context, `claim=${tok.json.token}`);
    await first.tab.locator('#start').click();
    const me = await welcomed(first.tab);
    await first.tab.waitForFunction(() => location.hash === '', null, { timeout: 10000 });
    await first.tab.locator('#start').click();
    await shows(first.tab, 'start', 'Start');
    await first.tab.close();

    // Again with another token: not sent (the key is enrolled), and the
    // page says so and drops it from the address before Start.
    const { tab, errors } = await open(context, `claim=${other.json.token}`);
    await tab.waitForFunction(() => location.hash === '', null, { timeout: 10000 });
    await shows(tab, 'enrolment', `enrolled earlier (node ${me}); the claim token in the address was not used`,
      10000);
    await tab.locator('#start').click();
    assert.equal(await welcomed(tab), me);
    assert.equal(await text(tab, 'enrolment'),
      `enrolled earlier (node ${me}); the claim token in the address was not used`);
    await tab.locator('#start').click();
    await shows(tab, 'start', 'Start');
    // The other token is still unused: a fresh profile enrols with it.
    const fresh = await profile();
    try {
      const third = await open(fresh, `claim=${other.json.token}`);
      await third.tab.locator('#start').click();
      const them = await welcomed(third.tab);
      assert.notEqual(them, me);
      await shows(third.tab, 'enrolment', 'enrolled with the claim token', 10000);
    } finally {
      await fresh.close();
    }

    // Without a fragment: enrolled earlier, not a public node.
    const plain = await open(context);
    await shows(plain.tab, 'enrolment', `enrolled earlier (node ${me})`, 10000);
    assert.deepEqual([...errors, ...plain.errors], []);
  } finally {
    await context.close();
  }
});

test('the battery checkbox is disabled with a note where the browser has no battery or refuses it', async () => {
  const none = await profile(() => { delete Navigator.prototype.getBattery; });
  const refused = await profile(() => {
    Object.defineProperty(navigator, 'getBattery', { configurable: true,
      value: () => Promise.reject(new DOMException('not allowed here', 'NotAllowedError')) });
  });
  try {
    for (const [context, why] of [[none, /does not tell/], [refused, /would not tell/]]) {
      const { tab, errors } = await open(context);
      await tab.waitForFunction(() => document.getElementById('pause-battery').disabled, null, { timeout: 10000 });
      const note = tab.locator('#battery-note');
      assert.equal(await note.isVisible(), true, 'the note is shown');
      assert.match(await note.textContent(), why);
      assert.deepEqual(errors, []);
    }
  } finally {
    await none.close();
    await refused.close();
  }
});

test('Current job goes back to none once the tab holds no chunk', async () => {
  // Every value the field takes, as the page shows it.
  const context = await profile(() => {
    window.jobsShown = [];
    document.addEventListener('DOMContentLoaded', () => {
      const job = document.getElementById('job');
      new MutationObserver(() => window.jobsShown.push(job.textContent))
        .observe(job, { childList: true, characterData: true, subtree: true });
    });
  });
  try {
    const { tab, errors } = await open(context);
    await tab.locator('#start').click();
    const me = await welcomed(tab);
    const done = await computed(400000, 33);
    assert.deepEqual(done.result.nodes.map((n) => n.node), [me]);
    await shows(tab, 'job', 'none', 10000);
    assert.ok((await tab.evaluate(() => window.jobsShown)).includes(`job ${done.id}`));
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
