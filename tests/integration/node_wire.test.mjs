// The native node against a real coordinator and PostgreSQL, beyond
// node.test.mjs: a cancel stops a chunk in the middle (the worker is free
// again long before the chunk would have ended), completions leave in
// batches (seen on the wire, through a tap between node and coordinator),
// a lost context request is made again, and wss:// with the coordinator's
// certificate checked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call, metrics, tailEvents } from '../lib/coord.mjs';
import { E, decode, nodeKey, ScriptedNode } from '../lib/nodeproto.mjs';
import { selfSigned } from '../lib/tls.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const optionFile = path.join(top, 'examples/option.json');
const option = JSON.parse(fs.readFileSync(optionFile, 'utf8'));
// The nodes here join under open enrolment, as public nodes: their jobs name
// that tier (a job that names none leaves public nodes out).
// Every tier, and every tier trusted: these tests are about farming, not
// spot-checks (tests/integration/verify.test.mjs), and a lone node could not be
// checked by another.
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-node-wire-'));

// A `simfarm node`; p.until(re, what) waits for its output to match.
function node(args, { env = process.env, timeoutMs = 60000 } = {}) {
  const child = spawn(simfarm, ['node', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const p = { out: '', child };
  const watchers = new Set();
  const feed = (d) => { p.out += d; for (const w of [...watchers]) w(); };
  child.stdout.on('data', feed);
  child.stderr.on('data', feed);
  p.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  p.until = (re, what, ms = timeoutMs) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => { watchers.delete(w); reject(new Error(`${what}: not in ${ms} ms\n${p.out}`)); }, ms);
    const w = () => {
      const m = p.out.match(re);
      if (m) { clearTimeout(timer); watchers.delete(w); resolve(m); }
    };
    watchers.add(w);
    w();
    p.exited.then((e) => { if (watchers.has(w)) { clearTimeout(timer); watchers.delete(w); reject(new Error(`${what}: exited ${e.code ?? e.signal}\n${p.out}`)); } });
  });
  p.stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return p.exited;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 20000);
    const e = await p.exited;
    clearTimeout(t);
    return e;
  };
  return p;
}

async function submit(srv, params, items, seed) {
  const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items, seed, tiers, verify });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

async function jobDone(srv, id, timeoutMs = 120000) {
  return eventually(async () => {
    const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    return j.state === 'complete' ? j : null;
  }, `job ${id} complete`, timeoutMs);
}

let pg;
before(async () => { pg = await startPostgres(); });
after(async () => {
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('a cancel stops the chunk being computed: the worker takes other work long before the chunk would end', async () => {
  // Chunks sized to take five minutes on the node; one worker.
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '300000'] });
  const nd = node(['--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, 'cancel.key'),
    '--cores', '1']);
  try {
    const me = Number((await nd.until(/as node (\d+)/, 'node connected'))[1]);
    const slow = { ...option, style: 'asian_arithmetic', steps: 2000, greeks: false };
    const a = await submit(srv, slow, 1e12, 3);
    // The first chunk is small; once the node's speed is known, the next
    // one is sized to the five minutes (from a first estimate, which may be
    // low). Wait until the chunk in hand is worth a minute at least at the
    // node's measured speed.
    await eventually(async () => {
      const n = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.id === me);
      const p = (await call(srv, 'GET', `/api/jobs/${a}`)).json.progress;
      return n && n.items_per_s > 0 && p && p.items_in_flight >= 60 * n.items_per_s;
    }, 'a chunk of a minute or more in hand', 60000);
    assert.equal((await call(srv, 'POST', `/api/jobs/${a}/cancel`)).status, 200);
    await nd.until(new RegExp(`job ${a}: 1 chunks cancelled \\(cancelled\\)`), 'the node told');
    const stopped = await nd.until(new RegExp(`chunk \\d+ of job ${a} stopped after \\d+ ms`), 'the chunk stopped', 30000);
    assert.ok(stopped);
    // The worker is free: a second job's chunks are computed at once, not
    // after the minutes the cancelled chunk would have taken.
    const items = 4000, seed = 9;
    const b = await submit(srv, option, items, seed);
    sameBits(await jobDone(srv, b, 30000), await localRun(items, seed));
    const n = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.id === me);
    assert.equal(n.in_flight, 0);
  } finally {
    assert.equal((await nd.stop()).code, 0, nd.out);
    await srv.stop();
  }
});

