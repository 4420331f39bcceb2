// Hostile nodes: beside two honest `simfarm node` processes computing one
// job, scripted nodes (tests/lib/nodeproto.mjs) send garbage, a frame past
// the 4 MiB limit, completions with forged signatures, another node's claim
// token, replays, skewed timestamps, results for ranges they were not
// given, and a flood of heartbeats. Each gets the answer PROTOCOL.md names;
// the coordinator stays up; nothing a hostile node sends is counted, so the
// job ends with the result of one local run to the last bit and the journal
// holds each item range exactly once.
//
// A session closed for abuse also puts its address on a penalty list, so
// each attack comes from an address of its own in 127.0.0.0/8 (fresh()),
// as from another host; the honest nodes connect from 127.0.0.1.
//
// The results the hostile nodes send are real ones: the bytes an honest
// node's chunk of the same size was accepted with (read from the journal),
// so a coordinator that skipped a check would count them and the result
// would change.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, metrics, serve, tailEvents } from '../lib/coord.mjs';
import { E, ScriptedNode, encode, envelope, helloBody, nodeKey } from '../lib/nodeproto.mjs';
import { accepts, assertTiles } from '../lib/journal.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { build, eventually, run } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const ITEMS = 30000000;
const SEED = 7;
const params = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, q: 0, sigma: 0.2, T: 1, steps: 16,
  antithetic: true, greeks: true };

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-hostile-'));
let pg, srv, job, local, victim, victimBeat;
const honest = [];
const tried = {}; // bad inputs sent, by kind (printed at the end)
const count = (kind, n = 1) => { tried[kind] = (tried[kind] ?? 0) + n; };

