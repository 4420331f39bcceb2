// The browser node's logic under node: the node actor (tests/wasm/node_actor.c)
// built natively and with emcc goes through the same scripted sessions and
// must print the same transcript (states, signed hellos and completions,
// result bytes); the module the browser loads (web/node/simfarm-node.js)
// computes a chunk to the same bytes as the native node, and refuses a
// work context it cannot read with a message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import zlib from 'node:zlib';
import { build, run, top, wasmEnv } from '../lib/proc.mjs';

const native = path.join(build, 'tests/wasm/node_actor');
const wasm = path.join(build, 'wasm/node_actor.js');
const european = '{"S0": 100, "K": 100, "r": 0.05, "sigma": 0.2, "T": 1}';

let cached;
function transcripts() {
  cached ??= Promise.all([
    run(native, [], { timeoutMs: 60000 }),
    run(process.execPath, [wasm], { env: wasmEnv, timeoutMs: 60000 }),
  ]);
  return cached;
}

// The bundle as the browser's workers load it (web/package.json makes .js
// files ES modules for node, so it is evaluated as the script it is; the
// wasm bytes are handed over, as emcc 3.1.6 would fetch them under node 20).
async function bundle() {
  const file = path.join(top, 'web/node/simfarm-node.js');
  const mod = { exports: {} };
  new Function('module', 'exports', 'require', '__filename', '__dirname', fs.readFileSync(file, 'utf8'))(
    mod, mod.exports, createRequire(file), file, path.dirname(file));
  return mod.exports({ wasmBinary: fs.readFileSync(file.replace(/\.js$/, '.wasm')) });
}

test('the node actor goes through the same sessions natively and as WebAssembly', async () => {
  const [n, w] = await transcripts();
  assert.equal(n.code, 0, n.stderr + n.stdout);
  assert.equal(w.code, 0, w.stderr + w.stdout);
  assert.equal(w.stdout, n.stdout);
});

test('the transcript shows signatures, the state machine and the results', async () => {
  const [n] = await transcripts();
  const out = n.stdout;
  const count = (re) => (out.match(re) || []).length;
  assert.equal(count(/^hello success, for another host signature does not verify$/mg), 3, 'three signed hellos');
  assert.equal(count(/^complete job 3 chunk \d+ .* signature success, tampered signature does not verify, context ok$/mg),
    9, 'nine signed completions (one signed twice)');
  assert.match(out, /^node> complete lost with the connection$/m);
  assert.match(out, /^state coordinator unavailable: test drop$/m);
  assert.match(out, /^connect \(session 2\) after the backoff: 1 s \+- 25 %$/m);
  // Paused with a chunk in hand: the coordinator is told, the chunk is finished.
  assert.match(out, /host: pause\n(.*\n)*?bye draining\nstate paused\n(.*\n)*?complete job 3 chunk 13 /);
  assert.match(out, /host: resume\n(.*\n)*?bye leaving\n(.*\n)*?state starting: resuming\nconnect \(session 3\)\n/);
  // a completion refused with EREPLAYOLD is signed again, later, and sent
  // (the drain waits for its answer, not for the refused one), chunks
  // whose context does not open are dropped (no heartbeat lists them, so
  // their leases end), then the drain
  const again = out.match(/^complete job 3 (chunk \d+) .*\n(result \d+ [0-9a-f]+)\ncoordinator> error for that completion: .*\n/m);
  assert.ok(again, 'a refused completion');
  assert.match(out.slice(again.index + again[0].length), new RegExp('^log warn the coordinator says: .*\\(code -30\\)\\n' +
    'log info signing 1 results again\\nnode> complete\\n' +
    `complete job 3 ${again[1]} .* signature success, tampered signature does not verify, context ok\\n` +
    `${again[2]}\\nsigned again, later: yes\\n`));
  assert.match(out, /^log warn job 4 cannot run here: .*; 2 chunks left to other nodes\n/m);
  // Three workers, then one while the three compute: each says so in a
  // heartbeat at once; the third worker takes a chunk, and the chunk after
  // the drop waits for worker 0 while workers 1 and 2 finish theirs.
  assert.match(out, /^log info 3 workers, from 2\nnode> heartbeat\nheartbeat max_parallel 3, 0 in flight\n/m);
  // the chunk sized for backends[1] goes to worker 2, that backend's, and
  // its result says so
  assert.match(out, /^compute worker 2 chunk 17, /m);
  assert.match(out, /^complete job 3 chunk 17 \[7000, \+1000\) on backend 1 signature success/m);
  assert.equal((out.match(/ on backend 1 /g) || []).length, 1, 'only that chunk on backend 1');
  assert.match(out, /^log info 1 worker, from 3\nnode> heartbeat\nheartbeat max_parallel 1, 3 in flight\n/m);
  assert.match(out, /^compute worker 0 chunk 18, /m);
  for (const c of [15, 16, 17, 18]) assert.match(out, new RegExp(`^complete job 3 chunk ${c} .* signature success`, 'm'));
  assert.match(out, /bye draining\nnode> bye\nbye leaving\n.*drained, leaving \(9 chunks computed\)\nstate stopped\nstopped 0\n$/);
  for (const c of [10, 11, 13, 18]) assert.match(out, new RegExp(`^result ${c} [0-9a-f]{64,}$`, 'm'));
  assert.doesNotMatch(out, /wrong/);
  // The work context is fetched once: later chunks of the job, in later
  // sessions too, use the cached one.
  assert.equal(count(/^ctx_req job 3, hash ok$/mg), 1, 'one ctx_req');
  // It announces the malformed outcome, and reads it in both forms.
  assert.equal(count(/^hello reads the outcome malformed: yes$/mg), 3);
  assert.match(out, /^log warn job 3 chunk 15: the coordinator refused the result as malformed: test: the stale form$/m);
  assert.match(out, /^log warn job 3 chunk 16: the coordinator refused the result as malformed: test: its own$/m);
});

