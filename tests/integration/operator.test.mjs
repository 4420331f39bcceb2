// What an operator reads and scrapes (docs/coordinator.md, "Operator log"
// and "Metrics"): a line for each event of a real job and a real node, a
// refused node, a failed login and a 429, in text and in JSON
// (--log-format json, one object a line with the ids as fields), repeated
// failed logins kept to one line; and /metrics read by a strict parser of
// Prometheus' text format 0.0.4 (and by promtool when it is installed),
// with the series docs/api.md lists and histograms whose buckets grow.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, top } from '../lib/proc.mjs';
import { createDatabase, startPostgres } from '../lib/pg.mjs';
import { serve, call, metrics } from '../lib/coord.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-operator-'));
const tiers = ['own', 'team', 'community', 'public'];
const job = (items, seed) => ({ kernel: 'option', params: option, items, seed, tiers, verify: { trust: tiers } });

// serve() of coord.mjs looks for 'simfarm: database up'; a JSON log never
// says that, so the JSON coordinator is started here.
function serveJsonBySelf(db) {
  const tokenFile = path.join(tmp, 'json-token');
  const child = spawn(simfarm, ['serve', '--db', db, '--listen', '127.0.0.1:0', '--token-file', tokenFile,
    '--allow-public-nodes', '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  const waiters = [];
  const check = () => { for (const w of [...waiters]) if (w.match()) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); } };
  child.stdout.on('data', (d) => { out += d; check(); });
  child.stderr.on('data', (d) => { err += d; check(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const until = (match, what, timeoutMs = 30000) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} not seen in ${timeoutMs} ms:\n${err}`)), timeoutMs);
    waiters.push({ match, resolve: () => { clearTimeout(timer); resolve(); } });
    exited.then((e) => { clearTimeout(timer); reject(new Error(`serve exited (${e.code ?? e.signal}) waiting for ${what}:\n${err}`)); });
    check();
  });
  return (async () => {
    await until(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 'listening');
    await until(() => err.includes('"event":"database_up"'), 'database_up');
    const port = Number(out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)[1]);
    return {
      url: `http://127.0.0.1:${port}`, port, token: fs.readFileSync(tokenFile, 'utf8').trim(),
      stderr: () => err, until: (m, what) => until(m, what),
      async stop() { child.kill('SIGTERM'); await exited; },
    };
  })();
}

// The coordinator's lines: text lines, or parsed JSON objects.
const lines = (srv, json) => srv.stderr().split('\n').filter((l) => l !== '').map((l) => (json ? JSON.parse(l) : l));

