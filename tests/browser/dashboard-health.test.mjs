// The dashboard's banner for a degraded coordinator (web/js/health.js), in
// Chromium and in Firefox (browsers.mjs), against a real coordinator, a real
// PostgreSQL and a real node: none while /health says ok; with the database
// away, a banner that says so and that no new work is handed out; with the
// journal's writes refused (a trigger of the test's own, as a full disk
// would answer), a banner with the database's words; gone each time once
// /health says ok again.
// Screenshots go to build/artifacts/dashboard/BROWSER-health-STEP.png.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, top } from '../lib/proc.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';
import { browsers, open } from './browsers.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const shots = path.join(build, 'artifacts/dashboard');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const ALL_TIERS = ['own', 'team', 'community', 'public'];

for (const name of browsers) describe(name, () => banner(name));

function banner(name) {
  let pg, srv, node, nodeExited, page, tmp;

  before(async () => {
    fs.mkdirSync(shots, { recursive: true });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-dash-health-'));
    pg = await startPostgres();
    srv = await serve(pg.url, { extra: ['--allow-public-nodes', '--chunk-ms', '200', '--web', path.join(top, 'web')] });
    node = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'node.key'),
      '--cores', '1'], { stdio: 'ignore' });
    nodeExited = new Promise((resolve) => node.on('exit', resolve));
    page = await open(name, { width: 1280, height: 900 });
  });

  after(async () => {
    await page?.close();
    if (node) {
      node.kill('SIGTERM');
      const timer = setTimeout(() => node.kill('SIGKILL'), 10000);
      await nodeExited;
      clearTimeout(timer);
    }
    await srv?.stop();
    await pg?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const shot = (step) => page.screenshot(path.join(shots, `${name}-health-${step}.png`));
  const bannerShown = () => page.waitFor(() => {
    const b = document.querySelector('#health');
    return !b.hidden && b.getClientRects().length > 0 && b.textContent.length > 0;
  });
  const bannerGone = () => page.waitFor(() => document.querySelector('#health').hidden);

  test('no banner while the coordinator is healthy', async () => {
    await page.goto(`${srv.url}/#/jobs`);
    await page.waitVisible('main h1');
    // the page asked for its health, and shows nothing
    await page.waitFor(() => performance.getEntriesByType('resource').some((e) => /\/health$/.test(e.name)));
    assert.equal(await page.visible('#health'), false);
  });

  test('the database away: a banner says so, and that no new work is handed out; gone once it is back', async () => {
    await pg.pause();
    try {
      await bannerShown();
      const text = await page.text('#health');
      assert.match(text, /The farm is degraded/);
      assert.match(text, /database is unreachable: no new work is handed out until it is back/);
      assert.equal(await page.attr('#health', 'role'), 'alert');
      await shot('database-down');
    } finally {
      await pg.resume();
    }
    await bannerGone();
    assert.equal(await page.visible('#health'), false);
  });

  test('journal writes refused: a banner with the database\'s words; gone once they succeed', async () => {
    await psql(pg, `CREATE TABLE refuse_journal (why text);
      CREATE FUNCTION refuse_journal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF EXISTS (SELECT 1 FROM refuse_journal) THEN RAISE EXCEPTION 'no space left on the test''s disk'; END IF;
        RETURN NEW; END $$;
      CREATE TRIGGER refuse_journal BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION refuse_journal();`);
    const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 1e12, seed: 5,
      tiers: ALL_TIERS, verify: { trust: ALL_TIERS } });
    assert.equal(r.status, 201, r.text);
    const id = r.json.id;
    await eventually(async () => (await call(srv, 'GET', `/api/jobs/${id}`)).json.progress?.chunks_accepted > 0,
      'chunks accepted', 60000);
    await psql(pg, "INSERT INTO refuse_journal VALUES ('on')");
    try {
      await bannerShown();
      const text = await page.text('#health');
      assert.match(text, /The database refuses the journal's writes \(it said: ERROR: no space left on the test's disk/);
      assert.match(text, /no new work is handed out until they succeed/);
      await shot('journal-failing');
    } finally {
      await psql(pg, 'DELETE FROM refuse_journal');
    }
    await bannerGone();
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
    // what the page logged: the 503s of /health while degraded, nothing else
    assert.deepEqual(page.errors.filter((e) => !/503|Service Unavailable/.test(e)), []);
  });
}
