// The local reference of farmed option jobs: `simfarm sim` over the same
// items and seed in one process (examples/option.json), and a finished
// job's result against it to the last bit: the two digests (SHA-256 of
// the result's bytes, docs/kernels.md) are equal, and the figures too, so
// that a failure shows which output differs.
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, top } from './proc.mjs';

export async function localRun(items, seed) {
  const r = await run(path.join(build, 'bin/simfarm'), ['sim', 'option', path.join(top, 'examples/option.json'),
    '--items', String(items), '--seed', String(seed), '--json'], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

export function sameBits(job, local) {
  assert.equal(job.state, 'complete');
  assert.deepEqual(job.result.outputs.map(({ name, count, mean, stderr, min, max }) =>
    ({ name, count, mean, stderr, min, max })), local.outputs);
  assert.match(local.digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(job.result.digest, local.digest, 'the result\'s bytes differ from the local run\'s');
}
