// Honest throughput beside hostile nodes: PostgreSQL, `simfarm serve` and
// honest `simfarm node` processes run three equal jobs one after the other;
// during the middle one, scripted nodes (tests/bench/hostile_attacker.mjs, a
// process of its own) attack the coordinator without pause: garbage before
// hello, a frame past 4 MiB, completions with forged signatures, stolen
// tokens and replays, and heartbeat floods cut off by the rate limit.
//
// Two layouts of the machine's cores, each with two kinds of attacker, each
// a fresh farm:
//   own cores     the attacker has the last core to itself, as an attacker
//                 on another machine would; PostgreSQL, the coordinator and
//                 one honest node (--cores = the other cores) share the rest.
//                 What the honest node loses is what the coordinator (and
//                 the database) spend on the attack.
//   shared cores  nothing is pinned; one honest node per core (--cores 1),
//                 and the attacker takes its CPU from the same cores.
// and
//   one source    every attacking connection comes from 127.0.0.1, the
//                 honest nodes' address: the coordinator's address
//                 penalties hold and refuse its new connections while the
//                 honest nodes' sessions go on.
//   many sources  each from an address of its own (127.1.0.1, ...), as
//                 from a botnet: no penalty applies, and what the attack
//                 costs is what each frame costs.
//
//   hostile_honest_items_per_s        the honest nodes' items/s, undisturbed
//                                     (the mean of the jobs before and after)
//   hostile_honest_items_per_s_attacked   the same during the attack
//   hostile_honest_throughput_ratio   attacked / undisturbed (target ≥ 0.8)
//   hostile_attack_frames_per_s       frames the attacker sent a second
//   hostile_attacker_cpu              its CPU seconds per second
//   hostile_coordinator_cpu_attacked  the coordinator's, during the attack
//   hostile_database_cpu_attacked     PostgreSQL's, during the attack
//   hostile_attack_refused_per_s      attacks refused at the connection
//                                     or hello (address or key penalties)
// for own cores and one source, and the same names ending in
// _many_sources, _shared_cores and _shared_cores_many_sources for the
// others. HOSTILE_LAYOUT=own or shared and HOSTILE_SOURCES=one or many run
// some of them. Needs taskset (util-linux) and two cores. Prints BENCH
// lines; progress goes to stderr.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, serve, tailEvents } from '../lib/coord.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const attackerFile = path.join(path.dirname(fileURLToPath(import.meta.url)), 'hostile_attacker.mjs');
const ITEMS = Number(process.env.HOSTILE_ITEMS ?? 80000000);
const LAYOUTS = process.env.HOSTILE_LAYOUT ? [process.env.HOSTILE_LAYOUT] : ['own', 'shared'];
const SOURCES = process.env.HOSTILE_SOURCES ? [process.env.HOSTILE_SOURCES] : ['one', 'many'];
const params = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, q: 0, sigma: 0.2, T: 1, steps: 16,
  antithetic: true, greeks: true };
const cores = os.availableParallelism();
const allCores = `0-${cores - 1}`;

if (cores < 2) throw new Error('bench_hostile needs two cores');
for (const l of LAYOUTS) if (l !== 'own' && l !== 'shared') throw new Error(`HOSTILE_LAYOUT: "${l}" is not own or shared`);
for (const s of SOURCES) if (s !== 'one' && s !== 'many') throw new Error(`HOSTILE_SOURCES: "${s}" is not one or many`);

function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}

// Pins every thread of a process to a list of cores; what it starts later
// inherits the list.
function pin(pid, list) {
  execFileSync('taskset', ['-a', '-c', '-p', list, String(pid)], { stdio: 'ignore' });
}

// CPU seconds a process has used (user + system), from /proc; with
// children, those of its live children and of those it has waited for.
function cpuSeconds(pid, { children = false } = {}) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  let s = (Number(f[11]) + Number(f[12])) / 100; /* utime, stime: fields 14 and 15, in ticks of 1/100 s */
  if (!children)
    return s;
  s += (Number(f[13]) + Number(f[14])) / 100; /* cutime, cstime of children waited for */
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const c = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const g = c.slice(c.lastIndexOf(')') + 2).split(' ');
      if (Number(g[1]) === pid) s += (Number(g[11]) + Number(g[12])) / 100;
    } catch { /* gone */ }
  }
  return s;
}

// Submits a job and resolves to its items/s from submission to its
// job.finished event (no polling: it would take CPU from the nodes).
async function timedJob(srv, ev, seed) {
  const t0 = performance.now();
  // the nodes join under open enrolment, as public nodes: the job names that tier
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items: ITEMS, seed,
    tiers: ['own', 'team', 'community', 'public'],
      verify: { trust: ['own', 'team', 'community', 'public'] } });
  if (res.status !== 201) throw new Error(res.text);
  const end = await ev.until((e) => e.type === 'job.finished' && e.job === res.json.id, `job ${res.json.id} finished`);
  if (end.state !== 'complete') throw new Error(`job ${res.json.id}: ${end.state}`);
  return ITEMS / ((performance.now() - t0) / 1000);
}

