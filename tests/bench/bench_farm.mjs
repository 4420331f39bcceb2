// Benchmarks of a whole farm on this machine: PostgreSQL, `simfarm serve`
// and one `simfarm node` using every core.
//
//   node_efficiency         the share of a node's wall time (workers × the
//                           jobs' duration, submit to result) its workers
//                           spent in kernels, for a warm-up job and then a
//                           long European job of about LONG_S seconds at the
//                           farm's speed (target ≥ 0.97)
//   farm_european           end-to-end paths/s of a 10^9-path European call
//                           job, submit to result
//   farm_over_local         that against `simfarm sim --cores N` running the
//                           same paths on the same cores
//   farm_long_over_local    the long job's paths/s against the same local
//                           figure (target ≥ 0.95)
//   farm_european_dask      the same job with Dask distributed + numpy
//                           (tests/bench/farm_dask.py), and farm_over_dask
//                           (target ≥ 5), when python3-distributed is there
//
// Prints BENCH lines; progress goes to stderr.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, serve, tailEvents } from '../lib/coord.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build, eventually, run, top } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const european = JSON.parse(fs.readFileSync(path.join(top, 'examples/european.json'), 'utf8'));
const cores = os.availableParallelism();
const PATHS = 1e9;
const LONG_S = 60;

function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}

// `simfarm sim` on every core: one process, a thread per core.
async function localPathsPerSecond(items, params) {
  const t0 = performance.now();
  const r = await run(simfarm, ['sim', 'option', params, '--items', String(items), '--cores', String(cores),
    '--json'], { timeoutMs: 600000 });
  const s = (performance.now() - t0) / 1000;
  if (r.code !== 0) throw new Error(`simfarm sim: ${r.stderr}`);
  return items / s;
}

function startNode(srv, dir, name) {
  const child = spawn(simfarm, ['node', '--server', srv.url, '--key', path.join(dir, `${name}.key`),
    '--backend', 'cpu'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const node = { out: '', child };
  child.stdout.on('data', (d) => { node.out += d; });
  child.stderr.on('data', (d) => { node.out += d; });
  node.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  return node;
}

// Submits a job and waits for its job.finished event (no polling, which
// would take CPU from the workers); the seconds are submit to result.
async function farmJob(srv, ev, items, seed) {
  const t0 = performance.now();
  // the node joins under open enrolment, as a public node: the job names that tier
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: european.params, items, seed,
    tiers: ['own', 'team', 'community', 'public'],
      verify: { trust: ['own', 'team', 'community', 'public'] } });
  if (res.status !== 201) throw new Error(`submit: ${res.status} ${JSON.stringify(res.json)}`);
  const { id } = res.json;
  const end = await ev.until((e) => e.type === 'job.finished' && e.job === id, `job ${id} finished`);
  const seconds = (performance.now() - t0) / 1000;
  if (end.state !== 'complete') throw new Error(`job ${id}: ${end.state}`);
  const job = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
  return { job, seconds };
}

async function stopNode(node) {
  node.child.kill('SIGTERM');
  await node.exited;
}

// Kernel time over a stopped node's run against the time it had work (the
// jobs' seconds, submit to result, on every worker).
function kernelShare(node, seconds) {
  const m = node.out.match(/kernels ran (\d+) ms on (\d+) workers in (\d+) ms/);
  if (!m) throw new Error(`no kernel time in the node's log:\n${node.out}`);
  return Number(m[1]) / (Number(m[2]) * seconds * 1000);
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-bench-farm-'));
  const pg = await startPostgres();
  let srv, node, ev;
  try {
    srv = await serve(pg.url, { extra: ['--open-enrolment'] });
    ev = tailEvents(srv, '', { timeoutMs: 900000 });
    await ev.until((e) => e.type === 'snapshot', 'snapshot');
    node = startNode(srv, dir, 'a');
    await eventually(() => /connected to \S+ as node \d+/.test(node.out), 'node connected', 30000, 20);
    console.error(`# farm: ${cores} CPU workers`);

    // A short job first, so the node's chunk sizes have settled (as on a
    // farm that has been running).
    await farmJob(srv, ev, 1e8, 99);
    const { job, seconds } = await farmJob(srv, ev, PATHS, 1);
    const price = job.result.outputs[0].mean;
    console.error(`# farm: 10^9 paths in ${seconds.toFixed(2)} s, price ${price.toFixed(4)}`);
    const farm = PATHS / seconds;
    await stopNode(node);

    // A fresh node for the efficiency: the warm-up job, then a long one.
    node = startNode(srv, dir, 'b');
    await eventually(() => /connected to \S+ as node \d+/.test(node.out), 'node connected', 30000, 20);
    const warm = await farmJob(srv, ev, 1e8, 98);
    const longItems = Math.round(farm * LONG_S / 1e8) * 1e8;
    const long = await farmJob(srv, ev, longItems, 2);
    console.error(`# farm: ${longItems.toExponential(1)} paths in ${long.seconds.toFixed(2)} s`);
    await stopNode(node);
    const efficiency = kernelShare(node, warm.seconds + long.seconds);
    bench('farm_european', farm, 'paths/s');
    const params = path.join(dir, 'european.json');
    fs.writeFileSync(params, JSON.stringify(european.params));
    const local = await localPathsPerSecond(4e8, params);
    bench('farm_european_local', local, 'paths/s');
    bench('farm_over_local', farm / local, 'ratio');
    bench('farm_long_over_local', longItems / long.seconds / local, 'ratio');
    bench('node_efficiency', Math.min(efficiency, 1), 'ratio');

    const dask = await run('/usr/bin/python3', [path.join(top, 'tests/bench/farm_dask.py'), String(cores)], { timeoutMs: 900000 });
    process.stderr.write(dask.stderr);
    const d = dask.stdout.match(/^BENCH farm_european_dask (\S+) paths\/s$/m);
    if (d) {
      process.stdout.write(dask.stdout);
      bench('farm_over_dask', farm / Number(d[1]), 'ratio');
    }
  } finally {
    await ev?.close();
    if (node && node.child.exitCode === null) node.child.kill('SIGKILL');
    await srv?.stop();
    await pg.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
