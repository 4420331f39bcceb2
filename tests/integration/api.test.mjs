// The coordinator's HTTP API as docs/api.md describes it, against the real
// binary and a real PostgreSQL: API tokens and who may do what, job
// filters and cancellation, live events on /ws/events with a real node,
// and the rate limit on failed logins.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { createDatabase, startPostgres } from '../lib/pg.mjs';
import { serve, call, metrics, tailEvents } from '../lib/coord.mjs';
import { faultProxy } from '../lib/faultproxy.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-api-'));
const job = (items, extra = {}) => ({ kernel: 'option', params: option, items, seed: 3, ...extra });

// Sends request as it is on a socket of its own; resolves to what comes
// back before the server closes it (within 10 s).
function rawRequest(request) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(srv.port, '127.0.0.1', () => sock.write(request));
    let got = '';
    sock.setTimeout(10000, () => { sock.destroy(); reject(new Error(`no answer in 10 s: ${JSON.stringify(got)}`)); });
    sock.on('data', (d) => { got += d; });
    sock.on('end', () => resolve(got));
    sock.on('error', reject);
  });
}

// Sends the requests on one socket of its own, each once the answer to the
// one before has come whole (split by its Content-Length; head: the first
// has no body); resolves to the answers, or those that came before the
// server closed it (within 10 s).
function rawAnswers(requests, { head = false } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(srv.port, '127.0.0.1', () => sock.write(requests[0]));
    let got = Buffer.alloc(0);
    const out = [];
    const done = () => { sock.destroy(); resolve(out); };
    sock.setTimeout(10000, () => { sock.destroy(); reject(new Error(`no answer in 10 s: ${JSON.stringify(String(got))}`)); });
    sock.on('data', (d) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const headers = got.subarray(0, end).toString();
      const len = head && out.length === 0 ? 0 : Number(headers.match(/^content-length: (\d+)\r?$/mi)?.[1] ?? 0);
      if (got.length < end + 4 + len) return;
      out.push({ status: Number(headers.match(/^HTTP\/1\.[01] (\d+)/)?.[1]), headers,
        body: got.subarray(end + 4, end + 4 + len).toString(), extra: got.length - end - 4 - len });
      got = got.subarray(end + 4 + len);
      if (out.length === requests.length) done();
      else sock.write(requests[out.length]);
    });
    sock.on('end', done);
    sock.on('error', reject);
  });
}

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--allow-public-nodes'] });
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('mutations need a valid API token; reads do not', async () => {
  const none = await call(srv, 'POST', '/api/jobs', job(1000), null);
  assert.equal(none.status, 401);
  assert.match(none.json.error, /needs an API token/);
  const bad = await call(srv, 'POST', '/api/jobs', job(1000), 'not-a-token');
  assert.equal(bad.status, 401);
  assert.match(bad.json.error, /unknown API token/);
  const unknown = await call(srv, 'POST', '/api/jobs', job(1000), 'sf_' + 'A'.repeat(43));
  assert.equal(unknown.status, 401);
  assert.match(unknown.json.error, /unknown, revoked or expired/);
  const res = await fetch(srv.url + '/api/jobs', { method: 'POST', body: '{}' });
  assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="simfarm"');
  assert.equal((await call(srv, 'GET', '/api/jobs', undefined, null)).status, 200);
  const bodyErr = await call(srv, 'POST', '/api/jobs', '{"kernel": ');
  assert.equal(bodyErr.status, 400);
  assert.match(bodyErr.json.error, /not valid JSON/);
});

test('bodies that are not JSON as the RFC writes it get 400, at once, whatever their nesting', async () => {
  // 32 levels of two members each: a reader that reads a container twice
  // (to count it) takes 2^32 steps, with every other request waiting.
  const deep = '['.repeat(32) + '0' + ',0]'.repeat(32);
  const r = await call(srv, 'POST', '/api/jobs', `{"kernel": "option", "items": 1000, "params": ${deep}}`);
  assert.equal(r.status, 400, r.text);
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
  const post = async (body) => {
    const res = await fetch(srv.url + '/api/jobs', { method: 'POST', body,
      headers: { authorization: `Bearer ${srv.token}`, 'content-type': 'application/json' } });
    return { status: res.status, json: await res.json() };
  };
  for (const [body, why] of [
    ['{"kernel": "option", "items": 1000, "seed": +5, "params": {}}', /bad number/],
    ['{"kernel": "option", "items": 01000, "params": {}}', /bad number/],
    ['{"kernel": "option", "items": 1000, "name": "a\\u0000b", "params": {}}', /\\u0000/],
    [Buffer.from('{"kernel": "option", "items": 1000, "name": "\xff", "params": {}}', 'latin1'), /invalid UTF-8/],
    // 2^63 as a float: (double)INT64_MAX rounds up to it, and it was
    // stored as -2^63
    ['{"kernel": "option", "items": 1000, "seed": 9.223372036854775808e18, "params": {}}', /0 to 2\^63-1/],
    // which of the two counts differs between readers
    ['{"kernel": "option", "items": 1000, "params": {"sigma": 0.2, "K": 100, "sigma": 0.3}}', /key "sigma" given a second time/],
  ]) {
    const bad = await post(body);
    assert.equal(bad.status, 400, `${body}: ${bad.status} ${JSON.stringify(bad.json)}`);
    assert.match(bad.json.error, why, String(body));
  }
});

