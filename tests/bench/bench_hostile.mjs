// Honest throughput beside hostile nodes: PostgreSQL, `simfarm serve` and
// two `simfarm node --cores 1` processes run three equal jobs one after
// the other; during the middle one, scripted nodes (tests/lib/nodeproto.mjs)
// attack the coordinator without pause: garbage before hello, a frame past
// 4 MiB, completions with forged signatures, stolen tokens and replays, and
// heartbeat floods cut off by the rate limit.
//
//   hostile_honest_items_per_s        the honest nodes' items/s, undisturbed
//                                     (the mean of the jobs before and after)
//   hostile_honest_items_per_s_attacked   the same during the attack
//   hostile_honest_throughput_ratio   attacked / undisturbed (target ≥ 0.8)
//   hostile_attack_frames_per_s       frames the attackers sent a second
//
// The attackers run in this process, on the same machine's cores as the
// honest nodes. Prints BENCH lines; progress goes to stderr.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, serve, tailEvents } from '../lib/coord.mjs';
import { E, ScriptedNode, clientFrame, envelope, nodeKey, sealBody } from '../lib/nodeproto.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const ITEMS = Number(process.env.HOSTILE_ITEMS ?? 80000000);
const params = { style: 'european', type: 'call', S0: 100, K: 100, r: 0.05, q: 0, sigma: 0.2, T: 1, steps: 16,
  antithetic: true, greeks: true };

function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}

// Submits a job and resolves to its items/s from submission to its
// job.finished event (no polling: it would take CPU from the nodes).
async function timedJob(srv, ev, seed) {
  const t0 = performance.now();
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params, items: ITEMS, seed });
  if (res.status !== 201) throw new Error(res.text);
  const end = await ev.until((e) => e.type === 'job.finished' && e.job === res.json.id, `job ${res.json.id} finished`);
  if (end.state !== 'complete') throw new Error(`job ${res.json.id}: ${end.state}`);
  return ITEMS / ((performance.now() - t0) / 1000);
}

// CPU seconds a process has used (user + system), from /proc.
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; /* utime, stime: fields 14 and 15, in ticks of 1/100 s */
}

// The frames that need no session of their own are built once and sent as
// they are, as an attacker elsewhere would: what the attacking process
// spends on the cores the honest nodes share is then the sending itself.
const garbage = clientFrame(crypto.randomBytes(64));
const oversize = clientFrame(Buffer.alloc(4 * 1024 * 1024 + 1, 0x90));
const FLOOD = 2000;
const flood = Buffer.concat(Array(FLOOD).fill(clientFrame(envelope('heartbeat', 2, { cpu: 0, mem_used: 0, mem_total: 1 }))));
const batch = { job: 1, ctxHash: Buffer.alloc(32), results: [{ chunk: 1, token: crypto.randomBytes(16), start: 0,
  count: 1000, data: crypto.randomBytes(200) }] };

// One round of every attack; resolves to the frames it sent.
async function attackRound(port) {
  let frames = 0;
  const closeOrTimeout = (n) => Promise.race([n.closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
  // Garbage before hello.
  const g = await ScriptedNode.connect(port);
  g.link.raw(garbage);
  frames++;
  await closeOrTimeout(g);
  // A frame past the limit.
  const big = await ScriptedNode.connect(port);
  await big.hello();
  big.link.raw(oversize);
  frames += 2;
  await closeOrTimeout(big);
  // Forged, stolen and replayed completions, 20 of each; a session cut off
  // for too many bad frames (ERATELIMITED) is replaced by a new one under a
  // new key (a new enrolment), so every round sends all of them. The forged
  // frame (signed by a key that is not the session's) is signed once a round.
  const forged = clientFrame(envelope('complete', 1000, sealBody(nodeKey(), `127.0.0.1:${port}`, batch)));
  for (let i = 0; i < 20;) {
    const t = await ScriptedNode.connect(port);
    await t.hello();
    try {
      for (; i < 20; i++) {
        t.link.raw(forged);
        const stolen = t.complete(batch);
        frames += 2;
        await t.until((m) => m.id === stolen.id && m.type === 'complete_ack', 'complete_ack');
        t.link.send(stolen.frame);
        frames++;
      }
      await t.error(undefined, 'replay');
      await t.close();
      frames++;
    } catch (e) {
      if (!t.msgs.some((m) => m.type === 'error' && m.body.code === E.ERATELIMITED)) throw e;
      i++;
    }
  }
  // A heartbeat flood.
  const f = await ScriptedNode.connect(port);
  await f.hello();
  f.link.raw(flood);
  frames += FLOOD + 2;
  await closeOrTimeout(f);
  return frames;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-bench-hostile-'));
const pg = await startPostgres();
const srv = await serve(pg.url, { extra: ['--open-enrolment', '--chunk-ms', '1000'] });
const nodes = [0, 1].map((i) => spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`,
  '--key', path.join(tmp, `honest${i}.key`), '--cores', '1'], { stdio: 'ignore' }));
const ev = tailEvents(srv, '', { timeoutMs: 600000 });
try {
  await ev.until((e) => e.type === 'snapshot', 'snapshot');
  const before = await timedJob(srv, ev, 1);
  console.error(`# undisturbed: ${before.toPrecision(3)} items/s`);
  let attacking = true, frames = 0, rounds = 0, failed = 0;
  const t0 = performance.now(), cpu0 = process.cpuUsage();
  const pids = [srv.pid, ...nodes.map((n) => n.pid)], cpuPids0 = pids.map(cpuSeconds);
  const attack = (async () => {
    while (attacking) {
      try {
        frames += await attackRound(srv.port);
        rounds++;
      } catch (e) {
        failed++;
        console.error(`# an attack round ended early: ${e.message}`);
      }
    }
  })();
  const attacked = await timedJob(srv, ev, 2);
  const jobS = (performance.now() - t0) / 1000, cpu = process.cpuUsage(cpu0);
  const [coordCpu, ...nodeCpu] = pids.map((pid, i) => (cpuSeconds(pid) - cpuPids0[i]) / jobS);
  const attackerCpu = (cpu.user + cpu.system) / 1e6 / jobS;
  attacking = false;
  await attack;
  const attackS = (performance.now() - t0) / 1000;
  console.error(`# attacked: ${attacked.toPrecision(3)} items/s, ${rounds} attack rounds (${failed} ended early)`);
  console.error(`# CPU s/s over the attacked job: attacker ${attackerCpu.toFixed(2)}, coordinator ${coordCpu.toFixed(2)}, ` +
    `honest nodes ${nodeCpu.map((c) => c.toFixed(2)).join(' and ')}`);
  const after = await timedJob(srv, ev, 3);
  console.error(`# undisturbed again: ${after.toPrecision(3)} items/s`);
  if ((await call(srv, 'GET', '/health')).status !== 200) throw new Error('the coordinator is down');
  const calm = (before + after) / 2;
  bench('hostile_honest_items_per_s', calm, 'items/s');
  bench('hostile_honest_items_per_s_attacked', attacked, 'items/s');
  bench('hostile_honest_throughput_ratio', attacked / calm, 'ratio');
  bench('hostile_attack_frames_per_s', frames / attackS, 'frames/s');
  bench('hostile_attacker_cpu', attackerCpu, 'CPU-s/s');
  bench('hostile_coordinator_cpu_attacked', coordCpu, 'CPU-s/s');
} finally {
  await ev.close();
  for (const n of nodes) n.kill('SIGTERM');
  await Promise.all(nodes.map((n) => new Promise((resolve) => (n.exitCode !== null ? resolve() : n.on('exit', resolve)))));
  await srv.stop();
  await pg.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
}