// A TCP proxy that also reads the node's side of the WebSocket: every
// client frame (unmasked, fragments joined) decoded as a protocol envelope
// into tap.msgs. A message in one frame for which drop(msg) is true is not
// passed on (it is still listed).
function wireTap(targetPort, { drop = () => false } = {}) {
  const tap = { msgs: [] };
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    let buf = Buffer.alloc(0), upgraded = false, parts = [];
    const close = () => { client.destroy(); upstream.destroy(); };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    upstream.on('data', (d) => client.write(d));
    client.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        upgraded = true;
        upstream.write(buf.subarray(0, end + 4));
        buf = buf.subarray(end + 4);
      }
      for (;;) {
        if (buf.length < 2) return;
        const fin = buf[0] & 0x80, op = buf[0] & 0x0f;
        let n = buf[1] & 0x7f, at = 2;
        if (n === 126) { if (buf.length < 4) return; n = buf.readUInt16BE(2); at = 4; }
        else if (n === 127) { if (buf.length < 10) return; n = Number(buf.readBigUInt64BE(2)); at = 10; }
        const mask = buf.subarray(at, at + 4);
        at += 4; // a client's frames are masked
        if (buf.length < at + n) return;
        const frame = buf.subarray(0, at + n);
        const data = Buffer.from(buf.subarray(at, at + n));
        for (let i = 0; i < n; i++) data[i] ^= mask[i & 3];
        buf = buf.subarray(at + n);
        let pass = true;
        if (op === 0 || op === 2) {
          const whole = fin && parts.length === 0 && op === 2;
          parts.push(data);
          if (fin) {
            const msg = decode(Buffer.concat(parts));
            tap.msgs.push(msg);
            parts = [];
            pass = !(whole && drop(msg));
          }
        }
        if (pass) upstream.write(frame);
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    tap.port = server.address().port;
    tap.close = () => new Promise((done) => server.close(() => done()));
    resolve(tap);
  }));
}

test('completions leave in batches: several results under one signature, one frame', async () => {
  // Short chunks on three workers: results finish close together.
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '200'] });
  const tap = await wireTap(srv.port);
  const nd = node(['--server', `ws://127.0.0.1:${tap.port}/ws/node`, '--key', path.join(tmp, 'batch.key'),
    '--cores', '3']);
  try {
    await nd.until(/as node \d+/, 'node connected');
    const items = 30000000, seed = 13;
    const id = await submit(srv, option, items, seed);
    const job = await jobDone(srv, id);
    sameBits(job, await localRun(items, seed));
    const completes = tap.msgs.filter((m) => m.type === 'complete');
    const batches = completes.map((m) => decode(m.body.payload));
    const results = batches.reduce((s, b) => s + b.results.length, 0);
    // Every chunk the job accepted came through the tap, each result once.
    assert.equal(results, job.result.nodes.reduce((s, n) => s + n.chunks, 0), JSON.stringify(job.result.nodes));
    const sizes = batches.map((b) => b.results.length);
    assert.ok(sizes.some((k) => k >= 2), `a batch of several results (sizes: ${sizes.join(' ')})`);
    assert.ok(completes.length < results, `${completes.length} frames for ${results} results`);
    for (const b of batches) {
      assert.equal(b.job, id);
      const chunks = new Set(b.results.map((r) => r.chunk));
      assert.equal(chunks.size, b.results.length, 'a chunk once per batch');
    }
  } finally {
    assert.equal((await nd.stop()).code, 0, nd.out);
    await tap.close();
    await srv.stop();
  }
});

test('a job context that does not come is asked for again', async () => {
  // The node's first request for the job's context is lost on the way;
  // the node asks again (every 10 s while it holds the job's chunks) and
  // computes them.
  const srv = await serve(pg.url, { extra: ['--open-enrolment'] });
  let asked = 0;
  const tap = await wireTap(srv.port, { drop: (m) => m.type === 'ctx_req' && asked++ === 0 });
  const nd = node(['--server', `ws://127.0.0.1:${tap.port}/ws/node`, '--key', path.join(tmp, 'ctx.key'),
    '--cores', '1']);
  try {
    await nd.until(/as node \d+/, 'node connected');
    const items = 4000, seed = 21;
    const id = await submit(srv, option, items, seed);
    sameBits(await jobDone(srv, id, 60000), await localRun(items, seed));
    const asks = tap.msgs.filter((m) => m.type === 'ctx_req');
    assert.equal(asks.length, 2, 'the request lost, then the one answered');
  } finally {
    assert.equal((await nd.stop()).code, 0, nd.out);
    await tap.close();
    await srv.stop();
  }
});

