// `simfarm up`: a private PostgreSQL created on first run and reused after,
// the coordinator, the demo job and what it found, and a clean stop of all
// of it on Ctrl-C.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';

const simfarm = path.join(build, 'bin/simfarm');
// As root the cluster runs as the postgres user, who must reach it.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-up-'));
fs.chmodSync(tmp, 0o755);
const varDir = path.join(tmp, 'var');
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// Runs `simfarm up` until `ready` matches its stdout, then Ctrl-C (or
// `signal`); returns what it printed, its exit and what `during(stdout)`
// returned.
async function up(args, ready, during, { timeoutMs = 120000, signal = 'SIGINT' } = {}) {
  const child = spawn(simfarm, ['up', '--var', varDir, '--listen', '127.0.0.1:0', ...args],
    // Its CLI config goes to a private XDG_CONFIG_HOME, not the user's.
    { cwd: top, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, XDG_CONFIG_HOME: path.join(tmp, 'config') } });
  let out = '', err = '';
  up.out = () => out;
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const seen = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
    const isReady = () => (ready instanceof RegExp ? ready.test(out) : ready(out));
    child.stdout.on('data', (d) => { out += d; if (isReady()) { clearTimeout(timer); resolve(); } });
    child.stderr.on('data', (d) => { err += d; });
    exited.then((e) => { clearTimeout(timer); reject(new Error(`up exited (${e.code ?? e.signal}):\n${out}\n${err}`)); });
  });
  try {
    await seen;
    const value = await during(out);
    child.kill(signal);
    const e = await exited;
    return { out, err, exit: e, value };
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
}

