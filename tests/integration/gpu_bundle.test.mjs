// `make gpu-bundle`'s folder, which carries the CUDA and OpenCL checks to a
// GPU machine without the build's packages: its programs find every library
// but the C library's own in its lib/, and its gpu-check.sh runs them. Here
// (no GPU) OpenCL runs on pocl and must give the CPU backend's bits; CUDA
// must fail with the reason named.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-gpu-bundle-'));
const dir = path.join(tmp, 'bundle');
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const cuda = await run(path.join(build, 'bin/simfarm'), ['sim', 'option', 'examples/option.json', '--items', '1',
  '--backend', 'cuda']);
const noNvcc = /built without nvcc/.test(cuda.stderr) ? 'simfarm was built without nvcc' : false;

const own = /^(libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so\.|^ld-linux/;

test('the GPU bundle carries its libraries and its checks run', { skip: noNvcc }, async () => {
  const b = await run(path.join(top, 'scripts/gpu-bundle.sh'), [dir], {
    env: { ...process.env, BUILD: path.relative(top, build) }, cwd: top, timeoutMs: 120000 });
  assert.equal(b.code, 0, b.stderr);
  assert.match(b.stdout, /run \.\/gpu-check\.sh there/);

  // every library a program loads, with the bundle's lib/ first, is the
  // bundle's or the C library's own
  const lib = path.join(dir, 'lib');
  for (const prog of fs.readdirSync(path.join(dir, 'bin'))) {
    const l = await run('ldd', [path.join(dir, 'bin', prog)], { env: { ...process.env, LD_LIBRARY_PATH: lib } });
    assert.equal(l.code, 0, l.stderr);
    assert.doesNotMatch(l.stdout, /not found/, `${prog}:\n${l.stdout}`);
    for (const [, name, where] of l.stdout.matchAll(/^\s*(\S+) => (\/\S+)/gm))
      assert.ok(where.startsWith(`${lib}/`) || own.test(name), `${prog} loads ${name} from ${where}`);
  }

  // the CUDA kernels' source and flags, which gpu-check.sh builds again
  // where the driver is older than the toolkit: they build with this nvcc
  const flags = fs.readFileSync(path.join(dir, 'kernels.fatbin.flags'), 'utf8').trim().split(/\s+/);
  assert.ok(flags.includes('-fmad=false'), flags.join(' '));
  const nvcc = ['/usr/local/cuda/bin/nvcc', ...(process.env.PATH ?? '').split(':').map((d) => path.join(d, 'nvcc'))]
    .find((f) => fs.existsSync(f));
  if (nvcc) {
    const n = await run(nvcc, ['-fatbin', ...flags, 'sim/kernels.cu', '-o', path.join(tmp, 'k.fatbin')],
      { cwd: path.join(dir, 'src'), timeoutMs: 300000 });
    assert.equal(n.code, 0, n.stderr);
    assert.ok(fs.statSync(path.join(tmp, 'k.fatbin')).size > 10000);
  }

  const c = await run(path.join(dir, 'gpu-check.sh'), [], {
    env: { ...process.env, GPU_CHECK_ITEMS: '20000', GPU_CHECK_BENCH: '0' }, cwd: tmp, timeoutMs: 600000 });
  const out = c.stdout + c.stderr;
  // OpenCL (pocl): the device, the unit test, and 16 runs equal to the CPU's
  assert.match(out, /^PASS opencl: opens a device: /m, out);
  assert.match(out, /^PASS test_sim_opencl$/m, out);
  const same = [...out.matchAll(/^PASS opencl: examples\/\S+\.json, items \[\d+, \+20000\), (1|13) chunk\(s\): result digest sha256:[0-9a-f]{64}$/gm)];
  assert.equal(same.length, 16, out);
  // CUDA: no driver or no device on this machine, said as such
  const cudaOpened = /^PASS cuda: opens a device/m.test(out);
  if (!cudaOpened) assert.match(out, /^FAIL cuda: opens a device\n\s+.*CUDA: (no driver|no device)/m, out);
  const [, passed, failed] = out.match(/^(\d+) passed, (\d+) failed$/m) ?? [];
  assert.equal(Number(failed), cudaOpened ? 0 : 1, out);
  assert.equal(Number(passed), 18 + (cudaOpened ? 19 : 0), out);
  assert.equal(c.code, cudaOpened ? 0 : 1, out);
});