test('a body the coordinator does not read is refused at once, and the connection closed', async () => {
  const head = (extra) => `POST /api/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${srv.token}\r\n${extra}\r\n`;
  const status = (raw) => raw.match(/^HTTP\/1\.1 (\d+)/)?.[1];
  // chunked: not decoded here, so not taken as a body
  const chunked = await rawRequest(`${head('Transfer-Encoding: chunked\r\n')}5\r\nhello\r\n0\r\n\r\n`);
  assert.equal(status(chunked), '411', chunked);
  assert.match(chunked, /Content-Length/);
  assert.match(chunked, /^connection: close\r$/mi);
  // past the limit, or not a length: no wait for bytes that will not be read
  for (const [cl, code, why] of [['1000000000000', '413', /request body over 1048576 bytes/],
    ['-1', '400', /Content-Length/], ['12abc', '400', /Content-Length/]]) {
    const raw = await rawRequest(head(`Content-Length: ${cl}\r\n`));
    assert.equal(status(raw), code, `${cl}: ${raw}`);
    assert.match(raw, why, cl);
    assert.match(raw, /^connection: close\r$/mi, cl);
  }
  // no length at all: answered, and closed, since what follows cannot be
  // told from a body
  const none = await rawRequest(`${head('')}GET /health HTTP/1.1\r\nHost: x\r\n\r\n`);
  assert.equal(status(none), '400', none);
  assert.match(none, /^connection: close\r$/mi);
  assert.equal(none.match(/HTTP\/1\.1 /g).length, 1, none);
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
});

