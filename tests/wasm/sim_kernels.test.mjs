// The kernels (tests/wasm/sim_kernels.c) built natively and with emcc must
// give the same bytes: every statistic of every parameter set, whole and
// chunked, on the CPU backend natively, under node as WebAssembly, and
// (native build) on OpenCL through pocl.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, transcript, wasmEnv } from '../lib/proc.mjs';

let cached;
async function both() {
  if (!cached) {
    const [native, wasm] = await Promise.all([
      run(path.join(build, 'tests/wasm/sim_kernels'), [], { timeoutMs: 120000 }),
      run(process.execPath, [path.join(build, 'wasm/sim_kernels.js')], { env: wasmEnv, timeoutMs: 120000 }),
    ]);
    assert.equal(native.code, 0, `native sim_kernels failed: ${native.stderr}`);
    assert.equal(wasm.code, 0, `wasm sim_kernels failed: ${wasm.stderr}`);
    cached = { native: transcript(native.stdout), wasm: transcript(wasm.stdout), raw: native.stdout };
  }
  return cached;
}

const sets = ['european_call', 'european_put_anti', 'asian_arith', 'asian_geom_greeks',
  'barrier_up_out', 'barrier_down_in', 'combat', 'combat_weights'];

test('WebAssembly prints the same transcript as the native build', async () => {
  const { native, wasm } = await both();
  const cpuKeys = [...native.keys()].filter((k) => !k.startsWith('opencl.'));
  assert.ok(cpuKeys.length > 40, 'transcript too short');
  for (const k of cpuKeys) assert.equal(wasm.get(k), native.get(k), k);
  assert.equal([...wasm.keys()].length, cpuKeys.length);
});

test('Philox matches the Random123 vector in both builds', async () => {
  const { native, wasm } = await both();
  for (const t of [native, wasm]) assert.equal(t.get('philox.pi'), 'd16cfe0994fdcceb5001e42024126ea1');
});

test('chunked runs give the same bytes as whole runs', async () => {
  const { wasm } = await both();
  let n = 0;
  for (const [k, v] of wasm) {
    if (!k.startsWith('cpu.') || k.endsWith('.mean')) continue;
    assert.equal(wasm.get(k.replace(/^cpu\./, 'chunked.')), v, k);
    n++;
  }
  assert.ok(n >= sets.length);
});

test('OpenCL (pocl) gives the same bytes as the CPU and WebAssembly', async () => {
  const { native, wasm } = await both();
  let n = 0;
  for (const [k, v] of native) {
    if (!k.startsWith('opencl.') || k.endsWith('.mean')) continue;
    assert.equal(v, wasm.get(k.replace(/^opencl\./, 'cpu.')), k);
    n++;
  }
  for (const s of sets) assert.ok(native.has(`opencl.${s}.mean`), `no OpenCL result for ${s}`);
  assert.ok(n >= sets.length);
});
