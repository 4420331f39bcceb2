// The simfarm binary as a user runs it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');

test('version names the libraries and finds the OpenCL device', async () => {
  const r = await run(simfarm, ['version']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^simfarm \d+\.\d+\.\d+/);
  for (const lib of ['libuv', 'libsodium', 'msgpack-c', 'libwebsockets', 'libpq'])
    assert.match(r.stdout, new RegExp(`^  ${lib} +\\S`, 'm'), lib);
  assert.match(r.stdout, /^  opencl +Portable Computing Language: /m, 'pocl device not listed');
});

test('an unknown command is a usage error with exit code 2', async () => {
  const r = await run(simfarm, ['frobnicate']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown command 'frobnicate'/);
  assert.match(r.stderr, /usage: simfarm/);
});

test('help lists the commands', async () => {
  const r = await run(simfarm, ['help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /^  version /m);
});

test('simfarm sim reads its numbers as decimal: 010 is ten items, 0x10 a usage error', async () => {
  const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '010', '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).items, 10, r.stdout);
  const hex = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '0x10']);
  assert.equal(hex.code, 2);
  assert.match(hex.stderr, /--items must be an integer in \[1, \d+\], got '0x10'/);
});

test('simfarm sim reads whole numbers in exponent notation exactly, and refuses the rest', async () => {
  for (const [arg, items] of [['2.5e3', 2500], ['1E2', 100], ['2.50e1', 25], ['12.0', 12]]) {
    const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', arg, '--json']);
    assert.equal(r.code, 0, `${arg}: ${r.stderr}`);
    assert.equal(JSON.parse(r.stdout).items, items, arg);
  }
  for (const arg of ['2.55e1', '1e-3', '1e', '.e5', '1e20', '2.81474976710657e14']) {
    const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', arg]);
    assert.equal(r.code, 2, `${arg}: ${r.stdout}`);
    assert.match(r.stderr, new RegExp(`--items must be an integer in \\[1, 281474976710656\\], got '${arg.replace(/\./g, '\\.')}'`));
  }
  const seed = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '4', '--seed',
    '1.8446744073709551615e19', '--json']);
  assert.equal(seed.code, 0, seed.stderr);
  assert.match(seed.stdout, /"seed":18446744073709551615,/);
});
