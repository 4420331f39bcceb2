// The smoke program (tests/wasm/smoke.c) built natively and with emcc must
// print the same transcript, and both must match RFC 8032 and FIPS 180-2.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, transcript, wasmEnv } from '../lib/proc.mjs';

const golden = {
  'ed25519.pk': 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
  'ed25519.sig.empty': 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  'ed25519.verify.empty': 'ok',
  'ed25519.sig.72': '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  'ed25519.verify.72': 'ok',
  'ed25519.verify.tampered': 'bad',
  'sha256.abc': 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
  'msgpack.decoded': "{s'v':u1,s'type':s'hello',s'id':u18446744073709551615,s'n':i-9007199254740993,s'x':f0.10000000000000001,s'b':b007fff}",
};

async function both() {
  const native = await run(path.join(build, 'tests/wasm/smoke'));
  const wasm = await run(process.execPath, [path.join(build, 'wasm/smoke.js')], { env: wasmEnv });
  assert.equal(native.code, 0, `native smoke failed: ${native.stderr}`);
  assert.equal(wasm.code, 0, `wasm smoke failed: ${wasm.stderr}`);
  return { native, wasm };
}

test('native and WebAssembly builds print the same transcript', async () => {
  const { native, wasm } = await both();
  assert.ok(native.stdout.length > 0);
  assert.equal(wasm.stdout, native.stdout);
});

test('both builds match the RFC 8032 and SHA-256 vectors', async () => {
  const { native, wasm } = await both();
  for (const [name, out] of [['native', native.stdout], ['wasm', wasm.stdout]]) {
    const t = transcript(out);
    for (const [key, want] of Object.entries(golden))
      assert.equal(t.get(key), want, `${name}: ${key}`);
  }
});

test('msgpack bytes are the canonical encoding of the envelope', async () => {
  const { wasm } = await both();
  const hex = transcript(wasm.stdout).get('msgpack.bytes');
  // fixmap(6), "v": 1, "type": "hello", "id": uint64 max, "n": int64, "x": float64 0.1, "b": bin8
  assert.equal(hex, '86a17601a474797065a568656c6c6fa26964cfffffffffffffffffa16ed3ffdfffffffffffffa178cb3fb999999999999aa162c403007fff');
});