// ---- TLS ------------------------------------------------------------------------------------

test('wss: the node checks the coordinator\'s certificate and computes over TLS', async () => {
  const good = await selfSigned(tmp, 'coordinator'), other = await selfSigned(tmp, 'stranger');
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--tls-cert', good.cert, '--tls-key', good.key],
    ca: good.cert });
  assert.match(srv.url, /^https:/);
  const wss = `wss://127.0.0.1:${srv.port}/ws/node`;
  let nd;
  const refused = [];
  try {
    // A CA that did not sign the coordinator's certificate, and the
    // system's CAs (which know nothing of it): refused, with the reason.
    const caFile = path.join(tmp, 'tls-ca.pem');
    fs.copyFileSync(other.cert, caFile);
    refused.push(node(['--server', wss, '--key', path.join(tmp, 'tls-wrong.key'), '--ca', caFile]));
    refused.push(node(['--server', wss, '--key', path.join(tmp, 'tls-system.key')]));
    for (const r of refused) {
      await r.until(/cannot reach 127\.0\.0\.1:\d+ \(.*certificate.*\); trying again/i, 'refused: the certificate');
      assert.doesNotMatch(r.out, /connected to/);
    }
    // The coordinator's certificate copied over the --ca file (as after a
    // renewal): the next attempt reads it again and gets in.
    fs.writeFileSync(caFile, 'not a certificate\n');
    await refused[0].until(/--ca \S+tls-ca\.pem changed, but holds no PEM certificate/, 'a bad --ca file said');
    fs.copyFileSync(good.cert, caFile);
    await refused[0].until(/--ca \S+tls-ca\.pem changed: its certificates check the connections from now on/,
      'the --ca file read again');
    await refused[0].until(/connected to 127\.0\.0\.1:\d+ as node \d+/, 'connected with the new --ca');

    // The right CA, through SIMFARM_CA: the job completes over wss, and
    // the node's signatures name the same host:port as over ws.
    nd = node(['--server', wss, '--key', path.join(tmp, 'tls.key'), '--cores', '2'],
      { env: { ...process.env, SIMFARM_CA: good.cert } });
    await nd.until(/connected to 127\.0\.0\.1:\d+ as node \d+/, 'node connected over wss');
    const items = 2000000, seed = 17;
    const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, tiers, verify });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    const job = await eventually(async () => {
      const j = (await call(srv, 'GET', `/api/jobs/${res.json.id}`)).json;
      return j.state === 'complete' ? j : null;
    }, 'job complete over wss');
    sameBits(job, await localRun(items, seed));
  } finally {
    for (const r of refused) r.child.kill('SIGKILL');
    if (nd) assert.equal((await nd.stop()).code, 0, nd.out);
    await srv.stop();
  }
  // A certificate the CA signed, but for another host: refused too.
  const elsewhere = await selfSigned(tmp, 'elsewhere', 'DNS:elsewhere.example');
  const misnamed = await serve(pg.url, { extra: ['--tls-cert', elsewhere.cert, '--tls-key', elsewhere.key] });
  const lost = node(['--server', `wss://127.0.0.1:${misnamed.port}/ws/node`, '--key', path.join(tmp, 'tls-host.key'),
    '--ca', elsewhere.cert]);
  try {
    await lost.until(/cannot reach 127\.0\.0\.1:\d+ \(TLS: .*not for this host\); trying again/, 'refused: the host');
    assert.doesNotMatch(lost.out, /connected to/);
  } finally {
    lost.child.kill('SIGKILL');
    await misnamed.stop();
  }

  // A CA file that cannot be read stops the node at start.
  const r = await run(simfarm, ['node', '--server', wss, '--ca', path.join(tmp, 'missing.pem')]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /--ca .*missing\.pem: No such file/);
});