// One fresh farm in a layout, attacked from sources; resolves to its figures.
async function measure(layout, sources) {
  const own = layout === 'own';
  const honestCores = own ? (cores > 2 ? `0-${cores - 2}` : '0') : allCores;
  const attackerCores = own ? String(cores - 1) : allCores;
  pin(process.pid, honestCores);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-bench-hostile-'));
  const pg = await startPostgres();
  const srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '1000'] });
  const nodeCores = own ? [cores - 1] : Array(cores).fill(1);
  const nodes = nodeCores.map((n, i) => spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`,
    '--key', path.join(tmp, `honest${i}.key`), '--cores', String(n)], { stdio: 'ignore' }));
  pin(process.pid, attackerCores); /* this process only watches */
  const ev = tailEvents(srv, '', { timeoutMs: 600000 });
  try {
    await ev.until((e) => e.type === 'snapshot', 'snapshot');
    console.error(`# ${layout} cores: honest on ${honestCores} (${nodes.length} node${nodes.length > 1 ? 's' : ''}), ` +
      `attacker on ${attackerCores}, from ${sources} source${sources === 'many' ? 's' : ''}`);
    const before = await timedJob(srv, ev, 1);
    console.error(`# undisturbed: ${before.toPrecision(3)} items/s`);
    const attacker = spawn('taskset', ['-c', attackerCores, process.execPath, attackerFile, String(srv.port)],
      { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, HOSTILE_SOURCES: sources } });
    const [ready] = await once(attacker, 'message');
    if (ready !== 'ready') throw new Error(`the attacker said ${JSON.stringify(ready)}`);
    const pids = [attacker.pid, srv.pid, ...nodes.map((n) => n.pid)];
    const t0 = performance.now(), cpu0 = pids.map((p) => cpuSeconds(p)), db0 = cpuSeconds(pg.pid, { children: true });
    const attacked = await timedJob(srv, ev, 2);
    const jobS = (performance.now() - t0) / 1000;
    const [attackerCpu, coordCpu, ...nodeCpu] = pids.map((p, i) => (cpuSeconds(p) - cpu0[i]) / jobS);
    const dbCpu = (cpuSeconds(pg.pid, { children: true }) - db0) / jobS;
    const done = once(attacker, 'message');
    attacker.send('stop');
    const [a] = await done;
    console.error(`# attacked: ${attacked.toPrecision(3)} items/s, ${a.rounds} attack rounds, ${a.refused} attacks refused ` +
      `(${a.failed} ended early otherwise)`);
    console.error(`# CPU s/s over the attacked job: attacker ${attackerCpu.toFixed(2)}, coordinator ${coordCpu.toFixed(2)}, ` +
      `database ${dbCpu.toFixed(2)}, honest nodes ${nodeCpu.map((c) => c.toFixed(2)).join(' and ')}`);
    const after = await timedJob(srv, ev, 3);
    console.error(`# undisturbed again: ${after.toPrecision(3)} items/s`);
    if ((await call(srv, 'GET', '/health')).status !== 200) throw new Error('the coordinator is down');
    const calm = (before + after) / 2;
    return { calm, attacked, frames: a.frames / a.seconds, refused: a.refused / a.seconds, attackerCpu, coordCpu, dbCpu };
  } finally {
    await ev.close();
    for (const n of nodes) n.kill('SIGTERM');
    await Promise.all(nodes.map((n) => new Promise((resolve) => (n.exitCode !== null ? resolve() : n.on('exit', resolve)))));
    await srv.stop();
    await pg.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
    pin(process.pid, allCores);
  }
}

for (const layout of LAYOUTS) for (const sources of SOURCES) {
  const r = await measure(layout, sources);
  const sfx = (layout === 'own' ? '' : '_shared_cores') + (sources === 'one' ? '' : '_many_sources');
  bench(`hostile_honest_items_per_s${sfx}`, r.calm, 'items/s');
  bench(`hostile_honest_items_per_s_attacked${sfx}`, r.attacked, 'items/s');
  bench(`hostile_honest_throughput_ratio${sfx}`, r.attacked / r.calm, 'ratio');
  bench(`hostile_attack_frames_per_s${sfx}`, r.frames, 'frames/s');
  bench(`hostile_attack_refused_per_s${sfx}`, r.refused, 'attacks/s');
  bench(`hostile_attacker_cpu${sfx}`, r.attackerCpu, 'CPU-s/s');
  bench(`hostile_coordinator_cpu_attacked${sfx}`, r.coordCpu, 'CPU-s/s');
  bench(`hostile_database_cpu_attacked${sfx}`, r.dbCpu, 'CPU-s/s');
}
