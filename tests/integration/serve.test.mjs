// `simfarm serve` as a user runs it: a real PostgreSQL, the real binary on
// a free port, real HTTP. Submissions are checked and kept across restarts;
// bad input gets an error that names the field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import os from 'node:os';
import https from 'node:https';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { createDatabase, psql, startPostgres } from '../lib/pg.mjs';
import { serve, call, tailEvents } from '../lib/coord.mjs';
import { selfSigned } from '../lib/tls.mjs';

const simfarm = path.join(build, 'bin/simfarm');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url);
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
});

test('one coordinator per database: a second is refused, naming the session of the first', async () => {
  const t0 = Date.now();
  const second = await run(simfarm, ['serve', '--db', pg.url, '--listen', '127.0.0.1:0'], { timeoutMs: 30000 });
  assert.equal(second.code, 1, second.stderr);
  assert.match(second.stderr, /waiting up to 5 s for it to let go/);
  assert.match(second.stderr, /another coordinator uses this database: PostgreSQL session (\d+) \(simfarm coordinator, from a local socket, since [^)]+\) holds its lock;.* SELECT pg_terminate_backend\(\1\)/);
  assert.ok(Date.now() - t0 >= 5000, 'it waited for the lock first');
  // the first goes on
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
  assert.equal((await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 5 })).status, 201);
});

test('--log-format json writes the log one JSON object a line; another format is a usage error', async () => {
  const second = await run(simfarm, ['serve', '--db', pg.url, '--listen', '127.0.0.1:0', '--log-format', 'json'],
    { timeoutMs: 30000 });
  assert.equal(second.code, 1, second.stderr);
  const lines = second.stderr.trim().split('\n');
  assert.ok(lines.length >= 2, second.stderr);
  const events = lines.map((l) => JSON.parse(l));
  for (const e of events) {
    assert.ok(Number.isInteger(e.ts) && e.ts > 1.7e12, `ts: ${JSON.stringify(e)}`);
    assert.ok(['debug', 'info', 'warn', 'error'].includes(e.level), e.level);
    assert.equal(typeof e.src, 'string');
    assert.equal(typeof e.msg, 'string');
  }
  assert.ok(events.some((e) => e.src === 'store' && /waiting up to 5 s for it to let go/.test(e.msg)), second.stderr);
  assert.ok(events.some((e) => e.src === 'serve' && e.msg === 'stopped'), second.stderr);
  const bad = await run(simfarm, ['serve', '--db', pg.url, '--log-format', 'xml']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--log-format wants text or json, not 'xml'/);
});