test('a chunk the node no longer lists is let go: its slot takes other work', async () => {
  // Heartbeats every 200 ms. A scripted node with one slot lists the chunk
  // it was given, then lists nothing, as a node does once a chunk failed
  // there or its job's context could not be had: the coordinator gives the
  // chunk's range out again at once.
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--heartbeat-ms', '200', '--chunk-ms', '100'] });
  const n = await ScriptedNode.connect(srv.port);
  let listed = [];
  const beat = setInterval(() => n.heartbeat(listed), 100);
  try {
    await n.hello({ maxParallel: 1 });
    const id = await submit(srv, option, 1e9, 4);
    const assigns = () => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id);
    const first = await n.until((m) => m.type === 'assign' && m.body.job === id, 'the first chunk', 30000);
    listed = [first.body.chunks[0].chunk];
    // The claim's lease as the scheduler set it: chunks of 100 ms get the
    // 30 s minimum, counted from when it was given.
    const lease = first.body.chunks[0].lease_ms;
    assert.ok(lease > 25000 && lease <= 30000, `lease_ms ${lease}`);
    // Listed for ten heartbeats of the node's, five of the coordinator's
    // intervals: the slot stays taken.
    const sent = n.nextId;
    await eventually(() => n.nextId >= sent + 10, 'ten heartbeats', 10000);
    assert.equal(assigns().length, 1, 'a chunk the node lists keeps its slot');
    listed = [];
    await n.until(() => assigns().length >= 2, 'another chunk once the first is not listed', 10000);
    const again = assigns()[1].body.chunks[0];
    assert.notEqual(again.chunk, first.body.chunks[0].chunk);
    // The range it no longer holds goes back at once (given_back below),
    // not when its lease (30 s) would have run out, and not to this node:
    // a node is not handed a range it gave back (docs/scheduling.md).
    assert.notEqual(again.start, first.body.chunks[0].start);
    const m = await eventually(async () => { // the scheduler's figures, refreshed every second
      const x = await metrics(srv);
      return x['simfarm_claims_reclaimed_total{why="given_back"}'] >= 1 ? x : null; // those after it too
    }, 'the claim counted as given back', 5000);
    assert.equal(m['simfarm_claims_reclaimed_total{why="lease"}'], 0);
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  } finally {
    clearInterval(beat);
    await n.close();
    await srv.stop();
  }
});

test('a node holding more than 64 chunks keeps every lease it lists', async () => {
  // Heartbeats renew leases 64 claims to a message: a node of 100 slots
  // that lists its 100 chunks loses none of them when the leases (30 s for
  // chunks of 100 ms) would have run out unrenewed.
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--heartbeat-ms', '200', '--chunk-ms', '100'] });
  const n = await ScriptedNode.connect(srv.port);
  let id = 0;
  const held = () => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id).flatMap((m) => m.body.chunks);
  const beat = setInterval(() => n.heartbeat(held().map((c) => c.chunk)), 100);
  try {
    await n.hello({ cores: 100, maxParallel: 100 });
    id = await submit(srv, option, 1e9, 6);
    await eventually(() => held().length === 100, 'a hundred chunks', 30000);
    const until = Date.now() + Math.max(...held().map((c) => c.lease_ms)) + 3000;
    await eventually(() => Date.now() > until, 'past every first lease', 60000, 500);
    const m = await metrics(srv);
    assert.equal(m['simfarm_claims_reclaimed_total{why="lease"}'], 0);
    assert.equal(held().length, 100, 'no chunk handed out again');
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  } finally {
    clearInterval(beat);
    await n.close();
    await srv.stop();
  }
});

test('a heartbeat changes how many chunks the node is given at once, within its cores', async () => {
  // A node of 4 cores starts with one slot, as a browser tab with its
  // slider at 1; it then says 3, 9 (held to its 4 cores) and 1 in its
  // heartbeats (every 100 ms, against the coordinator's 200 ms interval,
  // so a chunk it stops listing is let go within 400 ms).
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--heartbeat-ms', '200'] });
  const n = await ScriptedNode.connect(srv.port);
  let want = 1;
  const dropped = new Set();
  let id = 0;
  const held = () => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id).flatMap((m) => m.body.chunks);
  const listed = () => held().map((c) => c.chunk).filter((c) => !dropped.has(c));
  const beat = setInterval(() => n.heartbeat(listed(), { maxParallel: want }), 100);
  const live = async () => (await call(srv, 'GET', `/api/nodes/${n.nodeId}`)).json;
  const settled = async (what, pred) => eventually(async () => { const v = await live(); return pred(v) ? v : null; },
    what, 10000);
  try {
    await n.hello({ cores: 4, maxParallel: 1 });
    id = await submit(srv, option, 1e9, 5);
    await eventually(() => held().length === 1, 'one chunk for one slot', 30000);
    let v = await live();
    assert.deepEqual([v.max_parallel, v.slots, v.in_flight], [1, 1, 1]);

    want = 3;
    await eventually(() => held().length === 3, 'three chunks for three slots', 10000);
    v = await settled('3 slots', (x) => x.slots === 3);
    assert.deepEqual([v.max_parallel, v.in_flight], [3, 3]);

    want = 9;
    await eventually(() => held().length === 4, 'a fourth chunk: as many as its cores', 10000);
    v = await settled('4 slots', (x) => x.max_parallel === 9);
    assert.equal(v.slots, 4);

    // Down to one: nothing is taken back. Three chunks end (the node
    // stops listing them); with one still held, no new chunk comes in ten
    // heartbeats, and one comes once that one ends too.
    want = 1;
    await settled('one slot', (x) => x.slots === 1);
    for (const c of held().slice(0, 3)) dropped.add(c.chunk);
    await settled('one chunk held', (x) => x.in_flight === 1);
    const sent = n.nextId;
    await eventually(() => n.nextId >= sent + 10, 'ten heartbeats', 10000);
    assert.equal(held().length, 4, 'no new chunk while one is held');
    dropped.add(held()[3].chunk);
    await eventually(() => held().length === 5, 'a chunk once none is held', 10000);
    assert.equal(n.msgs.filter((m) => m.type === 'cancel').length, 0, 'none taken back');
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  } finally {
    clearInterval(beat);
    await n.close();
    await srv.stop();
  }
});