test('HEAD is a GET without the body; an upgrade to HTTP/2 (h2c) is refused in HTTP/1.1', async () => {
  for (const p of ['/', '/health', '/api/kernels']) {
    const out = await rawAnswers([`HEAD ${p} HTTP/1.1\r\nHost: x\r\n\r\n`, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'],
      { head: true });
    assert.equal(out.length, 2, `${p}: ${JSON.stringify(out)}`);
    assert.equal(out[0].status, 200, `HEAD ${p}: ${out[0].headers}`);
    assert.match(out[0].headers, /^content-length: [1-9]\d*\r?$/mi, `HEAD ${p} says the length of the GET's body`);
    assert.equal(out[0].extra, 0, `HEAD ${p}: no body`);
    assert.equal(out[1].status, 200, `the GET after HEAD ${p}: ${out[1].headers}`);
    assert.equal(JSON.parse(out[1].body).status, 'ok');
  }
  const h2c = 'GET /api/kernels HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n'
    + 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n';
  const out = await rawAnswers([h2c]);
  assert.equal(out.length, 1);
  assert.equal(out[0].status, 400, out[0].headers);
  assert.match(out[0].body, /HTTP\/1\.1/);
});

test('tokens: an owner acts for itself only; a revoked token is refused', async () => {
  const made = await call(srv, 'POST', '/api/tokens', { kind: 'api', owner: 'alice', note: 'laptop' });
  assert.equal(made.status, 201, made.text);
  assert.match(made.json.token, /^sf_[A-Za-z0-9_-]{43}$/);
  assert.equal(made.json.owner, 'alice');
  const alice = made.json.token;

  const mine = await call(srv, 'POST', '/api/jobs', job(1000), alice);
  assert.equal(mine.status, 201);
  const j = await call(srv, 'GET', `/api/jobs/${mine.json.id}`);
  assert.equal(j.json.owner, 'alice');
  const forged = await call(srv, 'POST', '/api/jobs', job(1000, { owner: 'bob' }), alice);
  assert.equal(forged.status, 400);
  assert.equal(forged.json.field, 'owner');

  const forBob = await call(srv, 'POST', '/api/tokens', { kind: 'api', owner: 'bob' }, alice);
  assert.equal(forBob.status, 403);
  const badKind = await call(srv, 'POST', '/api/tokens', { kind: 'root' });
  assert.deepEqual([badKind.status, badKind.json.field], [400, 'kind']);
  const extra = await call(srv, 'POST', '/api/tokens', { kind: 'api', colour: 'red' });
  assert.deepEqual([extra.status, extra.json.field], [400, 'colour']);

  const adminJob = await call(srv, 'POST', '/api/jobs', job(1000));
  const notHers = await call(srv, 'POST', `/api/jobs/${adminJob.json.id}/cancel`, undefined, alice);
  assert.equal(notHers.status, 403);

  const listed = await call(srv, 'GET', '/api/tokens', undefined, alice);
  assert.equal(listed.status, 200);
  assert.deepEqual([...new Set(listed.json.map((t) => t.owner))], ['alice']);
  assert.equal(listed.json.some((t) => 'token' in t || 'secret_hash' in t), false);

  const revoked = await call(srv, 'DELETE', `/api/tokens/${made.json.id}`);
  assert.equal(revoked.status, 200);
  assert.ok(revoked.json.revoked_at);
  const after = await call(srv, 'POST', '/api/jobs', job(1000), alice);
  assert.equal(after.status, 401);
  assert.equal((await call(srv, 'DELETE', '/api/tokens/999999')).status, 404);
});

test('Idempotency-Key: a submission sent again is stored once; the key taken for another is refused', async () => {
  const keyed = async (body, key, token = srv.token) => {
    const res = await fetch(srv.url + '/api/jobs', { method: 'POST', body: JSON.stringify(body),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key } });
    return { status: res.status, json: await res.json() };
  };
  const name = `keyed-${process.pid}`;
  const stored = async () => (await call(srv, 'GET', '/api/jobs?limit=1000')).json.filter((j) => j.name === name);
  const first = await keyed(job(1000, { name }), 'nightly-2026-11-22');
  assert.equal(first.status, 201, JSON.stringify(first.json));
  const again = await keyed(job(1000, { name }), 'nightly-2026-11-22');
  assert.deepEqual([again.status, again.json], [200, { id: first.json.id, replayed: true }]);
  assert.deepEqual((await stored()).map((j) => j.id), [first.json.id]);
  const other = await keyed(job(2000, { name }), 'nightly-2026-11-22');
  assert.deepEqual([other.status, other.json.field], [422, 'Idempotency-Key']);
  assert.match(other.json.error, new RegExp(`another submission \\(job ${first.json.id}\\)`));
  assert.equal((await stored()).length, 1);
  for (const bad of ['k'.repeat(129), 'two words', '']) {
    const r = await keyed(job(1000, { name }), bad);
    assert.deepEqual([r.status, r.json.field], [400, 'Idempotency-Key'], bad);
  }
  // Keys are per owner: another owner's same key is another job.
  const carol = (await call(srv, 'POST', '/api/tokens', { kind: 'api', owner: 'carol' })).json.token;
  const hers = await keyed(job(1000, { name }), 'nightly-2026-11-22', carol);
  assert.equal(hers.status, 201);
  assert.notEqual(hers.json.id, first.json.id);
  // The header's name in any case (HTTP names are case-insensitive).
  const body = JSON.stringify(job(1000, { name }));
  const raw = await rawRequest(`POST /api/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${srv.token}\r\n` +
    `IDEMPOTENCY-KEY: nightly-2026-11-22\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  assert.match(raw, /^HTTP\/1\.1 200/);
  assert.match(raw, new RegExp(`"id":${first.json.id},"replayed":true`));
  assert.equal((await stored()).length, 2);
});

test('a submission is stored once when the store sends it again after the connection broke', async () => {
  // The coordinator reaches its own PostgreSQL through a proxy that cuts
  // the connection as the database answers the INSERT: committed, but the
  // store never hears it, reconnects and sends the query again.
  const db = await startPostgres();
  const proxy = await faultProxy(path.join(db.dir, '.s.PGSQL.5432'));
  const s2 = await serve(`host=127.0.0.1 port=${proxy.port} user=postgres dbname=postgres`);
  try {
    proxy.cutAnswer('stored_now');
    const r = await call(s2, 'POST', '/api/jobs', job(1000, { name: 'once' }));
    assert.equal(r.status, 201, r.text);
    assert.equal(proxy.stats.cut, 1, 'the answer to the INSERT was cut off');
    const all = (await call(s2, 'GET', '/api/jobs')).json;
    assert.deepEqual(all.map((j) => [j.id, j.name]), [[r.json.id, 'once']]);
  } finally {
    await s2.stop();
    await proxy.close();
    await db.stop();
  }
});

test('jobs: filters, cancel, and the answers for jobs that cannot be cancelled', async () => {
  const a = await call(srv, 'POST', '/api/jobs', job(5000, { name: 'to cancel' }));
  assert.equal(a.status, 201);
  const c = await call(srv, 'POST', `/api/jobs/${a.json.id}/cancel`);
  assert.equal(c.status, 200, c.text + " " + JSON.stringify(a.json));
  assert.deepEqual(c.json, { id: a.json.id, state: 'cancelled' });
  const again = await call(srv, 'POST', `/api/jobs/${a.json.id}/cancel`);
  assert.equal(again.status, 409);
  assert.equal((await call(srv, 'POST', '/api/jobs/424242/cancel')).status, 404);
  assert.equal((await call(srv, 'GET', `/api/jobs/${a.json.id}/cancel`)).status, 405);

  const cancelled = await call(srv, 'GET', '/api/jobs?state=cancelled&limit=5');
  assert.equal(cancelled.status, 200);
  assert.ok(cancelled.json.length >= 1 && cancelled.json.every((j) => j.state === 'cancelled'));
  assert.equal(cancelled.json[0].name, 'to cancel');
  const byOwner = await call(srv, 'GET', '/api/jobs?owner=nobody');
  assert.deepEqual(byOwner.json, []);
  const page = await call(srv, 'GET', `/api/jobs?before=${a.json.id}&limit=1`);
  assert.ok(page.json.length === 1 && page.json[0].id < a.json.id);
  const badState = await call(srv, 'GET', '/api/jobs?state=done');
  assert.deepEqual([badState.status, badState.json.field], [400, 'state']);
  const badLimit = await call(srv, 'GET', '/api/jobs?limit=0');
  assert.deepEqual([badLimit.status, badLimit.json.field], [400, 'limit']);
  // A long filter is applied, not dropped; one that does not fit at all
  // is refused.
  const long = await call(srv, 'GET', `/api/jobs?owner=${'x'.repeat(300)}&state=cancelled`);
  assert.deepEqual([long.status, long.json], [200, []]);
  const longer = await call(srv, 'GET', `/api/jobs?state=cancelled&owner=${'x'.repeat(600)}`);
  assert.equal(longer.status, 414, longer.text);
  assert.match(longer.json.error, /query string is longer/);

  // `curl -X POST` sends neither a body nor Content-Length: the request
  // has no body (RFC 9112) and is answered at once.
  const b = await call(srv, 'POST', '/api/jobs', job(5000));
  const raw = await rawRequest(`POST /api/jobs/${b.json.id}/cancel HTTP/1.1\r\n` +
    `Host: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${srv.token}\r\nConnection: close\r\n\r\n`);
  assert.match(raw, /^HTTP\/1\.1 200 /, raw);
  assert.match(raw, /"state":"cancelled"/);
});

test('a query value with an encoded & is one value, not the start of another argument', async () => {
  const who = `amp-${process.pid}`;
  const plain = await call(srv, 'POST', '/api/jobs', job(1000, { owner: who }));
  const amp = await call(srv, 'POST', '/api/jobs', job(1000, { owner: `${who}&b` }));
  assert.deepEqual([plain.status, amp.status], [201, 201], plain.text + amp.text);
  const owned = async (q) => {
    const r = await call(srv, 'GET', `/api/jobs?owner=${encodeURIComponent(q)}`);
    assert.equal(r.status, 200, `${q}: ${r.text}`);
    return r.json.map((j) => j.id);
  };
  assert.deepEqual(await owned(`${who}&b`), [amp.json.id]);
  assert.deepEqual(await owned(who), [plain.json.id]);
  // what follows the & inside a value is no argument of its own
  assert.deepEqual(await owned(`${who}&state=done`), []);
  const both = await call(srv, 'GET', `/api/jobs?kernel=option&owner=${encodeURIComponent(`${who}&b`)}&limit=5`);
  assert.deepEqual([both.status, both.json.map((j) => j.id)], [200, [amp.json.id]], both.text);
  // an empty argument (a doubled or leading &) is passed over, not the end of the list
  for (const q of [`?limit=5&&owner=nobody-${process.pid}`, `?&owner=nobody-${process.pid}`, `?owner=nobody-${process.pid}&`]) {
    const r = await call(srv, 'GET', `/api/jobs${q}`);
    assert.deepEqual([r.status, r.json], [200, []], `${q}: ${r.text}`);
  }
  const gapped = await call(srv, 'GET', '/api/nodes?limit=1&&tier=bogus');
  assert.equal(gapped.status, 400, gapped.text);
  const nodes = await call(srv, 'GET', `/api/nodes?owner=${encodeURIComponent('x&tier=bogus')}`);
  assert.deepEqual([nodes.status, nodes.json], [200, []], nodes.text);
  for (const r of [plain, amp]) assert.equal((await call(srv, 'POST', `/api/jobs/${r.json.id}/cancel`)).status, 200);
});

test('/api/tokens without a token: the refusal says it needs one, on a coordinator that is not private', async () => {
  for (const [method, p] of [['GET', '/api/tokens'], ['POST', '/api/tokens'], ['DELETE', '/api/tokens/1']]) {
    const r = await call(srv, method, p, method === 'POST' ? { kind: 'api' } : undefined, null);
    assert.equal(r.status, 401, `${method} ${p}`);
    assert.match(r.json.error, /needs an API token: Authorization: Bearer sf_/, `${method} ${p}`);
    assert.doesNotMatch(r.json.error, /private/, `${method} ${p}`);
  }
  const list = await call(srv, 'GET', '/api/tokens', undefined, null);
  assert.match(list.json.error, /^\/api\/tokens needs an API token/);
});

test('the token file is written mode 0600 whatever a stale PATH.tmp was', async () => {
  const dir = fs.mkdtempSync(path.join(tmp, 'tokenfile-'));
  // a stale PATH.tmp others may read: its mode must not carry over
  const loose = path.join(dir, 'token');
  fs.writeFileSync(`${loose}.tmp`, 'stale\n');
  fs.chmodSync(`${loose}.tmp`, 0o644);
  // a PATH.tmp that is a link to another file: that file is left alone
  const linked = path.join(dir, 'linked');
  const victim = path.join(dir, 'victim');
  fs.writeFileSync(victim, 'keep\n');
  fs.chmodSync(victim, 0o644);
  fs.symlinkSync(victim, `${linked}.tmp`);
  for (const [file, db] of [[loose, 'tokenfile'], [linked, 'tokenlink']]) {
    const s = await serve(await createDatabase(pg, db), { tokenFile: file });
    try {
      const st = fs.lstatSync(file);
      assert.ok(st.isFile(), `${file} is a file of its own`);
      assert.equal((st.mode & 0o777).toString(8), '600', file);
      assert.match(fs.readFileSync(file, 'utf8'), /^sf_[A-Za-z0-9_-]{43}\n$/);
      assert.equal(fs.existsSync(`${file}.tmp`), false);
      assert.equal((await call(s, 'POST', '/api/jobs', job(1000))).status, 201, 'the token in it works');
    } finally {
      await s.stop();
    }
  }
  assert.equal(fs.readFileSync(victim, 'utf8'), 'keep\n');
  assert.equal((fs.statSync(victim).mode & 0o777).toString(8), '644');
});

test('live events: a job and a node, in order, and a client that reconnects catches up', async () => {
  const ev = tailEvents(srv);
  const snap = await ev.until((e) => e.type === 'snapshot', 'snapshot');
  assert.ok(Array.isArray(snap.jobs) && Array.isArray(snap.nodes));

  // the node joins as a public node, which runs only jobs that list public;
  // a public node's results are spot-checked by another node unless the job
  // trusts its tier, and this lone node has none to check it: trusted here
  const tiers = ['own', 'team', 'community', 'public'];
  const sub = await call(srv, 'POST', '/api/jobs', job(2000000, { seed: 11, tiers, verify: { trust: tiers } }));
  assert.equal(sub.status, 201);
  const id = sub.json.id;
  const node = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key',
    path.join(tmp, 'events.key'), '--cores', '2'], { stdio: 'ignore' });
  try {
    const online = await ev.until((e) => e.type === 'node.online', 'node.online');
    assert.ok(online.node > 0 && online.cores > 0);
    const done = await ev.until((e) => e.type === 'job.finished' && e.job === id, 'job.finished');
    assert.equal(done.state, 'complete');
    assert.equal(done.result.items_done, 2000000);
    // the chunk counts stay in the result
    assert.ok(done.result.chunks_accepted > 0, JSON.stringify(done.result));
    assert.equal(done.result.chunks_accepted, done.result.nodes.reduce((a, n) => a + n.chunks, 0));
    assert.equal(done.result.chunks_failed, 0);

    const mine = ev.events.filter((e) => e.job === id).map((e) => e.type);
    assert.equal(mine[0], 'job.submitted');
    assert.equal(mine[1], 'job.started');
    assert.ok(mine.includes('job.progress'), mine.join(' '));
    assert.equal(mine.at(-1), 'job.finished');
    const last = ev.events.filter((e) => e.job === id && e.type === 'job.progress').at(-1);
    assert.equal(last.items_done, 2000000, 'the last progress counts every item');
    assert.equal(last.outputs[0].mean, done.result.outputs[0].mean);
    // Sequence numbers grow by one, with nothing missing or repeated.
    const seqs = ev.events.filter((e) => e.type !== 'snapshot').map((e) => e.seq);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1);
    assert.equal(seqs[0], snap.seq + 1);

    // A client that saw up to the job's submission gets exactly the rest.
    const from = ev.events.find((e) => e.job === id && e.type === 'job.submitted').seq;
    const again = tailEvents(srv, `?since=${from}&job=${id}`);
    await again.until((e) => e.type === 'job.finished', 'replayed job.finished');
    const want = ev.events.filter((e) => e.job === id && e.seq > from).map((e) => e.seq);
    assert.deepEqual(again.events.map((e) => e.seq).slice(0, want.length), want);
    await again.close();
    // Far behind the kept events: a snapshot instead.
    const behind = tailEvents(srv, '?since=0');
    const s2 = await behind.until(() => true, 'first event');
    assert.equal(s2.type, 'snapshot');
    await behind.close();

    const nodes = await call(srv, 'GET', '/api/nodes');
    const me = nodes.json.find((n) => n.id === online.node);
    assert.equal(me.online, true);
    assert.ok(me.chunks_done > 0 && me.items_done > 0, JSON.stringify(me));
  } finally {
    node.kill('SIGTERM');
    await new Promise((resolve) => node.on('exit', resolve));
  }
  const off = await ev.until((e) => e.type === 'node.offline', 'node.offline');
  assert.match(off.reason, /left|disconnected/);
  await ev.close();
});

test('an events client that stops reading is dropped once the log has moved on past it; one that reads keeps every event', async () => {
  const other = await serve(await createDatabase(pg, 'evslow'));
  const clients = async () => (await metrics(other)).simfarm_event_clients;
  const reader = tailEvents(other);
  const snap = await reader.until((e) => e.type === 'snapshot', 'snapshot');
  // A WebSocket client that reads the upgrade's answer and then nothing more.
  const mute = net.connect(other.port, '127.0.0.1');
  try {
    await new Promise((resolve, reject) => {
      mute.on('error', reject);
      mute.write('GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
        + 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n'
        + 'Sec-WebSocket-Protocol: simfarm.events.v1\r\n\r\n');
      mute.once('data', (d) => { mute.pause(); (/^HTTP\/1\.1 101/.test(String(d)) ? resolve : reject)(new Error(String(d))); });
    });
    assert.equal(await clients(), 2);
    // Events, two a job (submitted, finished), until the silent client is
    // dropped: the log keeps 4096 and the sockets' buffers some more.
    let jobs = 0;
    await eventually(async () => {
      await Promise.all(Array.from({ length: 50 }, async () => {
        const r = await call(other, 'POST', '/api/jobs', job(1000));
        assert.equal(r.status, 201, r.text);
        assert.equal((await call(other, 'POST', `/api/jobs/${r.json.id}/cancel`)).status, 200);
      }));
      jobs += 50;
      assert.ok(jobs <= 20000, 'the client that does not read is still connected after 40,000 events');
      return (await clients()) === 1;
    }, 'the client that does not read dropped', 300000, 0);
    // The one that reads has every event, in order, and is still there.
    await eventually(() => reader.events.filter((e) => e.type === 'job.finished').length === jobs, 'every job.finished',
      60000);
    const seqs = reader.events.filter((e) => e.type !== 'snapshot').map((e) => e.seq);
    seqs.forEach((q, i) => assert.equal(q, snap.seq + 1 + i, 'no event missing or repeated'));
    assert.ok(seqs.length >= 2 * jobs, `${seqs.length} events for ${jobs} jobs`);
    assert.equal(await clients(), 1);
  } finally {
    mute.destroy();
    await reader.close();
    await other.stop();
  }
});

test('one address holds at most 16 /ws/events connections', async () => {
  const other = await serve(await createDatabase(pg, 'evmany'));
  // Resolves to the upgrade's status line; the socket stays open.
  const upgrade = () => new Promise((resolve, reject) => {
    const sock = net.connect(other.port, '127.0.0.1', () => sock.write('GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1\r\n'
      + 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'
      + 'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: simfarm.events.v1\r\n\r\n'));
    let got = '';
    sock.on('data', (d) => { got += d; if (got.includes('\r\n')) resolve({ sock, line: got.split('\r\n')[0] }); });
    sock.on('end', () => resolve({ sock, line: got.split('\r\n')[0] }));
    sock.on('error', reject);
  });
  const open = [];
  try {
    for (let i = 0; i < 16; i++) open.push(await upgrade());
    assert.ok(open.every((c) => /^HTTP\/1\.1 101/.test(c.line)), open.map((c) => c.line).join(', '));
    assert.equal((await metrics(other)).simfarm_event_clients, 16);
    const refused = await upgrade();
    refused.sock.destroy();
    assert.doesNotMatch(refused.line, /^HTTP\/1\.1 101/, 'the 17th is refused');
    assert.equal((await metrics(other)).simfarm_event_clients, 16);
    // one leaves: another may come
    open.shift().sock.destroy();
    await eventually(async () => (await metrics(other)).simfarm_event_clients === 15, 'the one that left is gone', 10000);
    const again = await upgrade();
    open.push(again);
    assert.match(again.line, /^HTTP\/1\.1 101/);
  } finally {
    for (const c of open) c.sock.destroy();
    await other.stop();
  }
});

test('events of a cancelled job: submitted, started, and one job.finished', async () => {
  const ev = tailEvents(srv);
  await ev.until((e) => e.type === 'snapshot', 'snapshot');
  const a = await call(srv, 'POST', '/api/jobs', job(1e9, { seed: 21 }));
  await ev.until((e) => e.type === 'job.started' && e.job === a.json.id, 'job.started');
  assert.equal((await call(srv, 'POST', `/api/jobs/${a.json.id}/cancel`)).status, 200);
  // A second job after it: every job event comes from one place in order,
  // so by its job.finished any second job.finished of the first is here.
  const b = await call(srv, 'POST', '/api/jobs', job(1e9, { seed: 22 }));
  await ev.until((e) => e.type === 'job.started' && e.job === b.json.id, 'second job.started');
  assert.equal((await call(srv, 'POST', `/api/jobs/${b.json.id}/cancel`)).status, 200);
  await ev.until((e) => e.type === 'job.finished' && e.job === b.json.id, 'second job.finished');
  for (const id of [a.json.id, b.json.id]) {
    const mine = ev.events.filter((e) => e.job === id);
    assert.deepEqual(mine.map((e) => e.type).filter((t) => t !== 'job.progress'),
      ['job.submitted', 'job.started', 'job.finished']);
    assert.equal(mine.at(-1).state, 'cancelled');
    assert.equal(mine[0].items, 1e9);
  }
  await ev.close();
});

test('a node silent for three heartbeat intervals goes offline', async () => {
  const other = await serve(await createDatabase(pg, 'silent'), { extra: ['--allow-public-nodes', '--heartbeat-ms', '300'] });
  const ev = tailEvents(other);
  await ev.until((e) => e.type === 'snapshot', 'snapshot');
  const node = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${other.port}/ws/node`, '--key',
    path.join(tmp, 'silent.key'), '--cores', '1'], { stdio: 'ignore' });
  try {
    const online = await ev.until((e) => e.type === 'node.online', 'node.online');
    node.kill('SIGSTOP'); // the connection stays open, the node says nothing
    const off = await ev.until((e) => e.type === 'node.offline' && e.node === online.node, 'node.offline');
    assert.equal(off.reason, 'missed heartbeats');
    const nodes = await call(other, 'GET', '/api/nodes');
    assert.equal(nodes.json.find((n) => n.id === online.node).online, false);
  } finally {
    node.kill('SIGKILL');
    node.kill('SIGCONT');
    await ev.close();
    await other.stop();
  }
});