test('a coordinator that loses its database to another session stops', async () => {
  const db = await createDatabase(pg, 'takeover');
  const lone = await serve(db);
  // a session ends the coordinator's and takes the lock before it is back
  const holder = spawn('psql', ['-X', '-q', '-h', pg.host, '-p', String(pg.port), '-U', pg.user, '-d', 'takeover'],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  holder.stdout.on('data', (d) => { out += d; });
  holder.stdin.write("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'simfarm coordinator' " +
    "AND datname = 'takeover'; SELECT pg_advisory_lock(7216058); SELECT 'locked';\n");
  try {
    await eventually(() => out.includes('locked'), 'the lock taken', 10000);
    await lone.until(() => /another coordinator uses this database: PostgreSQL session \d+ \(psql,/.test(lone.stderr()),
      'the coordinator giving up');
    assert.equal((await lone.exited).code, 1, lone.stderr());
    await lone.stop();
  } finally {
    holder.stdin.end();
    await new Promise((resolve) => holder.on('exit', resolve));
  }
  // with the session gone, a coordinator starts on it again
  const back = await serve(db);
  assert.equal((await back.stop()).code, 0, back.stderr());
});

test('a coordinator whose lock another held meanwhile stops when it takes the lock back', async () => {
  const db = await createDatabase(pg, 'terms');
  const sessions = (app) => psql(pg, `SELECT count(*) FROM pg_stat_activity WHERE datname = 'terms' ` +
    `AND application_name = '${app}'`);
  const first = await serve(db);
  let second;
  try {
    assert.equal(await psql(pg, 'SELECT term FROM coordinator_lease', { db: 'terms' }), '1');
    // the first stands still while its lock goes, another coordinator takes the
    // database (ending the first's pool sessions) and dies
    process.kill(first.pid, 'SIGSTOP');
    await psql(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'terms' " +
      "AND application_name = 'simfarm coordinator'");
    await eventually(async () => await sessions('simfarm coordinator') === '0', 'the lock let go', 10000);
    second = await serve(db);
    assert.equal(await sessions('simfarm coordinator pool'), '2', 'only the second\'s pool is left');
    assert.equal(await psql(pg, 'SELECT term FROM coordinator_lease', { db: 'terms' }), '2');
    process.kill(second.pid, 'SIGKILL');
    await second.exited;
    await eventually(async () => await sessions('simfarm coordinator') === '0', 'the second\'s lock let go', 10000);
    // the first takes the lock back, finds the lease's term moved on, and
    // stops rather than go on from what it holds in memory
    process.kill(first.pid, 'SIGCONT');
    await first.until(() => /another coordinator held this database's lock while this one had lost it \(lease term 1, now 3\)/
      .test(first.stderr()), 'the first stopping');
    assert.equal((await first.exited).code, 1, first.stderr());
  } finally {
    try { process.kill(first.pid, 'SIGCONT'); } catch { /* gone */ }
    await first.stop();
    if (second) await second.stop();
  }
});

test('health says the database is up', async () => {
  const r = await call(srv, 'GET', '/health');
  assert.equal(r.status, 200);
  assert.deepEqual({ status: r.json.status, database: r.json.database }, { status: 'ok', database: 'up' });
  // the migrations of a new database print nothing of PostgreSQL's notices
  assert.doesNotMatch(srv.stderr(), /NOTICE/, srv.stderr());
});

test('a job is accepted, listed and read back', async () => {
  const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 1000000, seed: 7, owner: 'alice' });
  assert.equal(r.status, 201, r.text);
  assert.ok(Number.isInteger(r.json.id) && r.json.id > 0);
  const one = await call(srv, 'GET', `/api/jobs/${r.json.id}`);
  assert.equal(one.status, 200);
  assert.equal(one.json.kernel, 'option');
  assert.equal(one.json.items, 1000000);
  assert.equal(one.json.owner, 'alice');
  assert.ok(['pending', 'running'].includes(one.json.state), one.json.state);
  assert.equal(one.json.ctx_hash.length, 64);
  assert.deepEqual(one.json.spec.params, option);
  const list = await call(srv, 'GET', '/api/jobs');
  assert.equal(list.status, 200);
  assert.ok(list.json.some((j) => j.id === r.json.id));
});

test('bad submissions are refused with the field named', async () => {
  const cases = [
    [{ params: option, items: 10 }, 'kernel', /required/],
    [{ kernel: 'option', items: 10 }, 'params', /required/],
    [{ kernel: 'option', params: option }, 'items', /required/],
    [{ kernel: 'option', params: option, items: 0 }, 'items', /1 to 2\^50/],
    [{ kernel: 'option', params: option, items: 10, colour: 'red' }, 'colour', /unknown field/],
    [{ kernel: 'nope', params: option, items: 10 }, 'kernel', /./],
    [{ kernel: 'option', params: { ...option, sigma: -1 }, items: 10 }, 'params.sigma', /must be/],
    [{ kernel: 'option', params: option, items: 10, strategy: 'race' }, 'strategy', /single, tournament or stat_weights/],
    [{ kernel: 'option', params: option, items: 10, strategy: 'tournament' }, 'candidates', /2 to 64 candidates/],
  ];
  for (const [body, field, message] of cases) {
    const r = await call(srv, 'POST', '/api/jobs', body);
    assert.equal(r.status, 400, `${JSON.stringify(body)} -> ${r.text}`);
    assert.equal(r.json.field, field, r.text);
    assert.match(r.json.error, message);
  }
  const notJson = await call(srv, 'POST', '/api/jobs', '{"kernel": ');
  assert.equal(notJson.status, 400);
  assert.match(notJson.json.error, /not valid JSON/);
  const array = await call(srv, 'POST', '/api/jobs', '[1,2]');
  assert.equal(array.status, 400);
  assert.match(array.json.error, /JSON object/);
});

