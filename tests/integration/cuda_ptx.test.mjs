// The CUDA kernels' arithmetic, read in their PTX (build/sim/kernels.ptx,
// compiled from sim/kernels.cu with the fatbin's own flags): bit-identity
// with the other backends needs every double operation rounded on its own.
// No fused multiply-add (nvcc -fmad=false), every add, sub and mul with an
// explicit rounding mode (ptxas may fuse those without one), no approximate
// instruction (--use_fast_math's) and no flush of denormals to zero. This
// holds the CUDA build to the determinism rules on machines without a GPU,
// where its results cannot be compared. SIM_PTX=file checks another PTX file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { build, run } from '../lib/proc.mjs';

const ptxPath = process.env.SIM_PTX ?? path.join(build, 'sim/kernels.ptx');
const cuda = await run(path.join(build, 'bin/simfarm'), ['sim', 'option', 'examples/option.json', '--items', '1',
  '--backend', 'cuda']);
const noNvcc = /built without nvcc/.test(cuda.stderr) ? 'simfarm was built without nvcc' : false;

// "name.mods operands" lines of instructions, with their line numbers
function instructions(text) {
  const out = [];
  text.split('\n').forEach((line, i) => {
    const m = line.match(/^\s+([a-z][a-z0-9]*(?:\.[a-z0-9]+)*)\s/);
    if (m) out.push({ op: m[1], line: i + 1, text: line.trim() });
  });
  return out;
}

function offenders(ins, re) {
  return ins.filter((x) => re.test(x.op)).slice(0, 5).map((x) => `line ${x.line}: ${x.text}`);
}

test('the CUDA kernels round every floating-point operation on its own', { skip: noNvcc }, () => {
  assert.ok(fs.existsSync(ptxPath), `${ptxPath} is missing: make builds it where nvcc is`);
  const ptx = fs.readFileSync(ptxPath, 'utf8');
  for (const entry of ['sim_option_cuda', 'sim_combat_cuda'])
    assert.match(ptx, new RegExp(`\\.entry ${entry}\\(`), `no entry ${entry}`);
  const ins = instructions(ptx);
  const fused = offenders(ins, /^(fma|mad)(\.[a-z0-9]+)*\.f(16|32|64)$/);
  assert.deepEqual(fused, [], `fused multiply-add:\n${fused.join('\n')}`);
  const free = offenders(ins, /^(add|sub|mul)(\.sat)?\.f(32|64)$/);
  assert.deepEqual(free, [], `no rounding mode (ptxas may fuse these):\n${free.join('\n')}`);
  const approx = offenders(ins, /\.(approx|ftz)(\.|$)/);
  assert.deepEqual(approx, [], `approximate or flushing to zero:\n${approx.join('\n')}`);
  // and the kernels' arithmetic was there to be checked
  const rounded = ins.filter((x) => /^(add|sub|mul)\.rn\.f64$/.test(x.op)).length;
  assert.ok(rounded > 200, `only ${rounded} rounded double add, sub and mul instructions`);
});
