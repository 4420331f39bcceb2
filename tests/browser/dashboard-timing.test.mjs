// The dashboard when answers come late, in Chromium and in Firefox
// (browsers.mjs): a proxy in front of a real coordinator (run with --private,
// and no node, so that a job stays pending) holds one request until the test
// lets it go.
// - A jobs listing asked for before the filter changed, answering after the
//   listing for the new filter, is not shown.
// - An events ticket asked for with a refused token, answering after the
//   right token was saved, opens no second events connection.
// - While a precision target's pilot job runs the submit button is
//   disabled, so a second press starts no second pilot.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { forward, tunnel } from '../lib/forward.mjs';
import { top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call } from '../lib/coord.mjs';
import { browsers, open } from './browsers.mjs';

const DESKTOP = { width: 1280, height: 900 };
const OPTION = { S0: 100, K: 100, r: 0.05, sigma: 0.2, T: 1 };

// A reverse proxy on 127.0.0.1 to the coordinator at port that can hold one
// request: hold(match) arms it, and the first request for which
// match(method, url) is true waits in the proxy (arrived resolves, or
// rejects after 30 s without one) until release() sends it on. WebSocket
// upgrades go through as bytes.
async function holdingProxy(port) {
  let armed = null;
  const tunnels = new Set();
  const server = http.createServer((req, res) => {
    if (armed === null || !armed.match(req.method, req.url)) {
      forward(port, req, res);
      return;
    }
    const h = armed;
    armed = null;
    req.pause(); // its body, if any, waits with it
    h.gate.then(() => { req.resume(); forward(port, req, res); });
    h.arrive();
  });
  server.on('upgrade', (req, client, head) => tunnel(port, req, client, head, tunnels));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    hold(match) {
      const h = { match };
      h.arrived = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no request to hold came within 30 s')), 30000);
        h.arrive = () => { clearTimeout(timer); resolve(); };
      });
      h.gate = new Promise((resolve) => { h.release = resolve; });
      armed = h;
      return h;
    },
    close: () => new Promise((resolve) => {
      for (const s of tunnels) s.destroy();
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

// In the page: every response body the page reads (window.reads: { url,
// status }) and every WebSocket it makes (window.sockets). api.js reads each
// answer with Response.text() and carries on in the same turn, so once a
// read is listed, what the page did with the answer is done.
function watch() {
  if (window.reads) return;
  window.reads = [];
  window.sockets = [];
  const text = Response.prototype.text;
  Response.prototype.text = async function () {
    const t = await text.call(this);
    window.reads.push({ url: this.url, status: this.status });
    return t;
  };
  window.WebSocket = class extends window.WebSocket {
    constructor(...args) {
      super(...args);
      window.sockets.push(this);
    }
  };
}

for (const name of browsers) describe(name, () => timing(name));

function timing(name) {
  let pg, srv, proxy, page;

  before(async () => {
    pg = await startPostgres();
    srv = await serve(pg.url, { extra: ['--private', '--web', path.join(top, 'web')] });
    proxy = await holdingProxy(srv.port);
    page = await open(name, DESKTOP);
  });

  after(async () => {
    await page?.close();
    await proxy?.close();
    await srv?.stop();
    await pg?.stop();
  });

  // Opens the page at hash afresh, with tok as the API token kept.
  async function reopen(hash, tok) {
    await page.goto(`${proxy.url}/${hash}`);
    await page.evaluate((t) => localStorage.setItem('simfarm.token', t), tok);
    await page.reload();
  }

  // Waits until the events connection is live (or an event would be missed).
  const live = () => page.waitFor(() => document.querySelector('#live').textContent === 'live');

  test('a jobs listing for the old filter that answers last is not shown', async () => {
    const first = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: OPTION, items: 1000, name: 'first' });
    assert.equal(first.status, 201, first.text);
    await reopen('#/jobs', srv.token);
    await page.waitVisible(`tbody tr[data-job="${first.json.id}"]`);
    await live();
    await page.evaluate(watch);
    // a job submitted makes the list ask again (within a second): that
    // listing, for any state, waits in the proxy
    const listing = proxy.hold((m, u) => m === 'GET' && u === '/api/jobs?limit=200');
    const second = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: OPTION, items: 1000, name: 'second' });
    assert.equal(second.status, 201, second.text);
    await listing.arrived;
    await page.select('#f-state', 'failed');
    await page.waitFor(() => document.querySelector('main').textContent.includes('No jobs match'));
    await page.evaluate(() => { window.reads.length = 0; });
    listing.release();
    await page.waitFor(() => window.reads.some((r) => r.url.endsWith('/api/jobs?limit=200')));
    assert.equal(await page.value('#f-state'), 'failed');
    assert.equal(await page.count('tbody tr[data-job]'), 0, 'the failed jobs only: none');
    assert.ok((await page.text('main')).includes('No jobs match'));
  });

  test('an events ticket answered after a new token was saved opens no second connection', async () => {
    const ticket = proxy.hold((m, u) => m === 'POST' && u === '/api/events/ticket');
    await reopen('#/jobs', 'sf_refused');
    await ticket.arrived; // the connection waits for its ticket, asked for with the refused token
    await page.waitFor(() => document.querySelector('#token-box').open
      && document.querySelector('#live').textContent === 'needs an API token');
    await page.evaluate(watch);
    await page.fill('#token-input', srv.token);
    await page.click('#token-form button[type="submit"]');
    await live();
    ticket.release();
    // the refused ticket's answer, read by the page
    await page.waitFor(() => window.reads.some((r) => r.url.endsWith('/api/events/ticket') && r.status === 401));
    // what the page did with it is done: no socket made but the one open
    assert.deepEqual(await page.evaluate(() => window.sockets.map((s) => s.readyState)), [1], 'one events connection');
    assert.equal(await page.text('#live'), 'live');
  });

  test('while the pilot job runs the submit button is disabled, and a second press starts no second pilot', async () => {
    await reopen('#/submit', srv.token);
    await page.waitVisible('#p-S0');
    await live(); // the pilot's end comes as an event
    for (const [id, v] of Object.entries({ 'p-S0': 100, 'p-K': 100, 'p-sigma': 0.2, 'p-T': 1, 'j-target': 0.02, 'j-name': 'held' }))
      await page.fill(`#${id}`, String(v));
    await page.click('#submit');
    // no node: the pilot stays pending
    await page.waitFor(() => /Measuring the spread with pilot job \d+/.test(document.querySelector('main').textContent));
    assert.equal(await page.evaluate(() => document.querySelector('#submit').disabled), true, 'disabled while the pilot runs');
    await page.focus('#j-name');
    await page.press('Enter'); // a form submits on Enter unless its submit button is disabled
    const pilots = async () => (await call(srv, 'GET', '/api/jobs?limit=1000')).json.filter((j) => j.name === 'pilot of held');
    const [pilot] = await pilots();
    assert.ok(pilot, 'the pilot was submitted');
    const c = await call(srv, 'POST', `/api/jobs/${pilot.id}/cancel`);
    assert.equal(c.status, 200, c.text);
    // the pilot ended without a spread: said under the target, and the button is back
    await page.waitVisible('#j-target-error');
    assert.equal(await page.text('#j-target-error'), `the pilot job ${pilot.id} ended cancelled without a spread to go by`);
    await page.waitFor(() => !document.querySelector('#submit').disabled);
    assert.deepEqual((await pilots()).map((j) => j.id), [pilot.id], 'one pilot');
  });
}