// Resolves with p, or rejects at the deadline.
function within(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

// A loopback address no test has used.
let lastHost = 10;
const fresh = () => `127.0.0.${++lastHost}`;

const healthy = async () => assert.equal((await call(srv, 'GET', '/health')).status, 200, 'the coordinator is up');

// A batch for the victim's chunk: its job, context and token, with the
// given range and data.
const batchFor = (a, { start = a.chunk.start, count: n = a.chunk.count, data }) => ({
  job: a.job, ctxHash: a.ctx_hash,
  results: [{ chunk: a.chunk.chunk, token: a.chunk.token, start, count: n, elapsedMs: 100, data }],
});

// The bytes of an accepted result from the journal: a chunk of `items`
// items computed by an honest node, and where it starts.
async function acceptedResult(items) {
  const row = await eventually(() => psql(pg, `SELECT first_item, encode(result, 'hex') FROM journal WHERE job_id = ${job} ` +
    `AND type = 1 AND item_count = ${items} ORDER BY seq LIMIT 1`), `an accepted chunk of ${items} items`);
  const [first, hex] = row.split('|');
  return { first: Number(first), data: Buffer.from(hex, 'hex') };
}

before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '1000'] });
  // Every node here joins under open enrolment, as a public node: the job names that tier.
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items: ITEMS, seed: SEED,
    tiers: ['own', 'team', 'community', 'public'],
      verify: { trust: ['own', 'team', 'community', 'public'] } });
  assert.equal(res.status, 201, res.text);
  job = res.json.id;
  for (let i = 0; i < 2; i++) {
    const child = spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`,
      '--key', path.join(tmp, `honest${i}.key`), '--cores', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const n = { child, err: '', exited: new Promise((resolve) => child.on('exit', resolve)) };
    child.stderr.on('data', (d) => { n.err = (n.err + d).slice(-4000); });
    honest.push(n);
  }
  const pfile = path.join(tmp, 'params.json');
  fs.writeFileSync(pfile, JSON.stringify(params));
  local = run(simfarm, ['sim', 'option', pfile, '--items', String(ITEMS), '--seed', String(SEED), '--json'],
    { timeoutMs: 120000 });
  // The victim: an enrolled scripted node holding one claim of the job (its
  // heartbeats keep the lease), whose token and range the others misuse.
  // While it holds the claim the job cannot end.
  const v = await ScriptedNode.connect(srv.port);
  await v.hello();
  const assign = await v.until((m) => m.type === 'assign' && m.body.job === job, 'an assign for the victim', 30000);
  victim = { node: v, job, ctx_hash: assign.body.ctx_hash, chunk: assign.body.chunks[0] };
  victimBeat = setInterval(() => v.heartbeat([victim.chunk.chunk]), 1000);
});

after(async () => {
  clearInterval(victimBeat);
  for (const n of honest) if (n.child.exitCode === null) n.child.kill('SIGTERM');
  await Promise.all(honest.map((n) => Promise.race([n.exited,
    new Promise((resolve) => setTimeout(() => { n.child.kill('SIGKILL'); resolve(); }, 10000))])));
  await srv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// Seeded garbage, so a failure can be replayed.
function garbage(seed, n) {
  const out = [];
  let x = seed;
  for (let i = 0; i < n; i++) {
    const b = Buffer.alloc(1 + (i * 37) % 200);
    for (let k = 0; k < b.length; k++) { x = (Math.imul(x, 1103515245) + 12345) >>> 0; b[k] = x >>> 24; }
    out.push(b);
  }
  return out;
}

// Frames that fail to decode, each with the code §7 gives it.
const malformed = [
  ['EMSGPACK', Buffer.from([0xc1]), E.EMSGPACK],
  ['ETRUNC', envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 }).subarray(0, 20), E.ETRUNC],
  ['ETRAILING', Buffer.concat([envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 }), Buffer.from([0])]),
    E.ETRAILING],
  ['EEXT', Buffer.concat([Buffer.from([0x81, 0xa1, 0x76]), Buffer.from([0xd4, 0x01, 0x00])]), E.EEXT],
  ['EVERSION', encode({ v: 2, type: 'hello', id: 1, ts: 0, body: {} }), E.EVERSION],
  ['EUNKNOWNTYPE', envelope('steal', 1, {}), E.EUNKNOWNTYPE],
  ['ETYPE', encode({ v: 1, type: 'heartbeat', id: 1, ts: 0, body: 7 }), E.ETYPE],
];

test('garbage before hello is answered with its decode error and ends the session', async () => {
  for (const [name, frame, code] of malformed) {
    const n = await ScriptedNode.connect(srv.port);
    n.link.send(frame);
    const e = await n.error(undefined, name);
    assert.equal(e.body.code, code, `${name}: ${e.body.message}`);
    await within(n.closed, 5000, `${name}: the session closed`);
    count('malformed frames before hello');
  }
  for (const frame of garbage(0x5eed, 8)) {
    const n = await ScriptedNode.connect(srv.port);
    n.link.send(frame);
    const e = await n.error(undefined, 'random bytes');
    assert.ok(e.body.code <= -3 && e.body.code >= -31, `a decode error (§7), not ${e.body.code} ${e.body.message}`);
    await within(n.closed, 5000, 'random bytes: the session closed');
    count('random frames before hello');
  }
  // Anything but hello first: ENOTREADY.
  const early = await ScriptedNode.connect(srv.port);
  const id = early.heartbeat();
  assert.equal((await early.error(id)).body.code, E.ENOTREADY);
  await within(early.closed, 5000, 'heartbeat before hello: the session closed');
  count('frames before hello');
  // A text frame is a protocol error: the connection ends.
  const text = await ScriptedNode.connect(srv.port);
  text.link.send(Buffer.from('{"type":"hello"}'), 1);
  await within(text.closed, 5000, 'text frame: the session closed');
  count('text frames');
  // A hello signed by another key than the one it names: ESIG.
  const liar = await ScriptedNode.connect(srv.port);
  const forged = { ...helloBody(nodeKey(), liar.host, liar.challenge.nonce), pk: liar.key.pk };
  const hid = liar.send('hello', forged);
  assert.equal((await liar.error(hid)).body.code, E.ESIG);
  await within(liar.closed, 5000, 'forged hello: the session closed');
  count('forged hellos');
  await healthy();
});

test('a connection that never says hello is told so and closed', async () => {
  const mute = await ScriptedNode.connect(srv.port);
  const e = await mute.error(undefined, 'the hello is due', 30000); // 10 s, or 3 heartbeat intervals
  assert.equal(e.body.code, E.ENOTREADY, e.body.message);
  assert.match(e.body.message, /no hello within \d+ s of the challenge/);
  await within(mute.closed, 5000, 'no hello: the session closed');
  await healthy();
});

test('a frame past 4 MiB is refused with EFRAMESIZE and ends the session', async () => {
  const n = await ScriptedNode.connect(srv.port, { from: fresh() });
  await n.hello();
  n.link.send(Buffer.alloc(4 * 1024 * 1024 + 1, 0x90));
  const e = await n.error(0, 'EFRAMESIZE (id 0: it answers no frame)');
  assert.equal(e.body.code, E.EFRAMESIZE, e.body.message);
  await within(n.closed, 10000, 'oversized frame: the session closed');
  count('oversized frames');
  // Exactly 4 MiB is within the limit (the refusal reads the frame's
  // declared length): it is decoded, and as garbage it costs one strike.
  const m = await ScriptedNode.connect(srv.port, { from: fresh() });
  await m.hello();
  m.link.send(Buffer.alloc(4 * 1024 * 1024, 0x90));
  const d = await m.error(undefined, 'a decode error for a frame of exactly 4 MiB');
  assert.notEqual(d.body.code, E.EFRAMESIZE, d.body.message);
  assert.notEqual(d.body.code, E.ERATELIMITED, d.body.message);
  await m.close();
  await healthy();
});

// An enrolled node may send STRIKES bad frames at once (one more each 10 s);
// the next ends its session (actors/coord/session.c, docs/reliability.md).
const STRIKES = 16;

test('garbage from an enrolled node: every frame answered, the session kept', async () => {
  const n = await ScriptedNode.connect(srv.port);
  await n.hello();
  const frames = [...malformed.map(([, f]) => f), ...garbage(0xbad, STRIKES - malformed.length)];
  for (const f of frames) n.link.send(f);
  // A request the session answers (ctx_req for no job: EJOB) comes after
  // all of them: the session still reads frames, and each got its error.
  // (An id no garbage frame can carry: the error for a frame repeats the
  // id when it decoded that far.)
  const id = n.send('ctx_req', { job: 999999, hash: Buffer.alloc(32) }, 2 ** 40 + 1);
  assert.equal((await n.error(id, 'EJOB')).body.code, E.EJOB);
  const errors = n.msgs.filter((m) => m.type === 'error');
  assert.equal(errors.length, frames.length + 1, 'one error per bad frame');
  for (const [i, [name, , code]] of malformed.entries()) assert.equal(errors[i].body.code, code, name);
  for (const e of errors.slice(0, frames.length)) assert.ok(e.body.code < 0 && e.body.code >= -31, JSON.stringify(e.body));
  assert.equal(n.link.closeCode, null, 'the session is kept');
  count('bad frames after welcome', frames.length);
  await n.close();
  await healthy();
});

test('a node that keeps sending bad frames is cut off, and its key refused for longer each time', async () => {
  const key = nodeKey();
  // Each hello from an address of its own: the key's refusal, not the
  // address's.
  const refusedFor = async () => {
    const n = await ScriptedNode.connect(srv.port, { key, from: fresh() });
    const id = n.send('hello', helloBody(key, n.host, n.challenge.nonce));
    const m = await n.until((x) => x.id === id && (x.type === 'welcome' || x.type === 'error'), 'welcome or error');
    if (m.type === 'welcome') return { n, s: 0 };
    assert.equal(m.body.code, E.ERATELIMITED, m.body.message);
    await within(n.closed, 5000, 'a refused hello: the session closed');
    return { s: Number(/refused for (\d+) s/.exec(m.body.message)[1]) };
  };
  const abuse = async (n) => {
    for (const f of garbage(0xab05e, STRIKES + 1)) n.link.send(f);
    const cut = await n.until((m) => m.type === 'error' && m.body.code === E.ERATELIMITED, 'ERATELIMITED');
    assert.equal(cut.id, 0);
    assert.match(cut.body.message, /bad frames/);
    assert.equal(n.msgs.filter((m) => m.type === 'error').length, STRIKES + 2, 'each bad frame answered, then the cut');
    await within(n.closed, 10000, 'too many bad frames: the session closed');
    count('bad frames after welcome', STRIKES + 1);
  };
  const was = await metrics(srv);
  let n = await ScriptedNode.connect(srv.port, { key, from: fresh() });
  await n.hello();
  await abuse(n);
  const first = await refusedFor();
  assert.ok(first.s >= 1 && first.s <= 2, `the first refusal lasts 2 s, not ${first.s}`);
  count('hellos of a refused key');
  n = (await eventually(async () => { const r = await refusedFor(); return r.n; }, 'welcome once the refusal ends', 10000));
  await abuse(n);
  const second = await refusedFor();
  assert.ok(second.s > 2 && second.s <= 4, `the second refusal lasts 4 s, not ${second.s}`);
  count('hellos of a refused key');
  // both cuts and the refusals in /metrics
  const m = await metrics(srv);
  assert.equal(m.simfarm_node_sessions_cut_off_total - was.simfarm_node_sessions_cut_off_total, 2);
  assert.ok(m.simfarm_node_connections_refused_total - was.simfarm_node_connections_refused_total >= 2);
  await healthy();
});

test('forged signatures, another node\'s token, replays and skewed timestamps are not counted', async () => {
  const donor = await acceptedResult(victim.chunk.count);
  const thief = await ScriptedNode.connect(srv.port);
  await thief.hello();
  const stolen = batchFor(victim, { data: donor.data });

  // Signed by a key that is not the session's: ESIG, the session kept.
  const forged = thief.complete(stolen, { key: nodeKey() });
  assert.equal((await thief.error(forged.id, 'ESIG')).body.code, E.ESIG);
  count('forged completions');
  // Signed 1,000 s in the past: ESKEW.
  const old = thief.complete(stolen, { ts: Math.floor(Date.now() / 1000) - 1000 });
  assert.equal((await thief.error(old.id, 'ESKEW')).body.code, E.ESKEW);
  count('skewed completions');
  // Well signed, but the token is the victim's: stale, not counted.
  const theft = thief.complete(stolen);
  const ack = await thief.until((m) => m.type === 'complete_ack' && m.id === theft.id, 'complete_ack');
  assert.deepEqual(ack.body.outcomes, [{ chunk: victim.chunk.chunk, outcome: 'stale' }]);
  assert.notEqual(ack.body.job_complete, true);
  count('completions with another node\'s token');
  // The same frame again (same ts and nonce): EREPLAY.
  thief.link.send(theft.frame);
  const replay = await thief.until((m) => m.type === 'error' && m.id === theft.id, 'EREPLAY');
  assert.equal(replay.body.code, E.EREPLAY);
  count('replayed completions');
  assert.equal(thief.link.closeCode, null, 'refused completions do not end the session');
  await thief.close();
  await healthy();
});

test('a result for a range the node was not given is not counted', async () => {
  const donor = await acceptedResult(victim.chunk.count);
  assert.notEqual(donor.first, victim.chunk.start);
  const v = victim.node;
  // The right token and a result of the right size, for another range.
  const moved = v.complete(batchFor(victim, { start: donor.first, data: donor.data }));
  const a1 = await v.until((m) => m.type === 'complete_ack' && m.id === moved.id, 'complete_ack');
  // A result for another range than its live claim's is answered malformed
  // (stale with its reason, PROTOCOL.md §4), not plain stale; the claim stays.
  const rangeDiffers = (start, count) => [{ chunk: victim.chunk.chunk, outcome: 'stale',
    malformed: `range differs from the claim's: items ${start}+${count}, the claim is ` +
      `${victim.chunk.start}+${victim.chunk.count}` }];
  assert.deepEqual(a1.body.outcomes, rangeDiffers(donor.first, victim.chunk.count));
  // The right start, another count.
  const longer = v.complete(batchFor(victim, { count: victim.chunk.count * 2, data: donor.data }));
  const a2 = await v.until((m) => m.type === 'complete_ack' && m.id === longer.id, 'complete_ack');
  assert.deepEqual(a2.body.outcomes, rangeDiffers(victim.chunk.start, victim.chunk.count * 2));
  count('results for ranges not given', 2);
  // The right token and range, computed with another work context.
  const other = { ...batchFor(victim, { data: donor.data }), ctxHash: Buffer.alloc(32, 7) };
  const elsewhere = v.complete(other);
  const a3 = await v.until((m) => m.type === 'complete_ack' && m.id === elsewhere.id, 'complete_ack');
  assert.deepEqual(a3.body.outcomes,
    [{ chunk: victim.chunk.chunk, outcome: 'stale', malformed: 'work context differs from the job\'s' }]);
  count('results of another work context', 1);
  // The victim leaves: its claim goes back to the job at once.
  clearInterval(victimBeat);
  await v.close();
  await healthy();
});