test('the browser bundle computes a chunk to the native bytes', async () => {
  const ctxRun = await run(native, ['ctx', 'option', european, '11']);
  assert.equal(ctxRun.code, 0, ctxRun.stderr);
  const ctx = Buffer.from(ctxRun.stdout.trim().split(' ')[1], 'hex');
  const hash = crypto.createHash('sha256').update(ctx).digest();
  const [n] = await transcripts();
  const want = n.stdout.match(/^result 11 ([0-9a-f]+)$/m)[1]; // chunk 11: items [1000, 2000)

  const m = await bundle();
  const h = m._ndw_alloc(32);
  m.HEAPU8.set(hash, h);
  const w = m._ndw_alloc(ctx.length);
  m.HEAPU8.set(ctx, w);
  assert.equal(m._ndw_compute(h, w, ctx.length, 1000, 0, 1000, 0, 0), 0);
  const p = m._ndw_result();
  assert.equal(Buffer.from(m.HEAPU8.subarray(p, p + m._ndw_result_len())).toString('hex'), want);

  // A context that is not one: an error code and a message, no result.
  const junk = Buffer.from('not a work context');
  m.HEAPU8.set(crypto.createHash('sha256').update(junk).digest(), h);
  const j = m._ndw_alloc(junk.length);
  m.HEAPU8.set(junk, j);
  assert.notEqual(m._ndw_compute(h, j, junk.length, 0, 0, 10, 0, 0), 0);
  assert.equal(m._ndw_result_len(), 0);
  const e = m._ndw_error();
  const msg = Buffer.from(m.HEAPU8.subarray(e, m.HEAPU8.indexOf(0, e))).toString();
  assert.ok(msg.length > 0, 'an error message');
});

test('the harness refuses bad arguments', async () => {
  const r = await run(native, ['sim', 'option', european, 'many', '1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /ITEMS and SEED are integers/);
});

test('the browser node downloads at most 400 KB gzipped', () => {
  const files = ['web/node/simfarm-node.wasm', 'web/node/simfarm-node.js', 'web/node/node-worker.js',
    'web/node/compute-worker.js', 'web/contribute.html', 'web/contribute.js', 'web/contribute.css', 'web/js/api.js'];
  let total = 0;
  for (const f of files) total += zlib.gzipSync(fs.readFileSync(path.join(top, f)), { level: 9 }).length;
  assert.ok(total > 50000, `${total} bytes: is the module empty?`);
  assert.ok(total <= 400000, `${total} bytes gzipped`);
});