test('a node with a GPU beside its CPU workers gets chunks sized for each', async () => {
  // A scripted node of 2 cores and one OpenCL device. Its results say which
  // backend computed them, and they say the device is 1,000 times as fast
  // as a CPU worker; each assign says which backend its chunks are sized for.
  const srv = await serve(pg.url, { extra: ['--open-enrolment'] });
  const n = await ScriptedNode.connect(srv.port);
  const harness = path.join(build, 'tests/wasm/node_actor');
  const seed = 23;
  try {
    await n.hello({ cores: 2, maxParallel: 3, backends: [
      { kind: 'cpu', device: 'cpu', memory: 1 << 30, units: 2 },
      { kind: 'opencl', device: 'a test GPU', memory: 1 << 30, units: 1 }] });
    const id = await submit(srv, option, 1e12, seed);
    const chunks = () => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id)
      .flatMap((m) => m.body.chunks.map((c) => ({ ...c, backend: c.backend ?? 0, ctxHash: m.body.ctx_hash })));
    await eventually(() => chunks().length === 3, 'a chunk for each worker', 30000);
    // while speeds are unknown: probes, the device's first
    assert.deepEqual(chunks().map((c) => c.backend), [1, 0, 0]);
    const probes = chunks();
    for (const c of probes) {
      const r = await run(harness, ['chunk', 'option', JSON.stringify(option), String(seed), String(c.start),
        String(c.count)]);
      assert.equal(r.code, 0, r.stderr);
      const data = Buffer.from(r.stdout.trim().split(' ')[1], 'hex');
      const ms = c.backend === 1 ? 1 : 1000; // the same items: the device in a thousandth of the time
      const { id: frame } = n.complete({ job: id, ctxHash: c.ctxHash, results: [{ chunk: c.chunk, token: c.token,
        start: c.start, count: c.count, elapsedMs: ms, data, backend: c.backend }] });
      const ack = await n.until((m) => m.id === frame && m.type !== 'assign', `the answer to chunk ${c.chunk}`);
      assert.equal(ack.type, 'complete_ack', JSON.stringify(ack.body));
      assert.equal(ack.body.outcomes[0].outcome, 'accepted');
    }
    await eventually(() => chunks().length === 6, 'a chunk for each worker again', 30000);
    const next = chunks().slice(3);
    const gpu = next.filter((c) => c.backend === 1), cpu = next.filter((c) => c.backend === 0);
    assert.equal(gpu.length, 1);
    assert.equal(cpu.length, 2);
    for (const c of cpu)
      assert.ok(Number(gpu[0].count) >= 100 * Number(c.count), `device chunk ${gpu[0].count}, CPU chunk ${c.count}`);
    // the speeds the coordinator keeps, one per backend, in the nodes list
    const live = (await call(srv, 'GET', `/api/nodes/${n.nodeId}`)).json;
    assert.deepEqual(live.backend_items_per_s, [1000, 1000000]);
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  } finally {
    await n.close();
    await srv.stop();
  }
});