test('a heartbeat flood is cut off with ERATELIMITED', async () => {
  const ev = tailEvents(srv);
  try {
    await ev.until((e) => e.type === 'snapshot', 'snapshot');
    const n = await ScriptedNode.connect(srv.port, { from: fresh() });
    await n.hello();
    const frame = envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 });
    for (let i = 0; i < 2000; i++) n.link.send(frame);
    count('flooded heartbeats', 2000);
    const e = await n.error(0, 'ERATELIMITED (id 0)');
    assert.equal(e.body.code, E.ERATELIMITED);
    assert.match(e.body.message, /frames a second/);
    await within(n.closed, 10000, 'flood: the session closed');
    const off = await ev.until((x) => x.type === 'node.offline' && x.node === n.nodeId, 'node.offline');
    assert.equal(off.reason, 'rate limited');
  } finally {
    await ev.close();
  }
  await healthy();
});

test('an address a session was cut off from is held, then refused, longer each time; its other sessions go on',
  async () => {
    const from = fresh();
    const stay = await ScriptedNode.connect(srv.port, { from });
    await stay.hello();
    // Floods from a session of the address until it is cut off; resolves
    // to when the cut arrived.
    const flood = async (n) => {
      const frame = envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 });
      for (let i = 0; i < 500; i++) n.link.send(frame);
      count('flooded heartbeats', 500);
      assert.equal((await n.error(0, 'ERATELIMITED')).body.code, E.ERATELIMITED);
      const cut = performance.now();
      await within(n.closed, 10000, 'flood: the session closed');
      return cut;
    };
    const first = await ScriptedNode.connect(srv.port, { from });
    await first.hello();
    const cut1 = await flood(first);
    // The first refusal lasts 2 s: a connection within it is held, unread,
    // until it ends, and then gets its challenge.
    const late = await ScriptedNode.connect(srv.port, { from, challenge: false });
    const c = await late.until((m) => m.type === 'challenge' || m.type === 'error', 'challenge or error');
    assert.equal(c.type, 'challenge', JSON.stringify(c.body));
    assert.ok(performance.now() - cut1 >= 1500, `challenged ${performance.now() - cut1} ms after the cut, within the refusal`);
    late.challenge = c.body;
    await late.hello();
    count('connections from a refused address');
    // The second lasts 4 s: a connection is held 2 s, then refused.
    const cut2 = await flood(late);
    const refused = await ScriptedNode.connect(srv.port, { from, challenge: false });
    // Another address is not held meanwhile: its challenge comes while
    // the refused connection still waits.
    const other = await ScriptedNode.connect(srv.port, { from: fresh() });
    assert.equal(refused.msgs.length, 0, 'the refused connection is held while another address is answered');
    await other.close();
    const e = await refused.until((m) => m.type === 'challenge' || m.type === 'error', 'challenge or error');
    assert.equal(e.type, 'error', 'refused before the challenge');
    assert.equal(e.body.code, E.ERATELIMITED, e.body.message);
    assert.match(e.body.message, /this address are refused for [12] s more/);
    assert.ok(performance.now() - cut2 >= 1500, `refused ${performance.now() - cut2} ms after the cut: not held`);
    await within(refused.closed, 10000, 'a refused connection: closed');
    count('connections from a refused address');
    // The session the address had before its offences went on throughout.
    const id = stay.send('ctx_req', { job: 999999, hash: Buffer.alloc(32) });
    assert.equal((await stay.error(id, 'EJOB')).body.code, E.EJOB);
    assert.equal(stay.link.closeCode, null, 'the earlier session is kept');
    await stay.close();
    await healthy();
  });