test('oversized bodies, unknown paths and unknown jobs', async () => {
  const big = await call(srv, 'POST', '/api/jobs', `{"pad": "${'x'.repeat(1100000)}"}`);
  assert.equal(big.status, 413);
  assert.equal((await call(srv, 'GET', '/nowhere')).status, 404);
  assert.equal((await call(srv, 'GET', '/api/jobs/999999')).status, 404);
  assert.equal((await call(srv, 'GET', '/api/jobs/abc')).status, 404);
  assert.equal((await call(srv, 'POST', '/health', {})).status, 405);
});

// Asks until check() holds or the deadline passes (state that changes in
// the database has no event the test could wait on).
test('the scheduler takes a submitted job and marks it running', async () => {
  const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 100 });
  assert.equal(r.status, 201);
  // The scheduler hears the job's NOTIFY, restores it and marks it running.
  await eventually(async () => (await call(srv, 'GET', `/api/jobs/${r.json.id}`)).json.state === 'running',
    'job running');
  const one = await call(srv, 'GET', `/api/jobs/${r.json.id}`);
  assert.ok(one.json.started_at);
});

test('metrics are Prometheus text', async () => {
  const r = await call(srv, 'GET', '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.text, /^simfarm_up 1$/m);
  assert.match(r.text, /^simfarm_database_up 1$/m);
  assert.match(r.text, /^simfarm_http_responses_total\{class="4xx"\} [1-9]\d*$/m);
  assert.match(r.text, /^# TYPE simfarm_actor_messages_total counter$/m);
});

test('jobs survive a restart; SIGTERM stops cleanly', async () => {
  const ev = tailEvents(srv, '', { timeoutMs: 20000 });
  await ev.until((x) => x.type === 'snapshot', 'snapshot');
  const r = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 5 });
  assert.equal(r.status, 201);
  const seen = await ev.until((x) => x.type === 'job.submitted' && x.job === r.json.id, 'job.submitted');
  await ev.close();
  const e = await srv.stop();
  assert.equal(e.code, 0, srv.stderr());
  assert.match(srv.stderr(), /stopped/);
  srv = await serve(pg.url);
  const again = await call(srv, 'GET', `/api/jobs/${r.json.id}`);
  assert.equal(again.status, 200);
  assert.equal(again.json.items, 5);
  // A dashboard back after the restart, with the last number it saw, gets
  // a snapshot: the events it asks to resume from were another run's.
  const back = tailEvents(srv, `?since=${seen.seq}`, { timeoutMs: 20000 });
  const first = await back.until(() => true, 'the first event after the restart');
  await back.close();
  assert.equal(first.type, 'snapshot', JSON.stringify(first));
  assert.ok(first.seq > seen.seq, `${first.seq} after ${seen.seq}`);
});

test('the web directory is served at /, and nothing outside it', async () => {
  const web = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-web-'));
  fs.writeFileSync(path.join(web, 'index.html'), '<title>simfarm</title>');
  fs.writeFileSync(path.join(web, 'contribute.html'), '<title>contribute</title>');
  fs.writeFileSync(path.join(web, 'app.js'), 'export {};');
  const other = await serve(await createDatabase(pg, 'webdir'), { extra: ['--web', web] });
  try {
    const index = await fetch(other.url + '/');
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type'), /^text\/html/);
    assert.equal(await index.text(), '<title>simfarm</title>');
    assert.equal(await (await fetch(other.url + '/contribute')).text(), '<title>contribute</title>');
    assert.match((await fetch(other.url + '/app.js')).headers.get('content-type'), /^text\/javascript/);
    assert.equal((await fetch(other.url + '/nothing-here.js')).status, 404);
    assert.equal((await fetch(other.url + '/.hidden')).status, 404);
    assert.equal((await call(other, 'GET', '/api/jobs')).status, 200, 'the API is still the API');
  } finally {
    await other.stop();
    fs.rmSync(web, { recursive: true, force: true });
  }
});

