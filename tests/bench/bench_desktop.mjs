// Benchmarks of the desktop node (build/bin/simfarm-desktop) in a private
// desktop session (tests/desktop/session.mjs: Xvfb, its own buses, UPower,
// logind and GNOME's idle monitor mocked), read through its accessibility
// tree (tests/desktop/atspi.mjs), joined with a claim token (--server and
// --claim-token: no first-run form) to a real coordinator and PostgreSQL.
// Its settings are the defaults, written to desktop.ini before it starts:
// no cores while in use (cores_in_use=0), every core once idle, pause on
// battery, "Run at idle priority" on (its compute threads SCHED_IDLE). The
// input idle time is set to 10 minutes first, so it computes.
//
//   desktop_react_ms          on battery: from the start of the UPower change
//                             (a gdbus call to the mock) until the "State"
//                             label reads "Paused: on battery" (median of
//                             BENCH_DESKTOP_ROUNDS rounds, default 10, while
//                             computing a long job); desktop_react_max_ms the
//                             slowest round; desktop_resume_ms back on AC
//                             until "Running", desktop_cpu_resume_ms until
//                             the compute threads have used 10 ms of CPU
//   desktop_cpu_stop_ms       from the same start until the app's compute
//                             threads stop using CPU: their CPU time (the
//                             SCHED_IDLE threads' /proc/PID/task/TID/schedstat,
//                             ns; /proc/PID/task/TID/stat utime+stime where
//                             there is no schedstat), read every 20 ms, grows
//                             by under 1 ms over the next 200 ms; the time
//                             is the first read of that quiet stretch (a pause
//                             holds the workers inside their chunks)
//   desktop_react_input_ms    input now (the idle monitor's idle time set to
//                             0) until "Paused: you are using the computer"
//                             (the idle monitor is asked once a second, so up
//                             to about a second); _max_ms, and
//                             desktop_cpu_stop_input_ms as above
//   desktop_efficiency        the same European job (examples/european.json's
//                             parameters, sized by a warm-up to about
//                             BENCH_DESKTOP_RUN_S = 25 s, or
//                             BENCH_DESKTOP_ITEMS) computed by the app alone,
//                             then by `simfarm node --cores N --priority idle`
//                             alone, alternating (BENCH_DESKTOP_PAIRS pairs,
//                             default 3) on one coordinator: each job's items
//                             over finished_at − started_at of GET
//                             /api/jobs/ID (started_at: when the scheduler
//                             takes the job in; both nodes are connected and
//                             waiting for work). Prints desktop_paths_per_s,
//                             node_paths_per_s (medians) and
//                             desktop_over_node (target ≥ 0.98); and
//                             desktop_over_node_per_cpu_s, the same with each
//                             job's paths per CPU second of the computing
//                             process (/proc/PID/stat), which other work on
//                             the machine does not move.
//
// Like with like: both compute at idle priority, the app by its default
// ("Run at idle priority", SCHED_IDLE), the node by --priority idle (its own
// default, low, is nice 19); both on every core with the default backend
// (auto). Both stay connected through the comparison; each job names one
// tier, which only one of them has (the app joins as team, the node as
// community), so the other waits for work meanwhile.
//
// Prints BENCH lines; progress goes to stderr.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, serve, tailEvents } from '../lib/coord.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build, eventually, top } from '../lib/proc.mjs';
import { missing, startSession } from '../desktop/session.mjs';
import { driver } from '../desktop/atspi.mjs';

const app = path.join(build, 'bin/simfarm-desktop');
const simfarm = path.join(build, 'bin/simfarm');
const european = JSON.parse(fs.readFileSync(path.join(top, 'examples/european.json'), 'utf8'));
const cpus = os.availableParallelism();
const ROUNDS = Number(process.env.BENCH_DESKTOP_ROUNDS ?? 10);
const PAIRS = Number(process.env.BENCH_DESKTOP_PAIRS ?? 3);
const RUN_S = Number(process.env.BENCH_DESKTOP_RUN_S ?? 25);
const ITEMS = process.env.BENCH_DESKTOP_ITEMS ? Number(process.env.BENCH_DESKTOP_ITEMS) : 0;
const WARM_ITEMS = Number(process.env.BENCH_DESKTOP_WARM ?? 2e9);
const DESKTOP_TIER = 'team';
const NODE_TIER = 'community';
const SCHED_IDLE = 5;
// the CPU-stop rule: under QUIET_NS more CPU over QUIET_MS, read every POLL_MS
const POLL_MS = 20;
const QUIET_MS = 200;
const QUIET_NS = 1e6;