test('a node that speaks another protocol version is told to upgrade', async () => {
  // {v: 2, type: "hello", id: 1, ts: 0, body: {}} in msgpack, sent after the challenge.
  const frame = [0x85, 0xa1, 0x76, 0x02, 0xa4, ...Buffer.from('type'), 0xa5, ...Buffer.from('hello'),
    0xa2, ...Buffer.from('id'), 0x01, 0xa2, ...Buffer.from('ts'), 0x00, 0xa4, ...Buffer.from('body'), 0x80];
  const code = `const ws = new WebSocket('ws://127.0.0.1:${srv.port}/ws/node', 'simfarm.node.v1');
    ws.binaryType = 'arraybuffer';
    let n = 0;
    ws.onmessage = (e) => {
      if (n++ === 0) { ws.send(new Uint8Array(${JSON.stringify(frame)})); return; }
      console.log(Buffer.from(e.data).toString('latin1'));
    };
    ws.onclose = () => { console.log('closed'); process.exit(0); };`;
  const child = spawn(process.execPath, ['--experimental-websocket', '--no-warnings', '-e', code]);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 20000);
  await new Promise((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  assert.match(out, /speaks version 1; upgrade the node/);
  assert.match(out, /closed/, 'the session ends');
});

// A scripted node over a real WebSocket: a signed hello (Ed25519 over the
// canonical message of PROTOCOL.md §6), then `flood` frames as fast as it
// can. Prints each frame it receives (latin1) and "closed".
function scriptedNode(port, flood) {
  const code = `
    const crypto = require('node:crypto');
    const enc = (v) => {
      const out = [];
      const str = (x) => { const b = Buffer.from(x); out.push(0xa0 | b.length, ...b); };
      (function w(x) {
        if (typeof x === 'string') str(x);
        else if (typeof x === 'bigint') { const b = Buffer.alloc(8); b.writeBigUInt64BE(x); out.push(0xcf, ...b); }
        else if (typeof x === 'number') out.push(x);
        else if (Buffer.isBuffer(x)) out.push(0xc4, x.length, ...x);
        else if (Array.isArray(x)) { out.push(0x90 | x.length); x.forEach(w); }
        else { const e = Object.entries(x); out.push(0x80 | e.length); for (const [k, val] of e) { str(k); w(val); } }
      })(v);
      return new Uint8Array(out);
    };
    const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
    const pk = Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url');
    const host = '127.0.0.1:${port}';
    const ws = new WebSocket('ws://' + host + '/ws/node', 'simfarm.node.v1');
    ws.binaryType = 'arraybuffer';
    let n = 0;
    ws.onmessage = (e) => {
      const buf = Buffer.from(e.data);
      require('node:fs').writeSync(1, buf.toString('latin1').replace(/[^ -~]/g, '.') + String.fromCharCode(10));
      if (n++ === 0) {
        const at = buf.indexOf(Buffer.from([0xa5, ...Buffer.from('nonce'), 0xc4, 0x20]));
        const nonce = buf.subarray(at + 8, at + 40);
        const ts = Math.floor(Date.now() / 1000);
        const canon = ts + '\\0POST\\0' + host + '\\0/v1/node/hello\\0' + crypto.createHash('sha256').update(nonce).digest('hex');
        const sig = crypto.sign(null, Buffer.from(canon), privateKey);
        ws.send(enc({ v: 1, type: 'hello', id: 1, ts: BigInt(Date.now()), body: { pk, ts: BigInt(ts), sig,
          version: 'scripted', caps: { cores: 1, max_parallel: 1, backends: [] } } }));
      } else if (n === 2) {
        const beat = enc({ v: 1, type: 'heartbeat', id: 2, ts: BigInt(Date.now()), body: { cpu: 0, mem_used: 0, mem_total: 1 } });
        for (let i = 0; i < ${flood}; i++) ws.send(beat);
      }
    };
    ws.onclose = () => { console.log('closed'); process.exit(0); };`;
  const child = spawn(process.execPath, ['--experimental-websocket', '--no-warnings', '-e', code]);
  const t = { out: '' };
  const seen = [];
  const look = () => { for (const w of [...seen]) if (w.re.test(t.out)) { seen.splice(seen.indexOf(w), 1); w.resolve(); } };
  child.stdout.on('data', (d) => { t.out += d; look(); });
  child.stderr.on('data', (d) => { t.out += d; look(); });
  t.exited = new Promise((resolve) => child.on('exit', resolve));
  // Resolves once the output matches re; rejects at the deadline.
  t.saw = (re, ms) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${re} not seen in ${ms} ms: ${t.out}`)), ms);
    seen.push({ re, resolve: () => { clearTimeout(timer); resolve(); } });
    look();
  });
  t.kill = () => child.kill('SIGKILL');
  return t;
}

test('a node that floods the coordinator with frames is cut off; the others carry on', async () => {
  const ev = tailEvents(srv);
  await ev.until((e) => e.type === 'snapshot', 'snapshot');
  const flood = scriptedNode(srv.port, 2000);
  const timer = setTimeout(() => flood.kill(), 30000);
  await flood.exited;
  clearTimeout(timer);
  assert.match(flood.out, /welcome/, 'the signed hello was accepted');
  assert.match(flood.out, /closed/, 'the coordinator ended the session');
  // (Node 20's WebSocket client loses frames that arrive back to back, so
  // the coordinator's side is what is checked: why the node went offline.)
  const off = await ev.until((e) => e.type === 'node.offline', 'node.offline');
  assert.equal(off.reason, 'rate limited');
  await ev.close();
  // An honest pace is never limited: a few frames are answered, the session
  // stays. (From the flooder's address, which is now refused for 2 s: the
  // connection is held until then, and welcomed after.)
  const calm = scriptedNode(srv.port, 5);
  await calm.saw(/welcome/, 10000);
  const waited = await Promise.race([calm.exited.then(() => 'exited'),
    new Promise((resolve) => setTimeout(() => resolve('still open'), 1500))]);
  calm.kill();
  assert.equal(waited, 'still open', calm.out);
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
});

test('failed logins from one address are rate-limited', async () => {
  const other = await serve(await createDatabase(pg, 'logins'));
  try {
    for (let i = 0; i < 10; i++)
      assert.equal((await call(other, 'POST', '/api/jobs', job(1000), 'sf_' + 'B'.repeat(43))).status, 401);
    const res = await fetch(other.url + '/api/jobs', { method: 'POST', body: '{}',
      headers: { authorization: `Bearer ${other.token}` } });
    assert.equal(res.status, 429, 'even a good token waits out the minute');
    assert.ok(Number(res.headers.get('retry-after')) > 0);
    assert.equal((await call(other, 'GET', '/api/jobs', undefined, null)).status, 200, 'reads go on');
  } finally {
    await other.stop();
  }
});

test('simfarm_events_total counts the events published, not their sequence numbers', async () => {
  const other = await serve(await createDatabase(pg, 'eventcount'));
  try {
    const ev = tailEvents(other);
    const snap = await ev.until((e) => e.type === 'snapshot', 'snapshot');
    const before = (await metrics(other)).simfarm_events_total;
    // Sequence numbers start at the start time in microseconds (~1.7e15).
    assert.ok(before >= 0 && before < 1000, `simfarm_events_total ${before}`);
    const r = await call(other, 'POST', '/api/jobs', job(1000));
    const sub = await ev.until((e) => e.type === 'job.submitted' && e.job === r.json.id, 'job.submitted');
    const now = (await metrics(other)).simfarm_events_total;
    assert.ok(now >= before + (sub.seq - snap.seq), `${before} then ${now}`);
    assert.equal((await call(other, 'POST', `/api/jobs/${r.json.id}/cancel`)).status, 200);
    const fin = await ev.until((e) => e.type === 'job.finished' && e.job === r.json.id, 'job.finished');
    const last = ev.events.at(-1).seq;
    assert.equal((await metrics(other)).simfarm_events_total - before, last - snap.seq, `up to ${fin.seq}`);
    await ev.close();
  } finally {
    await other.stop();
  }
});

// libfaketime (Debian's libfaketime), which moves the time a program reads
// from the wall clock (CLOCK_REALTIME) by what a file says, read at every
// call; the monotonic clock is left alone.
function fakeTime(file) {
  const lib = fs.readdirSync('/usr/lib').map((d) => `/usr/lib/${d}/faketime/libfaketimeMT.so.1`).find(fs.existsSync);
  assert.ok(lib, 'libfaketime is installed (scripts/install-deps.sh)');
  fs.writeFileSync(file, '+0\n');
  return { LD_PRELOAD: lib, FAKETIME_TIMESTAMP_FILE: file, FAKETIME_NO_CACHE: '1', DONT_FAKE_MONOTONIC: '1' };
}

test('a block for failed logins lasts its minute when the wall clock is stepped back or forward', async () => {
  const clock = path.join(tmp, 'clock');
  const other = await serve(await createDatabase(pg, 'clocksteps'), { env: fakeTime(clock) });
  try {
    const good = async () => {
      const res = await fetch(other.url + '/api/jobs', { method: 'POST', body: JSON.stringify(job(1000)),
        headers: { authorization: `Bearer ${other.token}`, 'content-type': 'application/json' } });
      return res.status;
    };
    assert.equal(await good(), 201, 'the clock file works and the token is good');
    for (let i = 0; i < 10; i++)
      assert.equal((await call(other, 'POST', '/api/jobs', job(1000), 'sf_' + 'D'.repeat(43))).status, 401);
    assert.equal(await good(), 429);
    // an hour back (an NTP step, a VM restored): the block stays
    fs.writeFileSync(clock, '-3600\n');
    assert.equal(await good(), 429, 'stepped back an hour');
    // two minutes on: the block has not lasted a minute yet, and stays
    fs.writeFileSync(clock, '+120\n');
    assert.equal(await good(), 429, 'stepped on two minutes');
  } finally {
    await other.stop();
  }
});

test('a private coordinator: reads need a token, /ws/events a ticket; /health, the web files and nodes stay open', async () => {
  const p = await serve(await createDatabase(pg, 'private'), { extra: ['--private', '--open-enrolment'] });
  try {
    for (const q of ['/api/jobs', '/api/jobs/1', '/api/jobs/1/convergence', '/api/nodes', '/api/nodes/1', '/api/kernels',
      '/metrics']) {
      const r = await call(p, 'GET', q, undefined, null);
      assert.equal(r.status, 401, q);
      assert.match(r.json.error, /this coordinator is private: reading needs an API token too/, q);
    }
    // a missing token is no failed login: past the limit of 10, still 401
    for (let i = 0; i < 12; i++) assert.equal((await call(p, 'GET', '/api/jobs', undefined, null)).status, 401);
    assert.equal((await call(p, 'GET', '/api/jobs', undefined, 'sf_' + 'C'.repeat(43))).status, 401, 'a wrong token');
    for (const q of ['/api/jobs', '/api/nodes', '/api/kernels', '/metrics'])
      assert.equal((await call(p, 'GET', q)).status, 200, q);
    assert.equal((await call(p, 'POST', '/api/jobs', job(1000))).status, 201);
    assert.equal((await call(p, 'GET', '/health', undefined, null)).status, 200);
    for (const q of ['/', '/contribute', '/js/api.js'])
      assert.equal((await fetch(p.url + q)).status, 200, q);

    // /ws/events: not without a ticket, nor with a made-up one
    for (const q of ['', '?ticket=' + '0'.repeat(32)]) {
      const t = tailEvents(p, q);
      assert.equal(await t.exited, 3, `ws/events${q} refused`);
      assert.equal(t.events.length, 0);
    }
    assert.equal((await call(p, 'POST', '/api/events/ticket', undefined, null)).status, 401);
    const tk = await call(p, 'POST', '/api/events/ticket');
    assert.equal(tk.status, 201, tk.text);
    assert.match(tk.json.ticket, /^[0-9a-f]{32}$/);
    assert.equal(tk.json.expires_in_s, 30);
    const ev = tailEvents(p, `?ticket=${tk.json.ticket}`);
    try {
      await ev.until((e) => e.type === 'snapshot', 'snapshot with the ticket');
      // once only
      const again = tailEvents(p, `?ticket=${tk.json.ticket}`);
      assert.equal(await again.exited, 3, 'a ticket opens one connection');
      // a node enrols and the events say so: /ws/node needs no API token
      const node = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${p.port}/ws/node`, '--key',
        path.join(os.tmpdir(), `simfarm-private-${process.pid}.key`), '--cores', '1'], { stdio: 'ignore' });
      try {
        await ev.until((e) => e.type === 'node.online', 'node.online');
      } finally {
        node.kill('SIGKILL');
        fs.rmSync(path.join(os.tmpdir(), `simfarm-private-${process.pid}.key`), { force: true });
      }
    } finally {
      await ev.close();
    }

    // the CLI: the server's words without a token, the table with one
    const config = path.join(os.tmpdir(), `simfarm-private-${process.pid}.conf`);
    fs.writeFileSync(config, '');
    const env = { ...process.env, SIMFARM_TOKEN: '', SIMFARM_CONFIG: config };
    const no = await run(simfarm, ['jobs', '--server', p.url], { env });
    assert.equal(no.code, 1);
    assert.match(no.stderr, /^simfarm jobs: this coordinator is private: reading needs an API token too/m);
    const yes = await run(simfarm, ['jobs', '--server', p.url, '--token', p.token], { env });
    assert.equal(yes.code, 0, yes.stderr);
    assert.match(yes.stdout, /^ID +STATE/);
    fs.rmSync(config);
  } finally {
    await p.stop();
  }
});

test('a coordinator that is not private takes a ticket, and needs none', async () => {
  assert.equal((await call(srv, 'GET', '/api/jobs', undefined, null)).status, 200);
  const tk = await call(srv, 'POST', '/api/events/ticket');
  assert.equal(tk.status, 201);
  for (const q of [`?ticket=${tk.json.ticket}`, '?ticket=nonsense', '']) {
    const ev = tailEvents(srv, q);
    try {
      await ev.until((e) => e.type === 'snapshot', `snapshot (${q})`);
    } finally {
      await ev.close();
    }
  }
});
