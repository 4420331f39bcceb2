// The golden vectors of the wire protocol (tests/vectors/proto.vec), decoded,
// re-encoded and signature-checked by tests/wasm/proto_vectors.c built
// natively and with emcc: both must print the same transcript, every good
// frame must come back bit for bit, and every bad one must fail as expected.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { build, top, run, transcript, wasmEnv } from '../lib/proc.mjs';

const TEST_PK = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';

function vectors() {
  const text = fs.readFileSync(path.join(top, 'tests/vectors/proto.vec'), 'utf8');
  const frames = new Map();
  const expect = new Map();
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f[0] === 'frame') frames.set(f[1], f[2]);
    else if (f[0] === 'expect') expect.set(f[1], f[2]);
  }
  return { frames, expect };
}

const { frames, expect } = vectors();
const args = [...frames].map(([name, hex]) => `${name}=${hex}`);

let cached;
async function both() {
  cached ??= (async () => {
    const native = await run(path.join(build, 'tests/wasm/proto_vectors'), args);
    const wasm = await run(process.execPath, [path.join(build, 'wasm/proto_vectors.js'), ...args], { env: wasmEnv });
    assert.equal(native.code, 0, `native proto_vectors failed: ${native.stderr}`);
    assert.equal(wasm.code, 0, `wasm proto_vectors failed: ${wasm.stderr}`);
    return { native, wasm };
  })();
  return cached;
}

test('the vector file holds good and bad frames of every message type', () => {
  const types = ['challenge', 'hello', 'welcome', 'heartbeat', 'assign', 'ctx_req', 'ctx',
    'complete', 'complete_ack', 'cancel', 'config', 'error', 'bye'];
  for (const t of types) assert.ok(frames.has(t), `no vector named ${t}`);
  assert.ok(expect.size >= 10, 'too few bad vectors');
});

test('native and WebAssembly builds print the same transcript', async () => {
  const { native, wasm } = await both();
  assert.ok(native.stdout.split('\n').length > frames.size);
  assert.equal(wasm.stdout, native.stdout);
});

for (const [name, label] of [['native', 'native'], ['wasm', 'WebAssembly']]) {
  test(`${label}: every vector decodes, re-encodes and verifies as the file says`, async () => {
    const t = transcript((await both())[name].stdout);
    assert.equal(t.get('key.pk'), TEST_PK);
    for (const [v] of frames) {
      const want = expect.get(`${v}.decode`) ?? 'OK';
      assert.equal(t.get(`${v}.decode`), want, `${v}.decode`);
      if (want !== 'OK') continue;
      assert.equal(t.get(`${v}.encode`), 'OK', `${v}.encode`);
      assert.equal(t.get(`${v}.same`), 'yes', `${v}: re-encoding is not bit-exact`);
      if (t.has(`${v}.payload_same`)) assert.equal(t.get(`${v}.payload_same`), 'yes', `${v}.payload_same`);
      if (t.has(`${v}.verify`)) assert.equal(t.get(`${v}.verify`), expect.get(`${v}.verify`) ?? 'OK', `${v}.verify`);
    }
    assert.equal(t.get('unknown_type.id'), '9', 'an unknown type keeps its id for the error reply');
    assert.equal(t.get('ctx.ctx_opens'), 'yes variants=1 every=false', 'the ctx vector is a work context a node opens');
  });
}