test('a node back on a new connection is refused while its old one is heard from, and replaces it once silent', async () => {
  // A node whose connection went half-open says hello again on a new one
  // before the coordinator has closed the old. While the old session is
  // heard from, the new one is refused (EKEYINUSE: one session a key,
  // docs/coordinator.md); once the old has been silent for two heartbeat
  // intervals, the new one closes it and takes its place. Ending the old
  // session gives back the chunk taken through it, not the one the new
  // session holds.
  const HB = 1000;
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--heartbeat-ms', String(HB)] });
  const events = tailEvents(srv);
  const key = nodeKey();
  const old = await ScriptedNode.connect(srv.port, { key });
  let fresh, id;
  try {
    // live progress is not replayed: follow the events before anything happens
    await events.until((e) => e.type === 'snapshot', 'snapshot');
    await old.hello({ maxParallel: 1 });
    const heard = Date.now();
    id = await submit(srv, option, 1e9, 5);
    await old.until((m) => m.type === 'assign' && m.body.job === id, 'a chunk for the old session', 30000);
    const early = await ScriptedNode.connect(srv.port, { key });
    await assert.rejects(early.hello({ maxParallel: 1 }), new RegExp(`hello refused: ${E.EKEYINUSE} this node key has a ` +
      `session already: node ${old.nodeId}, from 127\\.0\\.0\\.1 since `));
    // Silent for two intervals (and not yet three, when the coordinator's
    // watch would close it anyway, nor long enough for its chunk to be
    // taken back as unlisted).
    await eventually(async () => Date.now() - heard > 2.2 * HB, 'two heartbeat intervals of silence', 5000);
    fresh = await ScriptedNode.connect(srv.port, { key });
    await fresh.hello({ maxParallel: 1 });
    assert.equal(fresh.nodeId, old.nodeId, 'the same node');
    const gone = await old.error(0, 'the old session closed');
    assert.equal(gone.body.code, E.ENOTREADY);
    const b = await fresh.until((m) => m.type === 'assign' && m.body.job === id, 'a chunk for the new session', 30000);
    fresh.heartbeat([b.body.chunks[0].chunk]);
    const p = await events.until((e) => e.type === 'job.progress' && e.job === id && e.reclaims >= 1,
      'progress after the old session ended');
    assert.equal(p.reclaims, 1, 'only the old session\'s chunk went back');
    const off = await events.until((e) => e.type === 'node.offline' && e.node === old.nodeId, 'the old session offline');
    assert.equal(off.reason, 'replaced');
    fresh.heartbeat([b.body.chunks[0].chunk]);
    const q = await events.until((e) => e.type === 'job.progress' && e.job === id && e.reclaims >= 1 &&
      e.claims_in_flight === 1 && e.items_in_flight === b.body.chunks[0].count, 'the new session\'s chunk still out');
    assert.equal(q.reclaims, 1);
  } finally {
    if (id) await call(srv, 'POST', `/api/jobs/${id}/cancel`);
    await events.close();
    await fresh?.close();
    await old.close();
    await srv.stop();
  }
});

