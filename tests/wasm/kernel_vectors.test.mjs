// The kernels' stage vectors (tests/vectors/kernels.vec) against
// tests/wasm/kernel_vectors.c built natively and with emcc: both builds
// must print the committed file line for line (every traced item's stages
// and the CPU backend's result bytes; under node that is the WebAssembly
// kernels), and the native build's OpenCL run (pocl here) must give the
// file's result lines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, top, run, wasmEnv } from '../lib/proc.mjs';

const file = fs.readFileSync(path.join(top, 'tests/vectors/kernels.vec'), 'utf8');
const resultLines = (text) => text.split('\n').filter((l) => l.startsWith('result '));

// The first line where got differs from the file, for the message.
function sameText(got, what) {
  const a = file.split('\n'), b = got.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) assert.fail(`${what}: line ${i + 1} differs\n  file: ${a[i]?.slice(0, 300)}\n  got:  ${b[i]?.slice(0, 300)}`);
  }
}

// Every set, in the file's order: a regenerated file that drops or renames
// one, or adds one not listed here, fails. EVERY: the sets of several
// variants computed together (a work context with every=true).
const SETS = ['european_call', 'european_put', 'european_call_antithetic', 'asian_arithmetic_12',
  'asian_arithmetic_252', 'asian_geometric_12', 'asian_geometric_252', 'barrier_up_out', 'barrier_down_in',
  'barrier_up_in', 'barrier_down_out', 'european_greeks_antithetic', 'european_put_greeks', 'asian_arithmetic_greeks', 'asian_geometric_greeks',
  'barrier_greeks_antithetic', 'combat', 'combat_weights'];
const EVERY = ['option_every', 'combat_every'];

test('the file holds stages and results of every kernel and style', () => {
  assert.deepEqual(file.split('\n').filter((l) => l.startsWith('set ')).map((l) => l.split(' ')[1]), SETS);
  for (const s of SETS) {
    assert.match(file, new RegExp(`^out ${s} `, 'm'), s);
    assert.equal(resultLines(file).filter((l) => l.split(' ')[1] === s).length, 4, s);
  }
  assert.deepEqual(file.split('\n').filter((l) => l.startsWith('variants ')).map((l) => l.split(' ')[1]), EVERY);
  for (const s of EVERY) {
    assert.match(file, new RegExp(`^variants ${s} \\S+ seed=\\d+ n=(\\d+) every=1$`, 'm'), s);
    const n = Number(new RegExp(`^variants ${s} \\S+ seed=\\d+ n=(\\d+)`, 'm').exec(file)[1]);
    assert.ok(n >= 2, `${s}: several variants`);
    assert.equal(file.split('\n').filter((l) => l.startsWith(`variant ${s} `)).length, n, s);
    assert.equal(resultLines(file).filter((l) => l.split(' ')[1] === s).length, 4, s);
  }
});

test('the native build prints the committed vectors', async () => {
  const r = await run(path.join(build, 'tests/wasm/kernel_vectors'), ['gen'], { timeoutMs: 120000 });
  assert.equal(r.code, 0, `kernel_vectors gen failed: ${r.stderr}`);
  sameText(r.stdout, 'native');
});

// Into a file: node cuts a pipe's pending output when an emcc program
// exits, and the file is larger than a pipe holds.
test('the WebAssembly build prints the committed vectors', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvec-'));
  const out = path.join(dir, 'kernels.vec');
  try {
    const r = await run('/bin/sh', ['-c', 'exec "$0" "$1" gen > "$2"', process.execPath,
      path.join(build, 'wasm/kernel_vectors.js'), out], { env: wasmEnv, timeoutMs: 120000 });
    assert.equal(r.code, 0, `wasm kernel_vectors gen failed: ${r.stderr}`);
    sameText(fs.readFileSync(out, 'utf8'), 'WebAssembly');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('OpenCL gives the result bytes of the vectors', async (t) => {
  const r = await run(path.join(build, 'tests/wasm/kernel_vectors'), ['results', 'opencl'], { timeoutMs: 300000 });
  assert.equal(r.code, 0, `kernel_vectors results opencl failed: ${r.stderr}`);
  if (r.stdout.startsWith('skip ')) {
    t.skip(r.stdout.slice(5).trim());
    return;
  }
  const want = resultLines(file), got = resultLines(r.stdout);
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) assert.equal(got[i], want[i], want[i].split(' ').slice(0, 4).join(' '));
});
