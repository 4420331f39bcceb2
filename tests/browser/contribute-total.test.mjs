// The contribute page's "This browser in all" (docs/browser-node.md): the
// node's totals from the coordinator, asked again soon after each chunk
// (not every 10 s), and never replaced by "nothing yet" or a smaller total
// once known: right after a session ends the coordinator answers the
// node's totals without that session's work until its row is written.
// On contributeFarm() (farm.mjs), in Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, top } from '../lib/proc.mjs';
import { call } from '../lib/coord.mjs';
import { contributeFarm } from './farm.mjs';

const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tiers = ['own', 'team', 'community', 'public'];

let farm;
before(async () => { farm = await contributeFarm(); });
after(() => farm?.close());

test('the total follows each job within seconds, and after Stop it stays', async () => {
  const { srv, browser } = farm;
  const context = await browser.newContext();
  try {
    const tab = await context.newPage();
    const errors = [];
    tab.on('pageerror', (e) => errors.push(e.message));
    // every answer the page gets for its node's totals, as sent
    const answers = [];
    tab.on('response', async (r) => {
      if (!/\/api\/nodes\/\d+$/.test(new URL(r.url()).pathname)) return;
      try { answers.push({ at: Date.now(), body: await r.json() }); } catch { /* the page went away */ }
    });
    assert.equal((await tab.goto(`${srv.url}/contribute`)).status(), 200);
    await tab.locator('#cores').fill('1');
    await tab.locator('#start').click();
    await tab.waitForFunction(() => /^node \d+$/.test(document.getElementById('detail').textContent), null, { timeout: 30000 });
    assert.equal(await tab.locator('#total').textContent(), 'nothing yet');

    let items = 0;
    for (const [n, seed] of [[300000, 1], [200000, 2]]) {
      const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: n, seed, tiers,
        verify: { trust: tiers } });
      assert.equal(created.status, 201, created.text);
      await eventually(async () => (await call(srv, 'GET', `/api/jobs/${created.json.id}`)).json.state === 'complete',
        `job ${created.json.id} complete`, 120000);
      items += n;
      // shown within 3 s of the job's end: not at the next 10 s tick
      await tab.waitForFunction((want) => document.getElementById('total').textContent.startsWith(`${want} items in `),
        items.toLocaleString('en'), { timeout: 3000 });
    }
    const shown = await tab.locator('#total').textContent();

    const stopAt = Date.now();
    await tab.locator('#start').click();
    await tab.waitForFunction(() => document.getElementById('state').textContent === 'stopped', null, { timeout: 30000 });
    // the page asks again as the session ends and once more after; each
    // answer, even one without the session's work, leaves the total as it was
    await eventually(() => answers.filter((a) => a.at >= stopAt).length >= 2, 'two answers after Stop', 15000);
    const after = answers.filter((a) => a.at >= stopAt).map((a) => a.body.items_total);
    assert.equal(await tab.locator('#total').textContent(), shown, `answers after Stop: ${after.join(', ')}`);
    // and what the coordinator says once the session's row is written is that same total
    await eventually(async () => (await call(srv, 'GET', `/api/nodes/${answers.at(-1).body.id}`)).json.items_total === items,
      'the total written', 15000);
    assert.equal(await tab.locator('#total').textContent(), shown);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