// An API request from another loopback address (127.0.0.2): its failed
// logins count against that address alone.
function requestFrom(srv, localAddress, method, p, token) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${srv.url}${p}`, { method, localAddress, headers: {
      authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

function startNode(srv, name, extra = []) {
  return spawn(simfarm, ['node', '--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--key', path.join(tmp, `${name}.key`),
    '--cores', '1', ...extra], { stdio: 'ignore' });
}

// Runs one node through one job and one refusal; returns the job's id and
// the node's id.
async function scenario(srv, json, seed) {
  const has = (pred) => () => lines(srv, json).some(pred);
  const text = (re) => has((l) => (json ? re.test(l.msg) : re.test(l)));
  const sub = await call(srv, 'POST', '/api/jobs', job(400000, seed));
  assert.equal(sub.status, 201, sub.text);
  const id = sub.json.id;
  const node = startNode(srv, `node-${seed}`);
  await srv.until(text(new RegExp(`job ${id} finished: complete`)), `job ${id} finished`);
  node.kill('SIGTERM');
  await new Promise((resolve) => node.on('exit', resolve));
  await srv.until(text(/node \d+ left /), 'node left');
  // a claim token nobody made: refused before its welcome
  const bad = startNode(srv, `bad-${seed}`, ['--claim-token', 'sfc_nosuchtokennosuchtokennosuchtokennosuchtok']);
  await srv.until(text(/node connection from 127\.0\.0\.1 refused/), 'node refused');
  bad.kill('SIGKILL');
  // failed logins: ten bad tokens from 127.0.0.2, then a 429
  const badToken = `sf_${'A'.repeat(43)}`;
  for (let i = 0; i < 10; i++) assert.equal(await requestFrom(srv, '127.0.0.2', 'POST', '/api/jobs', badToken), 401);
  assert.equal(await requestFrom(srv, '127.0.0.2', 'POST', '/api/jobs', badToken), 429);
  await srv.until(text(/429 to 127\.0\.0\.2 for POST \/api\/jobs/), '429 line');
  return id;
}

let pg, srv, jsrv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--allow-public-nodes'] });
  jsrv = await serveJsonBySelf(await createDatabase(pg, 'operator_json'));
});
after(async () => {
  await srv?.stop();
  await jsrv?.stop();
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('text log: a line for each event of a job, a node, a refusal, a failed login and a 429', async () => {
  const id = await scenario(srv, false, 21);
  const log = lines(srv, false);
  const one = (re, what) => {
    const found = log.filter((l) => re.test(l));
    assert.ok(found.length >= 1, `${what}: no line ${re} in\n${log.join('\n')}`);
    return found[0];
  };
  one(new RegExp(`^simfarm: job ${id} submitted by admin: option, 400000 items$`), 'submitted');
  const started = one(new RegExp(`^simfarm scheduler: job ${id} started: its first chunk went to node (\\d+)`), 'started');
  const nodeId = started.match(/node (\d+)/)[1];
  one(new RegExp(`^simfarm scheduler: job ${id} finished: complete, 400000 items after \\d+\\.\\d s$`), 'finished');
  one(new RegExp(`^simfarm session: node ${nodeId}( \\(.*\\))? connected from 127\\.0\\.0\\.1: owner .*, tier public, `), 'connected');
  one(new RegExp(`^simfarm session: node ${nodeId} left \\((left|disconnected)\\) after \\d+\\.\\d s: [1-9]\\d* chunks, [1-9]\\d* items$`), 'left');
  one(/^simfarm: node connection from 127\.0\.0\.1 refused, key [0-9a-f]{16}: .*claim token/, 'refused');
  // ten failed logins from one address: one line, the rest held back
  const fails = log.filter((l) => /failed API login from 127\.0\.0\.2/.test(l));
  assert.equal(fails.length, 1, fails.join('\n'));
  assert.match(fails[0], /^simfarm: failed API login from 127\.0\.0\.2: POST \/api\/jobs with a bad token$/);
  one(/^simfarm: 429 to 127\.0\.0\.2 for POST \/api\/jobs: too many failed logins from it$/, '429');
  // every line is one line: no libpq text broken over several
  for (const l of log) assert.match(l, /^simfarm( [a-z]+)?: /, l);
});

test('JSON log: one object a line, with the ids as fields', async () => {
  const id = await scenario(jsrv, true, 22);
  const log = lines(jsrv, true);
  for (const l of log) {
    assert.equal(typeof l.ts, 'number');
    assert.ok(['debug', 'info', 'warn', 'error'].includes(l.level), JSON.stringify(l));
    assert.equal(typeof l.msg, 'string');
  }
  const ev = (name, pred = () => true) => {
    const e = log.find((l) => l.event === name && pred(l));
    assert.ok(e, `no ${name} line in\n${log.map((l) => JSON.stringify(l)).join('\n')}`);
    return e;
  };
  const sub = ev('job_submitted', (l) => l.job === id);
  assert.deepEqual([sub.owner, sub.kernel, sub.items], ['admin', 'option', 400000]);
  const started = ev('job_started', (l) => l.job === id);
  assert.ok(started.node > 0);
  assert.equal(started.kernel, 'option');
  const fin = ev('job_finished', (l) => l.job === id);
  assert.equal(fin.state, 'complete');
  assert.equal(fin.items, 400000);
  assert.ok(fin.duration_s >= 0);
  const con = ev('node_connected', (l) => l.node === started.node);
  assert.equal(con.addr, '127.0.0.1');
  assert.equal(con.tier, 'public');
  assert.equal(typeof con.version, 'string');
  const left = ev('node_left', (l) => l.node === started.node);
  assert.ok(['left', 'disconnected'].includes(left.why), left.why);
  assert.ok(left.items > 0 && left.items <= 400000, String(left.items));
  assert.ok(left.after_s >= 0 && left.chunks > 0);
  const ref = ev('node_refused');
  assert.equal(ref.addr, '127.0.0.1');
  assert.match(ref.why, /claim token/);
  assert.match(ref.key, /^[0-9a-f]{16}$/);
  assert.equal(log.filter((l) => l.event === 'login_failed').length, 1);
  const lf = ev('login_failed');
  assert.deepEqual([lf.addr, lf.method, lf.path, lf.status], ['127.0.0.2', 'POST', '/api/jobs', 401]);
  const rl = ev('rate_limited');
  assert.deepEqual([rl.addr, rl.path, rl.status], ['127.0.0.2', '/api/jobs', 429]);
  ev('database_up');
});

// Prometheus' text format 0.0.4, strictly: comments are HELP or TYPE, a
// family's TYPE comes before its samples and once, every sample line is
// name{labels} value with a valid name, labels and number, no series twice,
// and a histogram's buckets have growing le, never decrease, and end in +Inf
// equal to _count. Returns { 'name{labels}': value } and the types.
function parseMetrics(textIn) {
  const samples = new Map(), types = new Map(), helps = new Set();
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const sampleRe = new RegExp(`^(${name})(\\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"(?:,|(?=\\})))*\\})? (\\S+)$`);
  assert.ok(textIn.endsWith('\n'), 'the text ends with a line break');
  for (const line of textIn.slice(0, -1).split('\n')) {
    if (line.startsWith('#')) {
      const m = line.match(new RegExp(`^# (HELP|TYPE) (${name}) (.*)$`));
      assert.ok(m, `bad comment: ${line}`);
      if (m[1] === 'TYPE') {
        assert.ok(['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3]), line);
        assert.ok(!types.has(m[2]), `TYPE twice: ${m[2]}`);
        types.set(m[2], m[3]);
      } else {
        assert.ok(!helps.has(m[2]), `HELP twice: ${m[2]}`);
        helps.add(m[2]);
      }
      continue;
    }
    const m = line.match(sampleRe);
    assert.ok(m, `bad sample line: ${JSON.stringify(line)}`);
    const v = m[3];
    assert.ok(/^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^[-+]?Inf$|^NaN$/.test(v), `bad value: ${line}`);
    const family = m[1].replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(m[1]) || types.get(family) === 'histogram', `sample before its TYPE: ${line}`);
    const key = m[1] + (m[2] ?? '');
    assert.ok(!samples.has(key), `series twice: ${key}`);
    samples.set(key, Number(v.replace('Inf', 'Infinity')));
  }
  for (const [fam, type] of types) {
    if (type !== 'histogram') continue;
    const buckets = [...samples].filter(([k]) => k.startsWith(`${fam}_bucket{`));
    assert.ok(buckets.length >= 2, `${fam}: no buckets`);
    let le = -Infinity, last = -1;
    for (const [k, v] of buckets) {
      const b = k.match(/le="([^"]+)"/)[1];
      const n = b === '+Inf' ? Infinity : Number(b);
      assert.ok(n > le, `${fam}: le not growing at ${k}`);
      assert.ok(v >= last, `${fam}: bucket ${k} less than the one before`);
      le = n;
      last = v;
    }
    assert.equal(le, Infinity, `${fam}: no +Inf bucket`);
    assert.equal(samples.get(`${fam}_count`), last, `${fam}: _count is not the +Inf bucket`);
    assert.ok(samples.has(`${fam}_sum`), `${fam}: no _sum`);
  }
  return { samples, types };
}

