// The burst actor (actors/coord/burst.c) against real parts: PostgreSQL,
// `simfarm serve --burst ...`, real `simfarm node` processes, and for the
// slurm provider a private Slurm (tests/lib/slurm.mjs). Each provider: a job
// submitted with no node online brings burst nodes up, the job ends with one
// local run's result, and once nothing is pending the nodes (older than a
// young limit of 3 s here) are drained and leave. Through Slurm, the node
// jobs show in squeue, and a node job cancelled mid-chunk loses nothing.
// Prints BENCH burst_first_node_s and burst_scale_down_s (docs/benchmarks.md).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run } from '../lib/proc.mjs';
import { call, serve } from '../lib/coord.mjs';
import { localRun, sameBits } from '../lib/reference.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { slurmMissing, squeue, startSlurm } from '../lib/slurm.mjs';

const option = JSON.parse(fs.readFileSync(new URL('../../examples/option.json', import.meta.url), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-burst-'));
// Burst nodes enrol with claim tokens of tier own, which a job that names
// no tiers takes; every tier trusted, so a lone node's results need no check.
const verify = { trust: ['own', 'team', 'community'] };
// Decisions twice a second, pending work to be done within 6 s, nodes
// younger than 3 s kept, a drain forced after 20 s.
const burstFlags = ['--burst-max', '2', '--burst-interval', '0.5', '--burst-target-minutes', '0.1',
  '--burst-young-minutes', '0.05', '--burst-grace', '20', '--burst-cores', '1', '--chunk-ms', '1000'];

let pg;
let dbs = 0;
before(async () => { pg = await startPostgres(); });
after(async () => {
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function farm(provider, extra = [], env = {}) {
  const name = `burst${++dbs}`;
  const url = await createDatabase(pg, name);
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir);
  const srv = await serve(url, { extra: ['--burst', provider, '--burst-dir', dir, ...burstFlags, ...extra], env });
  srv.db = name;
  srv.dir = dir;
  srv.q = (sql) => psql(pg, sql, { db: name });
  return srv;
}

async function submit(srv, items, seed) {
  const res = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items, seed, verify });
  assert.equal(res.status, 201, res.text);
  return res.json.id;
}

async function finished(srv, id, timeoutMs = 90000) {
  return eventually(async () => {
    const j = (await call(srv, 'GET', `/api/jobs/${id}`)).json;
    return j.state === 'complete' || j.state === 'failed' ? j : null;
  }, `job ${id} complete`, timeoutMs, 100);
}

// The burst nodes the database knows, by name, with their sessions' work.
async function burstNodes(srv, provider) {
  const r = await call(srv, 'GET', '/api/nodes?limit=1000');
  assert.equal(r.status, 200, r.text);
  return r.json.filter((n) => (n.name ?? '').startsWith(`burst-${provider}-`));
}

// The last decision line of the log: { target, current, action }.
function lastDecision(srv) {
  const all = [...srv.stderr().matchAll(/burst: target (\d+), current (\d+): (up|down|hold) \((.*)\)/g)];
  const m = all.at(-1);
  return m && { target: Number(m[1]), current: Number(m[2]), action: m[3], why: m[4] };
}

// Seconds from the job's submission to the first accepted chunk of a node
// named like `like`, in the database's own clock.
async function firstAccept(srv, id, like) {
  const s = await srv.q(`SELECT extract(epoch FROM min(j.at) - min(b.created_at)) FROM journal j JOIN nodes n ON n.id = j.node_id
    JOIN jobs b ON b.id = j.job_id WHERE j.job_id = ${id} AND j.type = 1 AND n.name LIKE '${like}'`);
  return Number(s);
}

// Waits for every burst node to be gone (the log's `gone` line for each one
// that came up, and a decision with nothing current); returns when.
async function allGone(srv, provider) {
  return eventually(() => {
    const up = new Set([...srv.stderr().matchAll(new RegExp(`node (burst-${provider}-\\S+) up`, 'g'))].map((m) => m[1]));
    const gone = new Set([...srv.stderr().matchAll(new RegExp(`node (burst-${provider}-\\S+) gone`, 'g'))].map((m) => m[1]));
    const d = lastDecision(srv);
    return up.size > 0 && [...up].every((n) => gone.has(n)) && d && d.current === 0 ? Date.now() : null;
  }, `every burst-${provider} node gone`, 60000, 100);
}

test('local: a job with no node online brings burst nodes up, ends exact, and they drain and leave', async () => {
  const srv = await farm('local');
  try {
    await srv.until(() => /burst: provider local: 0 to 2 nodes of 1 cores joining ws:\/\/127\.0\.0\.1:\d+\/ws\/node/
      .test(srv.stderr()), 'the burst actor started');
    assert.equal((await burstNodes(srv, 'local')).length, 0);
    const items = 60000000, seed = 21;
    const id = await submit(srv, items, seed);
    await srv.until(() => /burst: target [12], current 0: up \(60000000 items pending/.test(srv.stderr()), 'an up decision');
    const job = await finished(srv, id);
    const done = Date.now();
    const goneAt = allGone(srv, 'local'); // watched from now on, while the local run computes
    const nodes = await burstNodes(srv, 'local');
    assert.ok(nodes.length >= 1, 'burst nodes enrolled under their names');
    assert.ok(nodes.every((n) => n.tier === 'own' && n.owner === 'admin'), JSON.stringify(nodes));
    sameBits(job, await localRun(items, seed));
    const gone = await goneAt;
    console.log(`local: scale-down ${(gone - done) / 1000} s after the job ended`);
    assert.match(lastDecision(srv).why, /nothing pending/);
    // what the actor publishes: GET /api/burst through `simfarm burst
    // status`, and its series in /metrics
    const env = { ...process.env, XDG_CONFIG_HOME: path.join(tmp, 'no-config') };
    const st = await run(path.join(build, 'bin/simfarm'), ['burst', 'status', '--server', srv.url, '--json'], { env });
    assert.equal(st.code, 0, st.stderr);
    const status = JSON.parse(st.stdout);
    assert.equal(status.provider, 'local');
    assert.equal(status.current, 0);
    assert.equal(status.max, 2);
    assert.match(status.last.why, /nothing pending/);
    const m = (await call(srv, 'GET', '/metrics')).text;
    assert.match(m, /^simfarm_burst_target_nodes 0$/m);
    assert.match(m, /^simfarm_burst_nodes_started_total [1-9]\d*$/m);
    assert.match(m, /^simfarm_burst_decisions_total\{action="up"\} [1-9]\d*$/m);
    // each node drained: it finished its chunks and said goodbye
    for (const f of fs.readdirSync(srv.dir).filter((x) => x.endsWith('.log')))
      assert.match(fs.readFileSync(path.join(srv.dir, f), 'utf8'), /drained, leaving/, f);
    assert.match(srv.stderr(), /node burst-local-1 gone after \d+ s: exited with status 0/);
  } finally {
    await srv.stop();
  }
});

test('local: --burst-min keeps a node with nothing pending; the coordinator\'s stop drains it', async () => {
  const srv = await farm('local', ['--burst-min', '1']);
  await srv.until(() => /simfarm session: node \d+ \(burst-local-1\) connected/.test(srv.stderr()), 'the kept node');
  assert.match(srv.stderr(), /burst: target 1, current 0: up \(nothing pending: 1 more\)/);
  const e = await srv.stop();
  assert.equal(e.code, 0, srv.stderr());
  const log = path.join(srv.dir, 'burst-local-1.log');
  await eventually(() => /drained, leaving/.test(fs.readFileSync(log, 'utf8')), 'the node drained', 20000, 50);
  // and its process is gone (its key is in this farm's directory alone)
  await eventually(async () => !(await run('/bin/ps', ['-eo', 'args'])).stdout.includes(path.join(srv.dir, 'burst-local-1.key')),
    'the node\'s process gone', 20000, 100);
});

// The pending work is the scheduler's count of the items not done yet: for
// a tournament, each candidate still in runs to the end (4 × 32000 here),
// not the job's items less every candidate's accepts.
test('local: a tournament\'s pending items are each candidate\'s to its end', async () => {
  const srv = await farm('local');
  try {
    const t = JSON.parse(fs.readFileSync(new URL('../../examples/combat-tournament.json', import.meta.url), 'utf8'));
    const res = await call(srv, 'POST', '/api/jobs', { ...t, name: undefined, tiers: undefined, items: 32000, verify });
    assert.equal(res.status, 201, res.text);
    await srv.until(() => /burst: target [12], current 0: up \(128000 items pending/.test(srv.stderr()),
      'an up decision that counts every candidate');
    assert.equal((await call(srv, 'POST', `/api/jobs/${res.json.id}/cancel`)).status, 200);
    await allGone(srv, 'local');
  } finally {
    await srv.stop();
  }
});

// The exec provider's script: nodes as background processes with pid files.
const script = `#!/bin/sh
dir="$SIMFARM_BURST_DIR"
case "$1" in
up)
  i=0
  for t in $NODE_CLAIM_TOKENS; do
    i=$((i + 1))
    id="$(date +%s%N | cut -c 9-16)$i"
    NODE_CLAIM_TOKEN="$t" setsid "$SIMFARM_BIN" node --server "$SIMFARM_SERVER" --key "$dir/$id.key" \\
      --cores "$SIMFARM_NODE_CORES" --name "burst-exec-$id" >"$dir/$id.log" 2>&1 </dev/null &
    echo $! >"$dir/$id.pid"
    echo "$id"
  done
  ;;
down)
  sig=TERM
  [ "$3" = force ] && sig=KILL
  kill -$sig "$(cat "$dir/$2.pid")"
  ;;
list)
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    id=$(basename "$f" .pid)
    case "$(ps -o stat= -p "$(cat "$f")" 2>/dev/null)" in
    "" | Z*) rm -f "$f" ;;
    *) echo "$id running" ;;
    esac
  done
  ;;
*) echo "usage: $0 up N | down ID [force] | list" >&2; exit 2 ;;
esac
`;

test('exec: an operator\'s script brings nodes up and down; the job ends exact', async () => {
  const file = path.join(tmp, 'burst.sh');
  fs.writeFileSync(file, script, { mode: 0o755 });
  const srv = await farm('exec', ['--burst-exec', file]);
  try {
    const items = 40000000, seed = 22;
    const id = await submit(srv, items, seed);
    const job = await finished(srv, id);
    const done = Date.now();
    const goneAt = allGone(srv, 'exec');
    assert.ok((await burstNodes(srv, 'exec')).length >= 1);
    sameBits(job, await localRun(items, seed));
    const gone = await goneAt;
    console.log(`exec: scale-down ${(gone - done) / 1000} s after the job ended`);
    for (const f of fs.readdirSync(srv.dir).filter((x) => x.endsWith('.log')))
      assert.match(fs.readFileSync(path.join(srv.dir, f), 'utf8'), /drained, leaving/, f);
    assert.doesNotMatch(srv.stderr(), /provider errors|burst: exec: .* failed/);
  } finally {
    await srv.stop();
  }
});

test('exec: a script that fails is counted and said, each try waits twice as long as the one before, and a fixed script brings the node', async () => {
  const file = path.join(tmp, 'broken.sh');
  const tries = path.join(tmp, 'broken.tries');
  fs.writeFileSync(file, `#!/bin/sh\n[ "$1" = up ] && date +%s%N >>'${tries}'\necho "no cloud credentials" >&2\nexit 3\n`,
    { mode: 0o755 });
  const srv = await farm('exec', ['--burst-exec', file]);
  try {
    const items = 4000000, seed = 3;
    const id = await submit(srv, items, seed);
    await srv.until(() => /burst: exec: .*broken\.sh up 1 failed \(status 3\): no cloud credentials/.test(srv.stderr()),
      'the failed up');
    assert.match(srv.stderr(), /burst: exec: .*broken\.sh list failed \(status 3\)/);
    // --burst-interval 0.5: the next up 1 s after the first failure, 2 s after the second, 4 s after the third
    await srv.until(() => /burst: exec: up failed 3 times in a row: the next try in 4\.0 s/.test(srv.stderr()),
      'the third failure in a row', 20000);
    assert.match(srv.stderr(), /burst: exec: up failed 1 time in a row: the next try in 1\.0 s/);
    assert.match(srv.stderr(), /burst: exec: up failed 2 times in a row: the next try in 2\.0 s/);
    const at = fs.readFileSync(tries, 'utf8').trim().split('\n').map((t) => Number(BigInt(t) / 1000000n));
    assert.equal(at.length, 3, `the script's ups: ${at}`);
    assert.ok(at[1] - at[0] >= 1000 && at[2] - at[1] >= 2000, `ups ${at[1] - at[0]} ms and ${at[2] - at[1]} ms apart`);
    assert.doesNotMatch(srv.stderr(), /node burst-exec-\S+ up/);
    // the decisions meanwhile hold, saying why
    const held = await eventually(async () => {
      const r = await call(srv, 'GET', '/api/burst');
      return r.json.last?.action === 'hold' ? r : null;
    }, 'a decision that holds', 5000, 50);
    assert.match(held.json.last.why, /: 1 more wanted; up failed 3 times in a row, the next try in \d/);
    assert.equal(held.json.up_failures, 3, held.text);
    assert.ok(held.json.next_up_in_s > 0 && held.json.next_up_in_s <= 4, held.text);
    const env = { ...process.env, XDG_CONFIG_HOME: path.join(tmp, 'no-config') };
    const st = await run(path.join(build, 'bin/simfarm'), ['burst', 'status', '--server', srv.url], { env });
    assert.match(st.stdout, /^ {2}failing {3}up failed 3 times in a row: the next try in \d/m, st.stdout);
    assert.match(st.stdout, /last +hold, .*1 more wanted; up failed 3 times in a row, the next try in/, st.stdout);
    const metrics = (await call(srv, 'GET', '/metrics')).text;
    assert.match(metrics, /^simfarm_burst_up_failures 3$/m);
    // the script fixed: the next try brings a node, and the job ends exact
    fs.writeFileSync(file, script, { mode: 0o755 });
    await srv.until(() => /burst: exec: up brought a node again, after 3 failed in a row/.test(srv.stderr()),
      'the node after the fix', 20000);
    const goneAt = allGone(srv, 'exec');
    sameBits(await finished(srv, id), await localRun(items, seed));
    await goneAt;
    assert.equal((await call(srv, 'GET', '/api/burst')).json.up_failures, 0);
  } finally {
    await srv.stop();
  }
});

// `simfarm burst status` reads GET /api/burst (cd_burst_status_json): here
// from a stand-in server answering what the actor publishes.
test('burst status shows the nodes, the target and the last decision', async () => {
  const status = { provider: 'slurm', current: 2, target: 3, min: 0, max: 5, pending_items: 1200000000,
    node_items_per_s: 31000000, young_s: 3300, target_s: 600,
    last: { at: Math.floor(Date.now() / 1000) - 4, action: 'up', why: '1200000000 items pending at 31000000 items/s a node, to finish within 600 s: 1 more' },
    nodes: [{ id: '14', name: 'burst-slurm-14', state: 'running', age_s: 125 },
      { id: '15', name: 'burst-slurm-15', state: 'starting', age_s: 2 }] };
  const server = http.createServer((req, res) => {
    res.writeHead(req.url === '/api/burst' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(req.url === '/api/burst' ? JSON.stringify(status) : '{"error":"not found"}');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  const env = { ...process.env, XDG_CONFIG_HOME: path.join(tmp, 'no-config') }; // no user config
  try {
    const r = await run(path.join(build, 'bin/simfarm'), ['burst', 'status', '--server', url], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^burst slurm: 2 nodes, target 3 \(0 to 5\)$/m);
    assert.match(r.stdout, /pending +1\.2G items, 31(\.0)?M items\/s a node/);
    assert.match(r.stdout, /last +up, [456](\.\d)? s ago: 1200000000 items pending .*: 1 more/);
    assert.match(r.stdout, /^14 +burst-slurm-14 +running +2 min 5 s$/m);
    assert.match(r.stdout, /^15 +burst-slurm-15 +starting +2(\.0)? s$/m);
    const j = await run(path.join(build, 'bin/simfarm'), ['burst', 'status', '--server', url, '--json'], { env });
    assert.deepEqual(JSON.parse(j.stdout), status);
  } finally {
    server.close();
  }
  // a coordinator with no burst actor says so
  const srv = await serve(await createDatabase(pg, 'noburst'));
  try {
    const r = await run(path.join(build, 'bin/simfarm'), ['burst', 'status', '--server', srv.url], { env });
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /simfarm burst status: this coordinator runs no burst actor \(serve --burst\)/);
  } finally {
    await srv.stop();
  }
});

test('serve refuses burst flags it cannot use', async () => {
  const bin = path.join(build, 'bin/simfarm');
  for (const [args, want] of [
    [['--burst', 'cloud'], /--burst wants local, slurm or exec, not 'cloud'/],
    [['--burst', 'exec'], /--burst exec needs --burst-exec SCRIPT/],
    [['--burst', 'local', '--burst-max', '0'], /--burst-max wants a number from 1 to 256/],
    [['--burst-max', '3'], /need --burst local\|slurm\|exec/],
    [['--burst', 'local', '--burst-young-minutes', 'soon'], /--burst-young-minutes wants a number/],
  ]) {
    const r = await run(bin, ['serve', '--db', 'dbname=none', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, want);
  }
});

test('slurm: node jobs through a real Slurm; a node job cancelled mid-chunk loses nothing', async (t) => {
  const missing = slurmMissing();
  if (missing) { t.skip(missing); return; }
  const slurm = await startSlurm({ cpus: 2 });
  let srv;
  try {
    // nothing but sbatch in the queue can be a burst node
    const srun = await run('/usr/bin/srun', ['--ntasks=1', 'hostname'], { env: slurm.env, timeoutMs: 30000 });
    assert.equal(srun.code, 0, `srun hostname: ${srun.stderr}\n${slurm.logs()}`);
    // pending work to be done within 3 s: two nodes are wanted until the last second or two
    srv = await farm('slurm', ['--slurm-time', '10', '--slurm-partition', 'debug', '--burst-target-minutes', '0.05'],
      { SLURM_CONF: slurm.conf });
    const items = 1200000000, seed = 23;
    const id = await submit(srv, items, seed);
    const jobs = await eventually(async () => {
      const q = (await squeue(slurm)).filter((j) => j.name.startsWith('simfarm-burst-'));
      return q.length >= 2 && q.every((j) => j.state === 'RUNNING') ? q : null;
    }, 'two node jobs running in squeue', 60000, 200);
    // one of them holds a chunk: cancel it, as an operator would
    const victim = await eventually(async () => {
      const nodes = await burstNodes(srv, 'slurm');
      const busy = nodes.find((n) => n.online && n.in_flight > 0 &&
        jobs.some((j) => n.name === `burst-slurm-${j.id}`));
      return busy ? busy.name.slice('burst-slurm-'.length) : null;
    }, 'a Slurm node online with a chunk', 60000, 200);
    const sc = await run('/usr/bin/scancel', [victim], { env: slurm.env });
    assert.equal(sc.code, 0, sc.stderr);
    const job = await finished(srv, id, 120000);
    const done = Date.now();
    const goneAt = allGone(srv, 'slurm');
    const first = await firstAccept(srv, id, 'burst-slurm-%');
    console.log(`BENCH burst_first_node_s ${first.toFixed(2)} s`);
    sameBits(job, await localRun(items, seed));
    const gone = await goneAt;
    assert.deepEqual((await squeue(slurm)).filter((j) => j.name.startsWith('simfarm-burst-')), [],
      'no node job left in squeue');
    console.log(`BENCH burst_scale_down_s ${((gone - done) / 1000).toFixed(2)} s`);
    assert.match(srv.stderr(), new RegExp(`node burst-slurm-${victim} gone`));
    // every node left by draining: none needed forcing after the grace
    assert.doesNotMatch(srv.stderr(), /still there \d+ s after SIGTERM/);
    // the decisions, for the record
    console.log(srv.stderr().split('\n').filter((l) => / burst: | session: /.test(l)).join('\n'));
  } catch (e) {
    throw new Error(`${e.stack}\n--- serve\n${srv?.stderr()}\n${slurm.logs()}`);
  } finally {
    await srv?.stop();
    await slurm.stop();
  }
});