test('a stale result from before a restart leaves the new claim of its chunk id held', async () => {
  // A job's chunk ids go on after the highest accepted one when the
  // coordinator starts again, so a chunk in flight at the restart can share
  // its id with a new claim. The node, back on a new connection, sends the
  // old chunk's result: it is stale, and the new claim of that id keeps
  // its slot (no other chunk takes it, and heartbeats renew its lease).
  // Three chunks of 1,000 items (speeds unknown: the smallest chunks).
  const items = 3000, seed = 27;
  const harness = path.join(build, 'tests/wasm/node_actor');
  const key = nodeKey();
  let srv = await serve(pg.url, { extra: ['--open-enrolment'] });
  const old = await ScriptedNode.connect(srv.port, { key });
  let fresh, id = 0, beat;
  const chunks = (n) => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id)
    .flatMap((m) => m.body.chunks.map((c) => ({ ...c, ctxHash: m.body.ctx_hash })));
  const result = async (c) => {
    const r = await run(harness, ['chunk', 'option', JSON.stringify(option), String(seed), String(c.start),
      String(c.count)]);
    assert.equal(r.code, 0, r.stderr);
    return { chunk: c.chunk, token: c.token, start: c.start, count: c.count, elapsedMs: 0,
      data: Buffer.from(r.stdout.trim().split(' ')[1], 'hex') };
  };
  try {
    await old.hello({ cores: 2, maxParallel: 2 });
    id = await submit(srv, option, items, seed);
    await eventually(() => chunks(old).length === 2, 'two chunks', 30000);
    const [first, second] = chunks(old);
    const done = old.complete({ job: id, ctxHash: first.ctxHash, results: [await result(first)] });
    const ack = await old.until((m) => m.id === done.id && m.type === 'complete_ack', 'the first chunk answered');
    assert.equal(ack.body.outcomes[0].outcome, 'accepted');
    await eventually(() => chunks(old).length === 3, 'the last chunk in the freed slot', 30000);
    await srv.stop();
    await old.close();

    srv = await serve(pg.url, { extra: ['--open-enrolment'] });
    fresh = await ScriptedNode.connect(srv.port, { key });
    beat = setInterval(() => fresh.heartbeat(chunks(fresh).map((c) => c.chunk)), 1000);
    await fresh.hello({ cores: 2, maxParallel: 2 });
    await eventually(() => chunks(fresh).length === 2, 'the two chunks not accepted, handed out again', 30000);
    const twin = chunks(fresh).find((c) => c.chunk === second.chunk);
    assert.ok(twin, `a new claim with id ${second.chunk}: ${chunks(fresh).map((c) => c.chunk)}`);
    assert.ok(!Buffer.from(twin.token).equals(Buffer.from(second.token)), 'another token');
    const late = fresh.complete({ job: id, ctxHash: second.ctxHash, results: [await result(second)] });
    const answer = await fresh.until((m) => m.id === late.id && m.type === 'complete_ack', 'the old chunk answered');
    assert.equal(answer.body.outcomes[0].outcome, 'stale');
    // Nothing of the job is left to hand out, so a freed slot would show.
    const live = (await call(srv, 'GET', `/api/nodes/${fresh.nodeId}`)).json;
    assert.equal(live.in_flight, 2, 'the new claim of that id is still held');
    const now = fresh.complete({ job: id, ctxHash: twin.ctxHash, results: [await result(twin)] });
    const took = await fresh.until((m) => m.id === now.id && m.type === 'complete_ack', 'the new chunk answered');
    assert.equal(took.body.outcomes[0].outcome, 'accepted');
    assert.equal((await call(srv, 'POST', `/api/jobs/${id}/cancel`)).status, 200);
  } finally {
    clearInterval(beat);
    await fresh?.close();
    await old.close();
    await srv.stop();
  }
});

