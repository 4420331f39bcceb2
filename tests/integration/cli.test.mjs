// The simfarm binary as a user runs it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
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

test('every command reads its flags one way: --flag VALUE or --flag=VALUE, then usage errors named alike', async () => {
  const eq = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items=12', '--json']);
  assert.equal(eq.code, 0, eq.stderr);
  assert.equal(JSON.parse(eq.stdout).items, 12, eq.stdout);
  const neg = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '-3']);
  assert.equal(neg.code, 2);
  assert.match(neg.stderr, /--items must be an integer in \[1, \d+\], got '-3'/);
  for (const cmd of ['sim', 'serve', 'up', 'node', 'jobs']) {
    const unknown = await run(simfarm, [cmd, '--bogus=1']);
    assert.equal(unknown.code, 2, `${cmd}: ${unknown.stderr}`);
    assert.match(unknown.stderr, /unknown option '--bogus'/, cmd);
    const help = await run(simfarm, [cmd, '--help=yes']);
    assert.equal(help.code, 2, `${cmd}: ${help.stderr}`);
    assert.match(help.stderr, /'--help' takes no value/, cmd);
  }
  for (const [cmd, flag] of [['sim', '--seed'], ['serve', '--db'], ['up', '--var'], ['node', '--key'], ['jobs', '--token']]) {
    const r = await run(simfarm, [cmd, flag]);
    assert.equal(r.code, 2, `${cmd}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`'${flag}' needs a value`), cmd);
  }
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

// The statistics of a --json run, without what depends on the machine.
function statsOf(r) {
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  return { items: j.items, first: j.first, outputs: j.outputs, device: j.device };
}

test('simfarm sim gives the same bits on any number of cores and chunks', async () => {
  for (const [kernel, file, items] of [['option', 'examples/option.json', '200003'],
    ['combat', 'examples/combat.json', '3001']]) {
    const runs = [];
    for (const extra of [['--cores', '1'], ['--cores', '3'], ['--cores', '4', '--chunks', '7']]) {
      const r = await run(simfarm, ['sim', kernel, file, '--items', items, '--first', '12345', '--json', ...extra]);
      runs.push(statsOf(r));
    }
    assert.equal(runs[0].device, '1 thread');
    assert.equal(runs[1].device, '3 threads');
    assert.ok(runs[0].outputs.length > 1, `${kernel}: more than one output`);
    for (const r of runs.slice(1))
      assert.deepEqual(r.outputs, runs[0].outputs, kernel);
  }
  // A range too small to share runs on one thread, and says so.
  const small = statsOf(await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '10', '--cores',
    '8', '--json']));
  assert.equal(small.device, '1 thread');
});

test('simfarm sim refuses a bad --cores, and --cores with a device backend', async () => {
  for (const arg of ['0', '1025', 'two', '1.5']) {
    const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--cores', arg]);
    assert.equal(r.code, 2, arg);
    assert.match(r.stderr, new RegExp(`--cores must be an integer in \\[1, 1024\\], got '${arg.replace('.', '\\.')}'`));
  }
  const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--cores', '2', '--backend', 'opencl']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--cores is for the cpu backend; the opencl backend runs on its whole device/);
});

test('simfarm sim shows its progress on a terminal, and only there', async () => {
  // An arithmetic Asian option of 252 steps, about four seconds on one core
  // here: the line appears after a second. script(1) gives the run a terminal.
  const args = ['sim', 'option', 'examples/asian.json', '--items', '2400000'];
  const cmd = [simfarm, ...args, '--cores', '1'].join(' ');
  const tty = await run('script', ['-qfec', cmd, '/dev/null'], { timeoutMs: 120000 });
  assert.equal(tty.code, 0, tty.stdout);
  const took = Number(/^([\d.]+) s, /m.exec(tty.stdout)?.[1]);
  assert.ok(took >= 1.6, `the run took ${took} s: too short to be sure of a progress line; give it more items`);
  const progress = tty.stdout.split('\r')
    .filter((l) => /^ *\d+\.\d% of 2400000 items, [\d.e+]+ paths\/s, \d+ s to go\x1b\[K/.test(l));
  assert.ok(progress.length >= 1, `no progress line in ${JSON.stringify(tty.stdout.slice(0, 400))}`);
  // the line is cleared before the result is printed
  assert.match(tty.stdout, /\r\x1b\[Kkernel option, items \[0, 2400000\)/);
  const piped = await run(simfarm, [...args, '--cores', '2'], { timeoutMs: 120000 });
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stderr, '');
  assert.match(piped.stdout, /^price +5\.7/m);
});

test('simfarm sim runs a job submission\'s params, items and seed, and refuses what only a farm runs', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-sim-'));
  try {
    const params = { S0: 100, K: 95, sigma: 0.25, T: 0.5, antithetic: true };
    const file = (name, obj) => {
      const f = path.join(dir, name);
      fs.writeFileSync(f, JSON.stringify(obj));
      return f;
    };
    const sub = file('job.json', { kernel: 'option', name: 'a put', params, items: 5003, seed: 7 });
    const plain = file('params.json', params);
    const fromSub = statsOf(await run(simfarm, ['sim', 'option', sub, '--json']));
    const fromParams = statsOf(await run(simfarm, ['sim', 'option', plain, '--items', '5003', '--seed', '7', '--json']));
    assert.equal(fromSub.items, 5003);
    assert.deepEqual(fromSub.outputs, fromParams.outputs);
    // the flags win over the submission's items and seed
    const flagged = JSON.parse((await run(simfarm, ['sim', 'option', sub, '--items', '100', '--seed', '9', '--json'])).stdout);
    assert.equal(flagged.items, 100);
    assert.equal(flagged.seed, 9);

    const refused = [
      [sub, 'combat', /a job submission for kernel 'option', not 'combat'/],
      [file('sw.json', { kernel: 'option', params, items: 10, strategy: 'stat_weights', weights: [] }), 'option',
        /a job submission with strategy 'stat_weights', which runs on a farm \(simfarm submit\)/],
      [file('zero.json', { kernel: 'option', params, items: 0 }), 'option', /field 'items': must be an integer in \[1, /],
      [file('arr.json', { kernel: 'option', params: [1] }), 'option', /field 'params': must be an object/],
      [file('seed.json', { kernel: 'option', params, seed: -3 }), 'option', /field 'seed': must be an integer/],
      [file('bad.json', { kernel: 'option', params: { ...params, sigma: -1 } }), 'option', /field 'sigma'/],
    ];
    for (const [f, kernel, why] of refused) {
      const r = await run(simfarm, ['sim', kernel, f]);
      assert.equal(r.code, 2, `${f}: ${r.stdout}`);
      assert.match(r.stderr, why);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('simfarm sim shows the closed form beside an estimate that has one', async () => {
  const r = await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '400000']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^output +mean +std error +min +max +closed form +z$/m);
  const want = { price: 10.450584, delta: 0.636831, vega: 37.524035, rho: 53.232482, theta: -6.414028 };
  for (const [name, value] of Object.entries(want)) {
    const row = new RegExp(`^${name} +(\\S+) +(\\S+) +\\S+ +\\S+ +(\\S+) +(\\S+)$`, 'm').exec(r.stdout);
    assert.ok(row, `${name} row in\n${r.stdout}`);
    const [, mean, se, closed, z] = row.map(Number);
    assert.ok(Math.abs(closed - value) < 1e-6 * Math.abs(value) + 1e-6, `${name}: closed form ${closed}`);
    assert.ok(Math.abs(z - (mean - closed) / se) < 0.01, `${name}: z ${z}`);
    assert.ok(Math.abs(z) < 5, `${name}: ${mean} is ${z} standard errors from ${closed}`);
  }
  const json = JSON.parse((await run(simfarm, ['sim', 'option', 'examples/option.json', '--items', '1000',
    '--json'])).stdout);
  assert.deepEqual(Object.keys(json.closed_form), ['price', 'delta', 'vega', 'rho', 'theta']);
  assert.ok(Math.abs(json.closed_form.price - 10.450584) < 1e-6);
  // an arithmetic Asian option has none: no column, no key
  const asian = await run(simfarm, ['sim', 'option', 'examples/asian.json', '--items', '1000']);
  assert.match(asian.stdout, /^output +mean +std error +min +max$/m);
  const aj = JSON.parse((await run(simfarm, ['sim', 'option', 'examples/asian.json', '--items', '1000', '--json'])).stdout);
  assert.equal(aj.closed_form, undefined);
});