test('the honest nodes finish the job: one local run\'s result, each range accepted once', async () => {
  clearInterval(victimBeat); // (when an earlier test failed before the victim left)
  await within(victim.node.close(), 5000, 'the victim leaves');
  const j = await eventually(async () => {
    const r = (await call(srv, 'GET', `/api/jobs/${job}`)).json;
    assert.ok(r.state === 'running' || r.state === 'complete', JSON.stringify(r));
    return r.state === 'complete' && r;
  }, `job ${job} complete`, 90000);
  for (const n of honest) assert.equal(n.child.exitCode, null, `an honest node exited: ${n.err}`);

  const rows = await accepts(pg, job);
  assertTiles(rows, ITEMS);
  // Every result sent with the victim's token was refused: its chunk was
  // computed again, under another claim.
  const tokens = (await psql(pg, `SELECT encode(token, 'hex') FROM journal WHERE job_id = ${job} AND type = 1`)).split('\n');
  assert.ok(!tokens.includes(victim.chunk.token.toString('hex')), 'the victim\'s token was never accepted');

  const l = await local;
  assert.equal(l.code, 0, l.stderr);
  assert.deepEqual(j.result.outputs.map(({ name, count: c, mean, stderr, min, max }) =>
    ({ name, count: c, mean, stderr, min, max })), JSON.parse(l.stdout).outputs);
  assert.equal(j.result.digest, JSON.parse(l.stdout).digest, 'the result\'s bytes are the local run\'s');
  await healthy();
  console.log(`# hostile inputs: ${JSON.stringify(tried)}; job ${job}: ${rows.length} chunks accepted, all from honest nodes`);
});