// One chunk of 1,000 items (speeds unknown: the smallest chunks). Against
// its claim the node sends results that fail each of the coordinator's
// checks (empty data, a statistic cut short, one that does not decode,
// bytes left over, too few statistics for the context, another layout,
// one item short), a result for a range one item shorter than the claim's,
// and one computed with another work context; each is answered malformed
// with the reason that names the check it failed (the outcome
// "malformed" with `reason` to a node that announced the feature, "stale"
// with `malformed` to one that did not: it drops the chunk as stale),
// logged, and counted for the node and in /metrics. Then the good result is
// accepted under the same token: a malformed result does not end the claim.
async function malformedResults(features) {
  const items = 1000, seed = 31;
  const harness = path.join(build, 'tests/wasm/node_actor');
  const srv = await serve(pg.url, { extra: ['--open-enrolment'] });
  const n = await ScriptedNode.connect(srv.port);
  let id = 0, beat;
  const chunks = () => n.msgs.filter((m) => m.type === 'assign' && m.body.job === id)
    .flatMap((m) => m.body.chunks.map((c) => ({ ...c, ctxHash: m.body.ctx_hash })));
  const data = async (start, count, params = option) => {
    const r = await run(harness, ['chunk', 'option', JSON.stringify(params), String(seed), String(start),
      String(count)]);
    assert.equal(r.code, 0, r.stderr);
    return Buffer.from(r.stdout.trim().split(' ')[1], 'hex');
  };
  const answer = async (c, result, ctxHash = c.ctxHash) => {
    const sent = n.complete({ job: id, ctxHash, results: [{ chunk: c.chunk, token: c.token, start: c.start,
      count: c.count, elapsedMs: 0, ...result }] });
    const ack = await n.until((m) => m.id === sent.id && m.type === 'complete_ack', `an answer to frame ${sent.id}`);
    assert.equal(ack.body.outcomes.length, 1);
    assert.equal(ack.body.outcomes[0].chunk, c.chunk);
    return ack.body.outcomes[0];
  };
  // the outcome as this node is told it, with its reason
  const told = (o, why) => {
    if (features) {
      assert.equal(o.outcome, 'malformed', 'its own outcome, to a node that announced it');
      assert.equal(o.reason, why);
      assert.equal(o.malformed, undefined);
    } else {
      assert.equal(o.outcome, 'stale', 'on the wire as stale, for nodes that do not know malformed');
      assert.equal(o.malformed, why);
      assert.equal(o.reason, undefined);
    }
  };
  try {
    await n.hello({ cores: 1, maxParallel: 1, features });
    const was = await metrics(srv);
    // An open enrolment's node is public: the job names that tier.
    const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed,
      tiers: ['own', 'team', 'community', 'public'],
      verify: { trust: ['own', 'team', 'community', 'public'] } });
    assert.equal(r.status, 201, r.text);
    id = r.json.id;
    await eventually(() => chunks().length === 1, 'the chunk', 30000);
    const [c] = chunks();
    assert.deepEqual([c.start, c.count], [0, items]);
    beat = setInterval(() => n.heartbeat([c.chunk]), 1000);

    const good = await data(c.start, c.count);
    // where each of its five statistics starts (u32le length, then the bytes)
    const at = [0];
    for (let k = 0; k < 4; k++) at.push(at[k] + 4 + good.readUInt32LE(at[k]));
    const last = good.readUInt32LE(at[4]);
    assert.equal(at[4] + 4 + last, good.length, 'five statistics, nothing after them');
    const shape = '5 statistics (one per output)';
    const undecodable = Buffer.from(good);
    undecodable[at[0] + 5] ^= 0x7f; // statistic 0's version
    const fewer = await data(c.start, c.count, { ...option, greeks: false }); // price alone
    const reasons = [
      [Buffer.alloc(0), `the result data is empty: the chunk has ${shape}`],
      [good.subarray(0, good.length - 1), `statistic 4 (output 4) at byte ${at[4]} claims ${last} bytes, ${last - 1} are left`],
      [undecodable, 'statistic 0 (output 0) at byte 0 does not decode: malformed statistics encoding'],
      [Buffer.concat([good, Buffer.from([0])]), `1 bytes left over after the chunk's ${shape}`],
      [fewer, `the data ends at byte ${fewer.length}, before the length of statistic 1 (output 1): the chunk has ${shape}`],
      [await data(c.start, c.count, { ...option, K: 2 * option.K }), 'statistic 0 (output 0) has another layout ' +
        '(fixed-point step or histogram range) than the work context gives its output'],
      [await data(c.start, c.count - 1), 'statistic 0 (output 0) counts 999 values, a chunk of 1000 items makes 1000'],
    ];
    for (const [bytes, why] of reasons)
      told(await answer(c, { data: bytes }), why);

    const range = await answer(c, { count: c.count - 1, data: await data(c.start, c.count - 1) });
    told(range, `range differs from the claim's: items 0+${items - 1}, the claim is 0+${items}`);

    const context = await answer(c, { data: good }, Buffer.alloc(32, 7));
    told(context, 'work context differs from the job\'s');

    const refused = reasons.length + 2;
    const live = (await call(srv, 'GET', `/api/nodes/${n.nodeId}`)).json;
    assert.equal(live.malformed, refused, JSON.stringify(live));
    assert.equal(live.in_flight, 1, 'the claim is still held');
    const listed = (await call(srv, 'GET', '/api/nodes')).json.find((x) => x.id === n.nodeId);
    assert.equal(listed.malformed, refused);
    const m = await metrics(srv);
    const grew = (name) => (m[name] ?? 0) - (was[name] ?? 0);
    assert.equal(grew('simfarm_chunk_results_total{outcome="malformed"}'), refused);
    assert.equal(grew('simfarm_chunk_results_total{outcome="stale"}'), 0, 'nothing of it counted stale');
    const log = srv.stderr();
    const quoted = (x) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const why of [...reasons.map(([, w]) => w), 'range differs', 'work context differs'])
      assert.match(log, new RegExp(`node ${n.nodeId} job ${id} chunk ${c.chunk}: malformed result: ${quoted(why)}`));

    const ok = await answer(c, { data: good });
    assert.equal(ok.outcome, 'accepted', 'the good result is still taken under the same claim');
    assert.equal(ok.malformed, undefined);
    assert.equal(ok.reason, undefined);
    const job = await jobDone(srv, id);
    sameBits(job, await localRun(items, seed));
    assert.equal((await call(srv, 'GET', `/api/nodes/${n.nodeId}`)).json.chunks_done, 1);
  } finally {
    clearInterval(beat);
    await n.close();
    await srv.stop();
  }
}

test('a malformed result is answered malformed with its reason, and its claim stays for a good one', () =>
  malformedResults(['malformed']));

test('a node that announces no features is told a malformed result as stale, with the reason beside it', () =>
  malformedResults(undefined));
