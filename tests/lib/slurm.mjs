// A private Slurm on this machine for tests: munged with its own key and
// socket, slurmctld and slurmd with a configuration in a temporary
// directory (no cgroups: proctrack/linuxproc, task/none; accounting off),
// on free ports, everything as root and in the foreground as children of
// the test. `env` is what a client (sbatch, squeue, scancel, srun, or a
// program that calls them) needs: SLURM_CONF. stop() cancels every job,
// waits for the queue to empty, and stops the three daemons.
import { spawn, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { eventually, run } from './proc.mjs';

// Whether a Slurm can be started here: the programs are installed and we
// are root (slurmd runs jobs as their users). A reason when not.
export function slurmMissing() {
  for (const p of ['/usr/sbin/munged', '/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/bin/sbatch'])
    if (!fs.existsSync(p)) return `${p} is not installed (scripts/install-deps.sh: slurm-wlm, munge)`;
  if (process.getuid() !== 0) return 'a private Slurm runs as root';
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function daemon(file, args, env, log) {
  const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const d = { child, out: '' };
  child.stdout.on('data', (b) => { d.out += b; });
  child.stderr.on('data', (b) => { d.out += b; });
  d.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  d.log = log;
  return d;
}

async function halt(d, what) {
  if (d === undefined || d.child.exitCode !== null || d.child.signalCode !== null) return;
  d.child.kill('SIGTERM');
  const t = setTimeout(() => d.child.kill('SIGKILL'), 15000);
  await d.exited;
  clearTimeout(t);
  void what;
}

// Starts the cluster: one node, `cpus` CPUs, one partition `debug`.
// Resolves once the node is idle, or rejects with the daemons' logs.
export async function startSlurm({ cpus = 2, timeoutMs = 60000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-slurm-'));
  fs.chmodSync(dir, 0o755);
  const host = execFileSync('hostname', ['-s']).toString().trim();
  const key = path.join(dir, 'munge.key');
  fs.writeFileSync(key, crypto.randomBytes(1024), { mode: 0o400 });
  const sock = path.join(dir, 'munge.sock');
  const [ctldPort, slurmdPort] = [await freePort(), await freePort()];
  const conf = path.join(dir, 'slurm.conf');
  for (const d of ['state', 'spool']) fs.mkdirSync(path.join(dir, d));
  fs.writeFileSync(conf, [
    'ClusterName=simfarmtest',
    `SlurmctldHost=${host}(127.0.0.1)`,
    `SlurmctldPort=${ctldPort}`,
    `SlurmdPort=${slurmdPort}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    'AuthType=auth/munge',
    'CredType=cred/munge',
    `AuthInfo=socket=${sock}`,
    `StateSaveLocation=${dir}/state`,
    `SlurmdSpoolDir=${dir}/spool`,
    `SlurmctldPidFile=${dir}/slurmctld.pid`,
    `SlurmdPidFile=${dir}/slurmd.pid`,
    `SlurmctldLogFile=${dir}/slurmctld.log`,
    `SlurmdLogFile=${dir}/slurmd.log`,
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'JobCompType=jobcomp/none',
    'SchedulerType=sched/builtin',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_Core',
    'SlurmdParameters=config_overrides',
    'MpiDefault=none',
    'ReturnToService=2',
    'KillWait=5',
    'MinJobAge=2',
    'InactiveLimit=0',
    'SlurmdTimeout=30',
    `NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=500 State=UNKNOWN`,
    `PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP`,
    '',
  ].join('\n'));
  const env = { ...process.env, SLURM_CONF: conf };
  const s = { dir, conf, env, host, daemons: [] };
  const logs = () => ['munged.log', 'slurmctld.log', 'slurmd.log'].map((f) => {
    const p = path.join(dir, f);
    return `--- ${f}\n${fs.existsSync(p) ? fs.readFileSync(p, 'utf8').split('\n').slice(-30).join('\n') : '(none)'}`;
  }).join('\n') + s.daemons.map((d) => `\n--- output\n${d.out}`).join('');
  s.logs = logs;
  s.stop = async () => {
    if (s.daemons.length === 3) {
      await run('/usr/bin/scancel', ['--full', '--user=root'], { env, timeoutMs: 10000 }).catch(() => {});
      await eventually(async () => {
        const q = await run('/usr/bin/squeue', ['--noheader'], { env, timeoutMs: 10000 }).catch(() => ({ code: 1 }));
        return q.code !== 0 || q.stdout.trim() === '';
      }, 'the Slurm queue empty', 30000, 200).catch(() => {});
    }
    for (const d of [...s.daemons].reverse()) await halt(d);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    s.daemons.push(daemon('/usr/sbin/munged', ['--foreground', '--force', `--key-file=${key}`, `--socket=${sock}`,
      `--pid-file=${dir}/munged.pid`, `--log-file=${dir}/munged.log`, `--seed-file=${dir}/munge.seed`], env));
    await eventually(() => fs.existsSync(sock), 'munged\'s socket', timeoutMs, 50);
    s.daemons.push(daemon('/usr/sbin/slurmctld', ['-D', '-i', '-f', conf], env));
    await eventually(async () => (await run('/usr/bin/scontrol', ['ping'], { env, timeoutMs: 10000 })).stdout
      .includes('is UP'), 'slurmctld up', timeoutMs, 200);
    s.daemons.push(daemon('/usr/sbin/slurmd', ['-D', '-f', conf, '-N', host], env));
    await eventually(async () => /^idle/.test((await run('/usr/bin/sinfo', ['--noheader', '--format=%T'],
      { env, timeoutMs: 10000 })).stdout.trim()), 'the Slurm node idle', timeoutMs, 200);
  } catch (e) {
    const text = logs();
    await s.stop();
    throw new Error(`${e.message}\n${text}`);
  }
  return s;
}

// squeue's jobs named `name` (all when none): [{ id, state, name }].
export async function squeue(s, name) {
  const r = await run('/usr/bin/squeue', ['--noheader', '--format=%i|%T|%j', ...(name ? [`--name=${name}`] : [])],
    { env: s.env, timeoutMs: 10000 });
  if (r.code !== 0) throw new Error(`squeue: ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean).map((l) => { const [id, state, n] = l.split('|'); return { id, state, name: n }; });
}