const log = (...a) => console.error('#', ...a);
function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

// ---- the app's threads' CPU time ------------------------------------------------

const haveSchedstat = fs.existsSync('/proc/self/schedstat');
const TICK_NS = 1e9 / 100; // USER_HZ

// [{ tid, ns, policy }] for each thread of pid.
function threads(pid) {
  const out = [];
  let tids;
  try { tids = fs.readdirSync(`/proc/${pid}/task`); } catch { return out; }
  for (const tid of tids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // f[0] is field 3
      const ns = haveSchedstat
        ? Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
        : (Number(f[11]) + Number(f[12])) * TICK_NS;
      out.push({ tid: Number(tid), ns, policy: Number(f[38]) });
    } catch { /* the thread ended meanwhile */ }
  }
  return out;
}

// The compute threads: the SCHED_IDLE ones (the app's default idle
// priority); without any, every thread but the main one.
function computeFilter(pid) {
  const idle = threads(pid).filter((t) => t.policy === SCHED_IDLE);
  if (idle.length) return { what: `${idle.length} SCHED_IDLE threads`, ok: (t) => t.policy === SCHED_IDLE };
  return { what: 'every thread but the main one', ok: (t) => t.tid !== pid };
}
const computeNs = (pid, filter) => threads(pid).filter(filter.ok).reduce((a, t) => a + t.ns, 0);

// Waits until the compute threads use at least half a core over 200 ms.
const computing = (pid, filter, ms = 30000) => eventually(async () => {
  const a = computeNs(pid, filter), t = now();
  await delay(200);
  return (computeNs(pid, filter) - a) / ((now() - t) * 1e6) >= 0.5;
}, 'the app computing (half a core or more)', ms, 0);

// Reads the compute threads' CPU every POLL_MS from now on; resolves to the
// ms from t0 to the first read of a QUIET_MS stretch with under QUIET_NS more.
function cpuStop(pid, filter, t0, ms = 10000) {
  const samples = [];
  return eventually(async () => {
    samples.push({ t: now(), ns: computeNs(pid, filter) });
    const last = samples[samples.length - 1];
    for (const s of samples) {
      if (last.t - s.t < QUIET_MS) break;
      if (last.ns - s.ns < QUIET_NS) return { ms: s.t - t0 };
    }
    return null;
  }, 'the compute threads stopping', ms, POLL_MS).then((r) => r.ms);
}

// Resolves to the ms from t0 until the compute threads have used 10 ms of
// CPU more than at t0 (computing again after a pause).
function cpuStart(pid, filter, t0, ms = 10000) {
  const base = computeNs(pid, filter);
  return eventually(() => (computeNs(pid, filter) - base >= 1e7 ? { ms: now() - t0 } : null),
    'the compute threads computing again', ms, POLL_MS).then((r) => r.ms);
}

// ---- main -------------------------------------------------------------------------