test('first run creates the database, starts a node and submits the demo job, and says when it ends', async () => {
  const ready = (out) => /demo job \d+ submitted: \S+/.test(out) && /connected to \S+ as node \d+/.test(out);
  const r = await up(['--cores', '1'], ready, async (out) => {
    // its page on the dashboard, not the API's JSON
    const [, base, id] = out.match(/demo job (?:\d+) submitted: (http:\/\/\S+)\/#\/jobs\/(\d+) /) ?? [];
    assert.ok(base, out);
    const page = await fetch(`${base}/`, { signal: AbortSignal.timeout(10000) });
    assert.match(page.headers.get('content-type'), /text\/html/);
    const res = await fetch(`${base}/api/jobs/${id}`, { signal: AbortSignal.timeout(10000) });
    assert.equal(res.status, 200);
    const job = await res.json();
    await eventually(async () => {
      const j = await (await fetch(`${base}/api/jobs/${id}`, { signal: AbortSignal.timeout(10000) })).json();
      return j.progress?.items_done > 0;
    }, 'the demo job under way', 60000);
    // ended (here by a cancel, sooner than its run): the terminal says so, with the page again
    const token = fs.readFileSync(path.join(varDir, 'token'), 'utf8').trim();
    const c = await fetch(`${base}/api/jobs/${id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(10000) });
    assert.equal(c.status, 200);
    await eventually(() => new RegExp(`demo job ${id} cancelled`).test(up.out()), 'the demo\'s end said', 30000);
    assert.match(up.out(), new RegExp(`^simfarm up: demo job ${id} cancelled in [\\d.]+ s; see ${base}/#/jobs/${id}\\n {2}price +[\\d.]+ ± [\\d.]+ +closed form [\\d.]+ +z [+-][\\d.]+$`, 'm'));
    return job;
  });
  assert.match(r.out, /creating a PostgreSQL cluster/);
  assert.ok(fs.existsSync(path.join(varDir, 'node.key')), 'the local node keeps its key in var/');
  assert.equal(r.value.owner, 'demo');
  assert.equal(r.value.kernel, 'option');
  assert.match(r.value.name, /^demo: /, 'the demo job has a name');
  const config = path.join(tmp, 'config', 'simfarm', 'config');
  assert.match(r.out, new RegExp(`wrote ${config}: `));
  assert.equal(r.exit.code, 0, r.err);
  assert.match(r.err, /PostgreSQL stopped/);
  const data = fs.readdirSync(path.join(varDir, 'pg', 'data'));
  assert.ok(data.includes('PG_VERSION'));
  assert.ok(!data.includes('postmaster.pid'), 'postgres still running after up stopped');
});

test('a second run reuses the database; --no-demo --no-node start neither; a hangup stops it', async () => {
  const r = await up(['--no-demo', '--no-node'], /Ctrl-C stops everything/, async (out) => {
    const base = out.match(/listening on (http:\/\/\S+)/)[1];
    const res = await fetch(`${base}/api/jobs`, { signal: AbortSignal.timeout(10000) });
    return res.json();
  }, { signal: 'SIGHUP' }); // what a terminal that closes sends
  assert.match(r.err, /SIGHUP, stopping/);
  assert.match(r.err, /PostgreSQL stopped/);
  assert.doesNotMatch(r.out, /creating a PostgreSQL cluster/);
  assert.doesNotMatch(r.out, /demo job/);
  assert.doesNotMatch(r.out, /connected to/);
  assert.equal(r.value.length, 1, 'the demo job of the first run is kept');
  // on another port than the first run's: the user config it wrote follows the farm
  const base = r.out.match(/listening on (http:\/\/\S+)/)[1];
  const config = path.join(tmp, 'config', 'simfarm', 'config');
  assert.match(r.out, new RegExp(`updated ${config}: .* use this farm at ${base}$`, 'm'));
  assert.match(fs.readFileSync(config, 'utf8'), new RegExp(`^server = ${base}$`, 'm'));
  // one the user wrote is left alone
  fs.writeFileSync(config, 'server = http://farm.example:8080\n');
  const again = await up(['--no-demo', '--no-node'], /Ctrl-C stops everything/, async () => {});
  assert.equal(fs.readFileSync(config, 'utf8'), 'server = http://farm.example:8080\n');
  assert.match(again.out, /export SIMFARM_CONFIG=/);
  assert.equal(r.exit.code, 0, r.err);
});

test('a PostgreSQL left running by a killed run is named, not used and then left behind', async () => {
  // up killed outright: its PostgreSQL, in a session of its own, runs on.
  const killed = await up(['--no-demo', '--no-node'], /Ctrl-C stops everything/, async () => {}, { signal: 'SIGKILL' });
  assert.equal(killed.exit.signal, 'SIGKILL');
  const pidFile = path.join(varDir, 'pg', 'data', 'postmaster.pid');
  const orphan = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
  assert.ok(alive(orphan), 'the killed run\'s PostgreSQL still runs');
  try {
    await assert.rejects(up(['--no-demo', '--no-node'], /Ctrl-C stops everything/, async () => {}),
      new RegExp(`another PostgreSQL \\(pid ${orphan}\\) already runs on \\S+: stop it \\(kill ${orphan}\\)`));
    assert.ok(alive(orphan), 'the other server is not ours to stop');
  } finally {
    process.kill(orphan, 'SIGINT');
    await eventually(() => !alive(orphan) && !fs.existsSync(pidFile), 'the orphan stopped', 60000);
  }
  // with it gone, up starts and stops its own again
  const r = await up(['--no-demo', '--no-node'], /Ctrl-C stops everything/, async () => {});
  assert.equal(r.exit.code, 0, r.err);
  assert.ok(!fs.existsSync(pidFile), 'postgres still running after up stopped');
});

test('--demo-items sets the demo\'s size; its end names its page and each output with its closed form and z, aligned', async () => {
  const names = ['price', 'delta', 'vega', 'rho', 'theta']; // examples/option.json asks for the Greeks
  const told = new RegExp(`demo job \\d+ complete[^\\n]*\\n((?: {2}\\S[^\\n]*\\n){${names.length}})`);
  const r = await up(['--cores', '1', '--demo-items', '2000000'], told, async (out) => {
    const [, base, id] = out.match(/demo job \d+ submitted: (http:\/\/\S+)\/#\/jobs\/(\d+) /);
    const job = await (await fetch(`${base}/api/jobs/${id}`, { signal: AbortSignal.timeout(10000) })).json();
    return { base, id, job };
  });
  assert.equal(r.exit.code, 0, r.err);
  const { base, id, job } = r.value;
  assert.equal(job.items, 2000000);
  assert.match(r.out, new RegExp(`^simfarm up: demo job ${id} complete in [\\d.]+ s; see ${base}/#/jobs/${id}$`, 'm'));
  const lines = told.exec(r.out)[1].trimEnd().split('\n');
  assert.deepEqual(lines.map((l) => l.trim().split(/ +/)[0]), names, r.out);
  for (const [i, l] of lines.entries()) {
    const [, mean, se, ref, z] = /^ {2}\S+ +(-?[\d.]+) ± ([\d.]+) +closed form (-?[\d.e-]+) +z ([+-][\d.]+)$/.exec(l) ?? [];
    assert.ok(z, `${names[i]}: ${l}`);
    // as the API has it: the estimate to its error's precision, z from the exact values
    const o = job.result.outputs[i];
    assert.equal(o.name, names[i]);
    assert.ok(Math.abs(Number(mean) - o.mean) <= Number(se) / 10, `${l}: mean ${o.mean}`);
    assert.equal(Number(ref), Number(o.closed_form.toPrecision(8)), l);
    assert.equal(z, `${o.mean >= o.closed_form ? '+' : '-'}${Math.abs((o.mean - o.closed_form) / o.stderr).toFixed(2)}`, l);
  }
  // one column each: the ±, the closed forms and the z line up
  for (const col of ['±', 'closed form', ' z ']) {
    assert.equal(new Set(lines.map((l) => l.indexOf(col))).size, 1, `${col} aligned:\n${lines.join('\n')}`);
  }
});

test('make run LISTEN=HOST:PORT runs up there', async () => {
  // -n: print the recipe only; `all` and the packages' stamp taken as done
  const none = path.join(tmp, 'no-deps.mk');
  const make = (...args) => run('make', ['-n', '-o', 'all', '-o', none, `DEPS_MK=${none}`, `BUILD=${build}`, 'run', ...args]);
  const r = await make('LISTEN=127.0.0.1:9090');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /simfarm up --allow-public-nodes --listen '127\.0\.0\.1:9090'$/m);
  const plain = await make();
  assert.match(plain.stdout, /simfarm up --allow-public-nodes *$/m);
});

test('a bad option is a usage error', async () => {
  const r = await run(simfarm, ['up', '--colour', 'red']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown option '--colour'/);
  const stray = await run(simfarm, ['up', '--no-demo', 'extra']);
  assert.equal(stray.code, 2);
  assert.match(stray.stderr, /unexpected argument 'extra'/);
  const items = await run(simfarm, ['up', '--demo-items', '0']);
  assert.equal(items.code, 2);
  assert.match(items.stderr, /--demo-items wants a number from 1 to 2\^50, not '0'/);
  const listen = await run(simfarm, ['up', '--listen', 'nosuch.invalid:8080']);
  assert.equal(listen.code, 2);
  assert.match(listen.stderr, /cannot resolve 'nosuch\.invalid'/);
});