test('with a certificate it serves https', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-tls-'));
  const { cert, key } = await selfSigned(dir, 'coordinator');
  const web = path.join(top, 'web');
  const other = await serve(await createDatabase(pg, 'https'), { extra: ['--tls-cert', cert, '--tls-key', key, '--web', web],
    ca: cert });
  try {
    assert.match(other.url, /^https:/);
    const health = await call(other, 'GET', '/health');
    assert.equal(health.status, 200);
    assert.equal(health.json.status, 'ok');
    // The web directory's files whole, to a client that offers HTTP/2 (as
    // browsers do): lws 4.1 cut them short over HTTP/2, so it is not offered.
    for (const f of ['index.html', 'contribute.js', 'node/simfarm-node.js', 'node/simfarm-node.wasm']) {
      const got = path.join(dir, 'got');
      const r = await run('curl', ['-s', '--http2', '--cacert', cert, '-m', '10', '-o', got, '-w', '%{http_code} %{http_version}',
        `${other.url}/${f}`]);
      assert.equal(r.code, 0, `${f}: curl exit ${r.code}`);
      assert.equal(r.stdout, '200 1.1', f);
      assert.ok(fs.readFileSync(got).equals(fs.readFileSync(path.join(web, f))), `${f} arrived whole`);
    }
    const plain = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${other.port}/health`]);
    assert.notEqual(plain.stdout, '200', 'plain http is not served on the TLS port');
  } finally {
    await other.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const half = await run(simfarm, ['serve', '--db', pg.url, '--tls-cert', cert]);
  assert.equal(half.code, 2);
  assert.match(half.stderr, /both --tls-cert and --tls-key/);
});

// The common name of the certificate a new TLS handshake with port gets.
function servedName(port) {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, timeout: 15000 }, () => {
      const cn = s.getPeerCertificate().subject.CN;
      s.end();
      resolve(cn);
    });
    s.on('timeout', () => s.destroy(new Error('no TLS handshake in 15 s')));
    s.on('error', reject);
  });
}

// GET /health over agent (kept alive); resolves to { status, reused }.
function healthOn(agent, port) {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/health', agent, rejectUnauthorized: false, timeout: 15000 },
      (res) => { res.resume(); res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket })); });
    req.on('timeout', () => req.destroy(new Error('GET /health: no answer in 15 s')));
    req.on('error', reject);
  });
}

test('SIGHUP serves a renewed certificate, and refuses a pair that does not check out', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-renew-'));
  const first = await selfSigned(dir, 'first'), second = await selfSigned(dir, 'second', undefined, { days: 90 });
  const third = await selfSigned(dir, 'third');
  const ec = await selfSigned(dir, 'elliptic', undefined, { newKey: ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'] });
  const expiring = /TLS: the certificate in \S+cert\.pem \((\w+)\) expires on 20\d\d-\d\d-\d\d [^,]+, in (under a day|\d+ days?): renew it and send SIGHUP/g;
  const cert = path.join(dir, 'cert.pem'), key = path.join(dir, 'key.pem');
  const use = (c, k) => { fs.copyFileSync(c, cert); fs.copyFileSync(k, key); };
  const notAfter = (c) => Date.parse(new X509Certificate(fs.readFileSync(c)).validTo) / 1000;
  use(first.cert, first.key);
  const other = await serve(await createDatabase(pg, 'renewed'), { extra: ['--tls-cert', cert, '--tls-key', key],
    ca: first.cert });
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  let hups = 0;
  // SIGHUP, then the line it printed
  const hup = async () => {
    const n = ++hups;
    process.kill(other.pid, 'SIGHUP');
    await other.until(() => (other.stderr().match(/SIGHUP: .*\n/g) ?? []).length >= n, `SIGHUP ${n} answered`);
    return other.stderr().match(/SIGHUP: .*\n/g)[n - 1];
  };
  const metric = async (name) => {
    const m = await call(other, 'GET', '/metrics');
    const line = m.text.split('\n').find((l) => l.startsWith(`${name} `));
    assert.ok(line, `${name} in /metrics:\n${m.text}`);
    return Number(line.split(' ')[1]);
  };
  try {
    assert.equal(await servedName(other.port), 'first');
    // a day left (made this second, or a moment ago): said at start
    const said = [...other.stderr().matchAll(expiring)].map((m) => [m[1], m[2]]);
    assert.equal(said.length, 1, other.stderr());
    assert.equal(said[0][0], 'first');
    assert.ok(['under a day', '1 day'].includes(said[0][1]), said[0][1]);
    assert.equal(await metric('simfarm_tls_cert_not_after_seconds'), notAfter(first.cert));
    assert.deepEqual(await healthOn(agent, other.port), { status: 200, reused: false });

    use(second.cert, second.key);
    assert.match(await hup(), /SIGHUP: serving the certificate in \S+cert\.pem \(second, until 20\d\d-\d\d-\d\d /);
    assert.equal(await servedName(other.port), 'second');
    assert.equal([...other.stderr().matchAll(expiring)].length, 1, 'not said of a certificate with 90 days left');
    // the connection opened before the reload goes on
    assert.deepEqual(await healthOn(agent, other.port), { status: 200, reused: true });
    other.ca = second.cert; // call() checks the certificate against this CA
    assert.equal(await metric('simfarm_tls_cert_not_after_seconds'), notAfter(second.cert));

    // each refused: the message says why, and 'second' is still served
    const kept = /SIGHUP: kept the certificate served \(second, until [^)]+\): /;
    use(third.cert, second.key);
    const mismatch = await hup();
    assert.match(mismatch, kept);
    assert.match(mismatch, /key\.pem is not the key of the certificate in \S+cert\.pem \(third\)/);
    use(ec.cert, ec.key);
    assert.match(await hup(), /its key is EC, the one served RSA: restart the coordinator to change the key type/);
    fs.writeFileSync(cert, 'not a certificate\n');
    assert.match(await hup(), /cert\.pem holds no PEM certificate/);
    use(second.cert, second.key);
    fs.rmSync(key);
    assert.match(await hup(), /cannot read the key \S+key\.pem: No such file or directory/);
    assert.equal(await servedName(other.port), 'second');
    assert.equal((await call(other, 'GET', '/health')).status, 200);
    assert.equal(await metric('simfarm_tls_reloads_total{result="done"}'), 1);
    assert.equal(await metric('simfarm_tls_reloads_total{result="refused"}'), 4);
  } finally {
    agent.destroy();
    await other.stop();
  }
  // the same checks at start: it does not serve a pair that does not check out
  use(third.cert, second.key);
  const bad = await run(simfarm, ['serve', '--db', pg.url, '--listen', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', key]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /key\.pem is not the key of the certificate in \S+cert\.pem \(third\)/);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('SIGHUP without TLS changes nothing', async () => {
  process.kill(srv.pid, 'SIGHUP');
  await srv.until(() => /SIGHUP: no certificate to reload: serving plain http/.test(srv.stderr()), 'SIGHUP answered');
  assert.equal((await call(srv, 'GET', '/health')).status, 200);
});

test('a database named by two hosts: past a standby to the primary', async () => {
  // A fake standby: it declines SSL, lets anyone in and says it is in hot
  // standby, so libpq (target_session_attrs=read-write) drops it and opens
  // another socket to the next host; the store watches whichever one libpq
  // is using. (The new socket mostly gets the old one's number, so this
  // shows the failover works, not that a new number is followed.)
  let standby = 0;
  const fake = net.createServer((sock) => {
    standby++;
    let buf = Buffer.alloc(0);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 8 && buf.length >= buf.readInt32BE(0)) {
        const len = buf.readInt32BE(0), code = buf.readInt32BE(4);
        buf = buf.subarray(len);
        if (code === 80877103 || code === 80877104) { sock.write('N'); continue; } // SSL, GSS: no
        const status = (k, v) => {
          const body = Buffer.from(`${k}\0${v}\0`);
          const m = Buffer.alloc(5);
          m.write('S');
          m.writeInt32BE(4 + body.length, 1);
          return Buffer.concat([m, body]);
        };
        const ok = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0]); // AuthenticationOk
        const key = Buffer.from([0x4b, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2]);
        const ready = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
        sock.write(Buffer.concat([ok, status('server_version', '15.0'), status('in_hot_standby', 'on'),
          status('default_transaction_read_only', 'on'), key, ready]));
      }
    });
    sock.on('error', () => {});
  });
  await new Promise((resolve) => fake.listen(0, '127.0.0.1', resolve));
  await createDatabase(pg, 'twohosts');
  const two = await serve(`host=127.0.0.1,${pg.host} port=${fake.address().port},${pg.port} user=postgres ` +
    'dbname=twohosts target_session_attrs=read-write connect_timeout=10');
  try {
    const r = await call(two, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 5 });
    assert.equal(r.status, 201, r.text);
    assert.ok(standby >= 1, 'the standby was tried first');
  } finally {
    await two.stop();
    await new Promise((resolve) => fake.close(resolve));
  }
});

test('a schema it cannot migrate: said, and tried again later and later', async () => {
  // A schema of its own whose `jobs` is not ours: the first migration fails
  // on every connection, and the store must not retry ten times a second.
  // One connection in the pool (and the one that LISTENs, which does not
  // migrate): every failure is connection 0's, one after the other.
  await psql(pg, 'CREATE SCHEMA odd; CREATE TABLE odd.jobs (x int)');
  const child = spawn(simfarm, ['serve', '--db', `${pg.url} options='-c search_path=odd'`, '--pool', '1',
    '--listen', '127.0.0.1:0',
    '--token-file', path.join(os.tmpdir(), `simfarm-odd-${process.pid}`)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const waits = () => [...err.matchAll(/connection 0 lost: migration failed \(connecting again in (\d+) ms\)/g)]
    .map((m) => Number(m[1]));
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`three failed migrations not seen in 30 s:\n${err}`)), 30000);
      child.stderr.on('data', (d) => {
        err += d;
        if (waits().length >= 4) { clearTimeout(timer); resolve(); }
      });
    });
    assert.match(err, /001_core failed: .*relation "jobs" already exists/);
    assert.deepEqual(waits().slice(0, 4), [100, 200, 400, 800]);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.on('exit', resolve));
    await psql(pg, 'DROP SCHEMA odd CASCADE');
  }
});

test('--listen: a host name is served on its address, IPv6 in brackets; a name that does not resolve or an address not of this machine is refused', async () => {
  const nodb = 'host=/nonexistent'; // refused before the database is needed
  const named = await run(simfarm, ['serve', '--db', nodb, '--listen', 'nosuch.invalid:0'], { timeoutMs: 30000 });
  assert.equal(named.code, 2, named.stderr);
  assert.match(named.stderr, /--listen nosuch\.invalid:0: cannot resolve 'nosuch\.invalid'/);
  // 192.0.2.1 is TEST-NET-1: no interface has it
  const foreign = await run(simfarm, ['serve', '--db', nodb, '--listen', '192.0.2.1:0'], { timeoutMs: 30000 });
  assert.equal(foreign.code, 1, foreign.stderr);
  assert.match(foreign.stderr, /cannot listen on 192\.0\.2\.1:0/);
  const cases = [['localhost:0', '127.0.0.1', '::1'], ['[::1]:0', '[::1]', '127.0.0.1'], ['::1:0', '[::1]', '127.0.0.1']];
  for (const [i, [arg, shown, other]] of cases.entries()) {
    const db = await createDatabase(pg, `listen${i}`);
    const child = spawn(simfarm, ['serve', '--db', db, '--listen', arg], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      const m = await eventually(() => out.match(/listening on http:\/\/(\S+):(\d+)/), `${arg}: listening`, 30000);
      assert.equal(m[1], shown, arg);
      const res = await fetch(`http://${m[1]}:${m[2]}/health`, { signal: AbortSignal.timeout(10000) });
      assert.ok(res.status === 200 || res.status === 503, `${arg}: /health ${res.status}`);
      // bound to that address only, not to every interface
      const refused = await new Promise((resolve) => {
        const c = net.connect({ host: other, port: Number(m[2]) });
        c.on('connect', () => { c.destroy(); resolve(false); });
        c.on('error', () => resolve(true));
      });
      assert.ok(refused, `${arg}: port ${m[2]} also open on ${other}`);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }
});

test('an unknown option or a stray word is named as such, before any missing value', async () => {
  for (const [args, re] of [[['--bogus'], /unknown option '--bogus'/], [['stray'], /unexpected argument 'stray'/],
    [['--db'], /'--db' needs a value/]]) {
    const r = await run(simfarm, ['serve', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, re, args.join(' '));
  }
});

test('without its database it says so', async () => {
  await pg.stop();
  pg = undefined;
  await srv.until(() => srv.stderr().includes('simfarm: database down'), 'database down');
  const r = await call(srv, 'GET', '/health');
  assert.equal(r.status, 503);
  assert.equal(r.json.database, 'down');
});