test('/metrics: Prometheus text with the operator series, histograms that grow', async () => {
  // a node online while it is read, so the node gauges count it
  const sub = await call(srv, 'POST', '/api/jobs', job(1e9, 23)); // runs past the test
  assert.equal(sub.status, 201);
  const node = startNode(srv, 'metrics');
  try {
    await srv.until(() => new RegExp(`job ${sub.json.id} started`).test(srv.stderr()), 'job started');
    // the scheduler's gauges are of its last sweep (every second)
    await eventually(async () => (await metrics(srv))['simfarm_jobs{state="running"}'] === 1, 'the job counted running', 10000);
    const r = await call(srv, 'GET', '/metrics', undefined, null);
    assert.equal(r.status, 200);
    const { samples: m, types } = parseMetrics(r.text);
    for (const s of ['simfarm_jobs{state="pending"}', 'simfarm_jobs{state="running"}',
      'simfarm_nodes_online{tier="public",backend="cpu"}', 'simfarm_nodes_online{tier="own",backend="cuda"}',
      'simfarm_kernel_chunk_results_total{kernel="option",outcome="accepted"}',
      'simfarm_kernel_items_accepted_total{kernel="combat"}', `simfarm_build_info{version="${r.text.match(/simfarm_build_info\{version="([^"]+)"\}/)?.[1]}"}`,
      'process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_open_fds', 'process_max_fds',
      'process_start_time_seconds', 'simfarm_connections', 'simfarm_connections_max',
      'simfarm_connections_per_address_max', 'simfarm_connections_refused_total{why="per_address"}',
      'simfarm_connections_evicted_total', 'simfarm_dispatch_latency_seconds_count',
      'simfarm_completion_latency_seconds_count'])
      assert.ok(m.has(s), `no ${s} in\n${r.text}`);
    assert.equal(types.get('simfarm_dispatch_latency_seconds'), 'histogram');
    assert.equal(types.get('simfarm_completion_latency_seconds'), 'histogram');
    assert.equal(m.get('simfarm_nodes_online{tier="public",backend="cpu"}'), 1);
    assert.equal(m.get('simfarm_jobs{state="running"}'), 1);
    assert.ok(m.get('simfarm_kernel_chunk_results_total{kernel="option",outcome="accepted"}') > 0);
    assert.ok(m.get('simfarm_kernel_items_accepted_total{kernel="option"}') >= 400000);
    assert.ok(m.get('simfarm_dispatch_latency_seconds_count') > 0);
    assert.ok(m.get('simfarm_completion_latency_seconds_count') > 0);
    assert.ok(m.get('process_open_fds') > 0 && m.get('process_open_fds') < m.get('process_max_fds'));
    assert.ok(m.get('process_start_time_seconds') > 1.6e9 && m.get('process_start_time_seconds') <= Date.now() / 1000 + 1);
    assert.ok(m.get('process_resident_memory_bytes') > 1e6);
    assert.ok(m.get('simfarm_connections') >= 1);
    let promtool = null;
    try { promtool = execFileSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).trim(); } catch { /* none */ }
    if (promtool) execFileSync(promtool, ['check', 'metrics'], { input: r.text });
  } finally {
    node.kill('SIGKILL');
  }
});
