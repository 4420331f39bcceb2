// The runtime's behavioural tests (tests/check/check_rt_behaviour.c) built
// with emcc pass under node, case for case as in the native build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, wasmEnv } from '../lib/proc.mjs';

function cases(stdout) {
  return stdout.split('\n').filter((l) => /^(ok|not ok) /.test(l));
}

test('runtime behaviour: WebAssembly port passes the native suite', async () => {
  const native = await run(path.join(build, 'tests/check/check_rt_behaviour'), [], { timeoutMs: 120000 });
  const wasm = await run(process.execPath, [path.join(build, 'wasm/check_rt_behaviour.js')],
    { env: wasmEnv, timeoutMs: 120000 });
  assert.equal(native.code, 0, native.stdout + native.stderr);
  assert.equal(wasm.code, 0, wasm.stdout + wasm.stderr);
  const summary = wasm.stdout.match(/^(\d+) passed, 0 failed$/m);
  assert.ok(summary, 'no clean summary line');
  assert.equal(Number(summary[1]), cases(wasm.stdout).length);
  assert.ok(cases(wasm.stdout).length >= 11);
  assert.deepEqual(cases(wasm.stdout), cases(native.stdout));
});

test('runtime behaviour: the WebAssembly port under AddressSanitizer', async () => {
  const r = await run(process.execPath, [path.join(build, 'wasm-asan/check_rt_behaviour.js')],
    { env: wasmEnv, timeoutMs: 180000 });
  assert.doesNotMatch(r.stdout + r.stderr, /AddressSanitizer/, r.stderr);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const summary = r.stdout.match(/^(\d+) passed, 0 failed$/m);
  assert.ok(summary, r.stdout);
  assert.equal(Number(summary[1]), cases(r.stdout).length);
});