async function main() {
  const why = missing();
  if (why) throw new Error(why);
  if (!fs.existsSync(app)) throw new Error(`${app} missing: build it with make`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-bench-desktop-'));
  let pg, srv, ev, s, ui, desktop, node;
  const jobs = new Set(); // submitted and not seen finished: cancelled at the end
  try {
    pg = await startPostgres();
    srv = await serve(pg.url);
    ev = tailEvents(srv, '', { timeoutMs: 600000 });
    await ev.until((e) => e.type === 'snapshot', 'snapshot');
    s = await startSession({ mutter: true, tray: true });
    ui = await driver(s);
    log(`session up in ${s.startMs} ms (${s.display}); ${cpus} cores`);

    const token = async (owner, tier) => {
      const t = await call(srv, 'POST', '/api/tokens', { kind: 'claim', owner, tier, expires_in: 3600 });
      if (t.status !== 201) throw new Error(`claim token: ${t.status} ${t.text}`);
      return t.json.token;
    };
    const submit = async (tier, items, seed) => {
      const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: european.params, items, seed,
        tiers: [tier], verify: { trust: [tier] } });
      if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
      jobs.add(r.json.id);
      return r.json.id;
    };

    // ---- the app, idle and on AC, computing a long job --------------------------
    await s.setIdle(10 * 60000);
    await s.setBattery(false);
    const ini = path.join(s.env.XDG_CONFIG_HOME, 'simfarm/desktop.ini');
    fs.mkdirSync(path.dirname(ini), { recursive: true });
    fs.writeFileSync(ini, `[desktop]\ncores_in_use=0\ncores_idle=${cpus}\nidle_minutes=3\n`
      + 'pause_on_battery=true\nidle_priority=true\n');
    const longJob = await submit(DESKTOP_TIER, 1e12, 7);
    desktop = launch(s, ['--server', srv.url, '--claim-token', await token('alice', DESKTOP_TIER)]);
    desktop.w = await Promise.race([ui.waitApp({ pid: desktop.pid }, 30000),
      desktop.exited.then((e) => { throw new Error(`simfarm-desktop exited (${e.code ?? e.signal}):\n${desktop.out()}`); })]);
    const { w, pid } = desktop;
    const state = (want, ms) => w.untilText('label', 'State', want, ms);
    await w.window('simfarm desktop node', 15000);
    await w.untilText('label', 'Node', /^Node \d+ · owner alice · tier team$/, 15000);
    await state('Running', 30000);
    const filter = computeFilter(pid);
    await computing(pid, filter);
    log(`app ${pid} running; compute threads: ${filter.what}; workers: ${(await w.text('label', 'Workers')).replace(/\n/g, ' | ')}`);

    // ---- on battery ----------------------------------------------------------------
    const react = [], resume = [], restart = [], stop = [], callMs = [];
    for (let i = 0; i < ROUNDS; i++) {
      await computing(pid, filter);
      const t0 = now();
      const stopped = cpuStop(pid, filter, t0);
      await s.setBattery(true);
      callMs.push(now() - t0);
      await state('Paused: on battery', 5000);
      react.push(now() - t0);
      stop.push(await stopped);
      const t1 = now();
      const started = cpuStart(pid, filter, t1);
      await s.setBattery(false);
      const seen = new Set();
      await state((t) => { seen.add(t); return t === 'Running'; }, 5000);
      resume.push(now() - t1);
      restart.push(await started);
      seen.delete('Running');
      seen.delete('Paused: on battery');
      log(`battery round ${i + 1}: label ${react[i].toFixed(0)} ms (gdbus call ${callMs[i].toFixed(0)} ms), `
        + `CPU stopped ${stop[i].toFixed(0)} ms; on AC: CPU again ${restart[i].toFixed(0)} ms, "Running" `
        + `${resume[i].toFixed(0)} ms${seen.size ? ` (before it: ${[...seen].join(' | ')})` : ''}`);
    }

    // ---- input (no cores while in use) ---------------------------------------------
    const input = [], inputStop = [];
    for (let i = 0; i < ROUNDS; i++) {
      await computing(pid, filter);
      const t0 = now();
      const stopped = cpuStop(pid, filter, t0);
      await s.setIdle(0);
      await state('Paused: you are using the computer', 5000);
      input.push(now() - t0);
      inputStop.push(await stopped);
      await s.setIdle(10 * 60000);
      await state('Running', 5000);
      log(`input round ${i + 1}: label ${input[i].toFixed(0)} ms, CPU stopped ${inputStop[i].toFixed(0)} ms`);
    }
    bench('desktop_react_ms', median(react), 'ms');
    bench('desktop_react_max_ms', Math.max(...react), 'ms');
    bench('desktop_resume_ms', median(resume), 'ms');
    bench('desktop_cpu_stop_ms', median(stop), 'ms');
    bench('desktop_cpu_stop_max_ms', Math.max(...stop), 'ms');
    bench('desktop_cpu_resume_ms', median(restart), 'ms');
    bench('desktop_react_input_ms', median(input), 'ms');
    bench('desktop_react_input_max_ms', Math.max(...input), 'ms');
    bench('desktop_cpu_stop_input_ms', median(inputStop), 'ms');
    log(`gdbus call for the battery change: median ${median(callMs).toFixed(0)} ms (inside desktop_react_ms)`);

    // ---- the app against `simfarm node` ------------------------------------------------
    await call(srv, 'POST', `/api/jobs/${longJob}/cancel`);
    await ev.until((e) => e.type === 'job.finished' && e.job === longJob, `job ${longJob} finished`);
    jobs.delete(longJob);
    node = startNode(srv, path.join(dir, 'node.key'), await token('bob', NODE_TIER));
    await eventually(() => /connected to \S+ as node \d+/.test(node.out()), 'simfarm node connected', 30000, 20);
    log(`simfarm node ${node.pid}: ${node.out().split('\n').find((l) => /workers/.test(l)) ?? ''}`);

    // Resolves to { rate, seconds, wall } of one job on tier's node.
    // cpu: the computing process's CPU seconds over the job (/proc/PID/stat),
    // share: of the cores over the submit-to-event time.
    const job = async (tier, items, seed) => {
      const who = tier === DESKTOP_TIER ? desktop.pid : node.pid;
      const cpu0 = processCpuS(who);
      const t0 = now();
      const id = await submit(tier, items, seed);
      const end = await ev.until((e) => e.type === 'job.finished' && e.job === id, `job ${id} finished`);
      const wall = (now() - t0) / 1000;
      const cpu = processCpuS(who) - cpu0;
      jobs.delete(id);
      if (end.state !== 'complete') throw new Error(`job ${id}: ${end.state}`);
      const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
      const seconds = (Date.parse(j.finished_at) - Date.parse(j.started_at)) / 1000;
      return { id, rate: items / seconds, seconds, wall, cpu, share: cpu / (cpus * wall), nodes: j.result?.nodes };
    };
    const wd = await job(DESKTOP_TIER, WARM_ITEMS, 11);
    const wn = await job(NODE_TIER, WARM_ITEMS, 12);
    log(`warm-up: app ${wd.rate.toExponential(3)} paths/s, node ${wn.rate.toExponential(3)} paths/s`);
    const items = ITEMS || Math.max(1e9, Math.round((Math.max(wd.rate, wn.rate) * RUN_S) / 1e8) * 1e8);
    const rates = { [DESKTOP_TIER]: [], [NODE_TIER]: [] }, perCpu = { [DESKTOP_TIER]: [], [NODE_TIER]: [] };
    for (let p = 0; p < PAIRS; p++) {
      for (const tier of [DESKTOP_TIER, NODE_TIER]) {
        const r = await job(tier, items, 100 + 2 * p + (tier === NODE_TIER));
        rates[tier].push(r.rate);
        perCpu[tier].push(items / r.cpu);
        log(`${tier === DESKTOP_TIER ? 'app ' : 'node'} ${items.toExponential(1)} paths: ${r.seconds.toFixed(2)} s `
          + `started→finished (${r.wall.toFixed(2)} s submit→event), ${r.rate.toExponential(3)} paths/s; `
          + `${r.cpu.toFixed(1)} CPU s (${(100 * r.share).toFixed(1)} % of the cores), `
          + `${(items / r.cpu).toExponential(3)} paths per CPU s; load ${os.loadavg()[0].toFixed(2)}; `
          + `nodes ${JSON.stringify(r.nodes)}`);
      }
    }
    const d = median(rates[DESKTOP_TIER]), n = median(rates[NODE_TIER]);
    bench('desktop_paths_per_s', d, 'paths/s');
    bench('node_paths_per_s', n, 'paths/s');
    bench('desktop_over_node', d / n, 'ratio');
    // the same per CPU second of the computing process: what other work on
    // the machine took from either run falls out
    bench('desktop_over_node_per_cpu_s', median(perCpu[DESKTOP_TIER]) / median(perCpu[NODE_TIER]), 'ratio');

    // ---- the end: the app quits (drains), the node leaves ----------------------------
    await w.click('push button', 'Quit');
    const e = await within(desktop.exited, 60000, 'simfarm-desktop exiting after Quit');
    if (e.code !== 0) log(`simfarm-desktop exited ${e.code ?? e.signal} after Quit`);
    log(`simfarm-desktop's log:\n${desktop.out().trim().split('\n').slice(-60).join('\n')}`);
  } finally {
    for (const id of jobs) await call(srv, 'POST', `/api/jobs/${id}/cancel`).catch(() => {});
    if (node) await stopProc(node, 'SIGTERM');
    if (desktop) await stopProc(desktop, 'SIGKILL', true);
    await ev?.close();
    await ui?.close();
    await s?.stop();
    await srv?.stop();
    await pg?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// A process's CPU seconds (all its threads): utime + stime of /proc/PID/stat.
function processCpuS(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

// p, or a rejection after ms.
function within(p, ms, what) {
  let timer;
  return Promise.race([p, new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(timer));
}

function track(child) {
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, pid: child.pid, out: () => out, exited };
}

// The app in the session, in a process group of its own.
function launch(s, args) {
  return track(spawn(app, args, { env: s.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true }));
}

function startNode(srv, key, claimToken) {
  return track(spawn(simfarm, ['node', '--server', srv.url, '--key', key, '--claim-token', claimToken,
    '--cores', String(cpus), '--priority', 'idle'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true }));
}

// Ends p (signal, then SIGKILL after 20 s); group: its whole process group.
async function stopProc(p, signal, group = false) {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const kill = (sig) => { try { process.kill(group ? -p.pid : p.pid, sig); } catch { /* gone */ } };
  kill(signal);
  const timer = setTimeout(() => kill('SIGKILL'), 20000);
  await p.exited;
  clearTimeout(timer);
}

main().catch((e) => { console.error(e); process.exit(1); });
