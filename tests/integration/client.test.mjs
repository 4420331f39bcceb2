// The client commands (submit, jobs, job, watch, cancel, nodes, token) as a
// user runs them: against a real `simfarm serve` with a real PostgreSQL and
// an admin token from --token-file, and against a whole `simfarm up`. Every
// error is one line on stderr starting "simfarm <cmd>: " with exit status 1
// (the request failed) or 2 (usage). A fake server of raw bytes tries the
// HTTP client on framings and faults the coordinator does not produce.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, run, top } from '../lib/proc.mjs';
import { psql, startPostgres } from '../lib/pg.mjs';
import { selfSigned } from '../lib/tls.mjs';

const simfarm = path.join(build, 'bin/simfarm');
// As root, `up`'s PostgreSQL runs as the postgres user, who must reach it.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-client-'));
fs.chmodSync(tmp, 0o755);
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// The environment of every command: none of the user's settings, an empty
// config directory of our own.
const xdg = path.join(tmp, 'xdg');
fs.mkdirSync(xdg);
const baseEnv = { ...process.env, XDG_CONFIG_HOME: xdg, HOME: tmp };
for (const k of ['SIMFARM_SERVER', 'SIMFARM_TOKEN', 'SIMFARM_CONFIG', 'SIMFARM_DB']) delete baseEnv[k];

function cli(args, { env = {}, timeoutMs = 30000 } = {}) {
  return run(simfarm, args, { env: { ...baseEnv, ...env }, timeoutMs });
}

// Asserts a failure: the exit status and one line on stderr naming the command.
function failed(r, cmd, code, message) {
  assert.equal(r.code, code, `exit ${r.code}, stderr: ${r.stderr}`);
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `one line on stderr, not:\n${r.stderr}`);
  assert.ok(lines[0].startsWith(`simfarm ${cmd}: `), lines[0]);
  if (message) assert.match(lines[0], message);
}

// A port nothing listens on.
async function closedPort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

function writeFile(name, text, mode = 0o644) {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, text, { mode });
  return p;
}

// A small copy of examples/european.json, so jobs on a farm without nodes
// are cheap to cancel.
const european = JSON.parse(fs.readFileSync(path.join(top, 'examples/european.json'), 'utf8'));
const smallJobItems = 1000000;
const smallJob = writeFile('small.json', JSON.stringify({ ...european, items: smallJobItems }));

const commands = [
  ['submit', [smallJob]], ['jobs', []], ['job', ['1']], ['watch', ['1']], ['cancel', ['1']], ['nodes', []],
  ['token create', ['--kind', 'api']], ['token list', []], ['token revoke', ['1']],
];
const argv = (cmd, args) => [...cmd.split(' '), ...args];

describe('without a server', () => {
  test('every command explains itself with --help', async () => {
    for (const [cmd] of commands) {
      const r = await cli(argv(cmd, ['--help']));
      assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`^usage: simfarm ${cmd}`), cmd);
      assert.match(r.stdout, /--server URL/, cmd);
    }
    const help = await cli(['help']);
    for (const cmd of ['submit', 'jobs', 'job', 'watch', 'cancel', 'nodes', 'token'])
      assert.match(help.stdout, new RegExp(`^  ${cmd} `, 'm'), cmd);
  });

  test('an unreachable server: exit 1, "cannot reach URL: connection refused"', async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}`;
    for (const [cmd, args] of commands) {
      const r = await cli(argv(cmd, [...args, '--server', url, '--token', 'sf_x']));
      failed(r, cmd, 1, new RegExp(`cannot reach ${url}: connection refused$`));
    }
  });

  test('https, a bad URL, unknown options and missing arguments are usage errors', async () => {
    failed(await cli(['jobs', '--server', 'ws://127.0.0.1:8080']), 'jobs', 2,
      /'ws:\/\/127\.0\.0\.1:8080' is not an http:\/\/ or https:\/\/HOST:PORT URL/);
    failed(await cli(['jobs', '--server', 'http://127.0.0.1:99999']), 'jobs', 2, /port/);
    failed(await cli(['jobs', '--colour', 'red']), 'jobs', 2, /unknown option '--colour'/);
    failed(await cli(['jobs', '--state', 'sleepy']), 'jobs', 2, /--state/);
    failed(await cli(['jobs', '--limit', '0']), 'jobs', 2, /--limit/);
    failed(await cli(['jobs', '--server']), 'jobs', 2, /'--server' needs a value/);
    failed(await cli(['submit']), 'submit', 2, /missing the job file/);
    failed(await cli(['job']), 'job', 2, /missing the job id/);
    failed(await cli(['job', 'forty-two']), 'job', 2, /job ids are positive whole numbers, not 'forty-two'/);
    failed(await cli(['cancel', '0']), 'cancel', 2, /positive/);
    failed(await cli(['watch', '1', '2']), 'watch', 2, /unexpected argument '2'/);
    failed(await cli(['token']), 'token', 2, /create, list or revoke/);
    failed(await cli(['token', 'mint']), 'token', 2, /unknown subcommand 'mint'/);
    failed(await cli(['token', 'create']), 'token create', 2, /--kind/);
    failed(await cli(['token', 'create', '--kind', 'root']), 'token create', 2, /--kind is api or claim/);
    failed(await cli(['token', 'create', '--kind', 'claim', '--tier', 'gold']), 'token create', 2, /--tier/);
    failed(await cli(['token', 'create', '--kind', 'claim', '--expires-in', 'soon']), 'token create', 2,
      /--expires-in/);
  });

  test('a job file that is missing or not JSON is refused before anything is sent', async () => {
    failed(await cli(['submit', path.join(tmp, 'nope.json')]), 'submit', 2, /cannot read .*nope\.json: No such file/);
    const bad = writeFile('bad.json', '{\n  "kernel": "option",\n  "items": 10,,\n}\n');
    failed(await cli(['submit', bad]), 'submit', 2, /bad\.json is not valid JSON: line 3, column \d+: /);
    const unterminated = writeFile('open.json', '{"kernel": "option", "params": {');
    failed(await cli(['submit', unterminated]), 'submit', 2, /open\.json is not valid JSON: line 1, column \d+/);
    const array = writeFile('array.json', '[1, 2]');
    failed(await cli(['submit', array]), 'submit', 2, /a job is a JSON object/);
    // Checked before connecting: no server is needed to say so.
    failed(await cli(['submit', bad, '--server', 'http://127.0.0.1:1']), 'submit', 2, /not valid JSON/);
  });

  test('the config file: keys, comments, errors with file and line, and what overrides it', async () => {
    const port = await closedPort();
    const cfg = writeFile('good.conf', `# a comment\n\nserver = http://127.0.0.1:${port}\n  token = sf_abc  \n`, 0o600);
    // The server named in the file is the one tried.
    failed(await cli(['jobs', '--config', cfg]), 'jobs', 1, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}:`));
    failed(await cli(['jobs'], { env: { SIMFARM_CONFIG: cfg } }), 'jobs', 1, new RegExp(`:${port}:`));
    // $XDG_CONFIG_HOME/simfarm/config when nothing else names one.
    const home = path.join(tmp, 'xdg-cfg');
    fs.mkdirSync(path.join(home, 'simfarm'), { recursive: true });
    fs.copyFileSync(cfg, path.join(home, 'simfarm', 'config'));
    failed(await cli(['jobs'], { env: { XDG_CONFIG_HOME: home } }), 'jobs', 1, new RegExp(`:${port}:`));
    // The environment beats the file, a flag beats both.
    const other = await closedPort();
    failed(await cli(['jobs', '--config', cfg], { env: { SIMFARM_SERVER: `http://127.0.0.1:${other}` } }), 'jobs', 1,
      new RegExp(`:${other}:`));
    failed(await cli(['jobs', '--config', cfg, '--server', `http://localhost:${other}`],
      { env: { SIMFARM_SERVER: `http://127.0.0.1:${port}` } }), 'jobs', 1, new RegExp(`localhost:${other}:`));

    const broken = writeFile('broken.conf', 'server = http://127.0.0.1:8080\nthis is not a setting\n');
    failed(await cli(['jobs', '--config', broken]), 'jobs', 2, new RegExp(`${broken}:2: expected 'key = value'`));
    const unknown = writeFile('unknown.conf', '# ok\nsrever = http://127.0.0.1:8080\n');
    failed(await cli(['nodes', '--config', unknown]), 'nodes', 2, new RegExp(`${unknown}:2: unknown key 'srever'`));
    failed(await cli(['jobs', '--config', path.join(tmp, 'absent.conf')]), 'jobs', 2, /cannot read the config file/);
  });
});

// A server that answers every request with raw bytes of our choosing, to
// see the HTTP client cope with framings and faults the coordinator does
// not produce. Resolves to { url, requests, close }.
async function rawServer(answer) {
  const requests = [];
  const srv = net.createServer((sock) => {
    let data = '';
    sock.on('data', (d) => {
      data += d;
      if (!data.includes('\r\n\r\n')) return;
      requests.push(data);
      answer(sock, data);
    });
    sock.on('error', () => {});
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    requests,
    close: () => new Promise((resolve) => srv.close(resolve)),
  };
}

describe('HTTP framings and faults', () => {
  const list = '[{"id":1,"state":"complete","owner":"o","kernel":"option","items":10,"created_at":"2026-01-02T03:04:05+00:00"}]';

  test('a chunked answer, in pieces', async () => {
    const srv = await rawServer((sock) => {
      const body = Buffer.from(list);
      sock.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      sock.write(`5;ext=1\r\n${body.subarray(0, 5)}\r\n`);
      setTimeout(() => sock.end(`${(body.length - 5).toString(16)}\r\n${body.subarray(5)}\r\n0\r\n\r\n`), 50);
    });
    try {
      const r = await cli(['jobs', '--json', '--server', srv.url, '--token', 'sf_t']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${list}\n`);
      const req = srv.requests[0];
      assert.match(req, /^GET \/api\/jobs HTTP\/1\.1\r\n/);
      assert.match(req, /\r\nConnection: close\r\n/);
      assert.match(req, /\r\nAuthorization: Bearer sf_t\r\n/);
      const table = await cli(['jobs', '--server', srv.url]);
      // a complete job is all done, as the dashboard shows it, whatever its items done say
      assert.match(table.stdout, /^1 +complete +o +option +10 +100% +2026-01-02 03:04:05 UTC$/m);
    } finally {
      await srv.close();
    }
  });

  test('an answer that ends with the connection, and query strings escaped', async () => {
    const srv = await rawServer((sock) => sock.end(`HTTP/1.1 200 OK\r\n\r\n${list}`));
    try {
      const r = await cli(['jobs', '--json', '--owner', 'ann lee&co', '--state', 'running', '--server', `${srv.url}/`]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${list}\n`);
      assert.match(srv.requests[0], /^GET \/api\/jobs\?state=running&owner=ann%20lee%26co HTTP\/1\.1/);
    } finally {
      await srv.close();
    }
  });

  test('watch, piped, writes a line when the state changes even with no items done', async () => {
    const states = ['pending', 'pending', 'running', 'running', 'cancelled'];
    let n = 0;
    const srv = await rawServer((sock) => {
      const state = states[Math.min(n++, states.length - 1)];
      const body = JSON.stringify({ id: 5, state, items: 1000, progress: { items_done: 0 } });
      sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    try {
      const r = await cli(['watch', '5', '--server', srv.url]);
      assert.equal(r.code, 1, r.stderr);
      const lines = r.stdout.split('\n').filter((l) => l !== '');
      assert.deepEqual(lines.map((l) => l.split(/[ :]/)[2]), ['pending', 'running', 'cancelled'], r.stdout);
    } finally {
      await srv.close();
    }
  });

  test('watch, piped, writes a line when a running job becomes blocked and when that clears', async () => {
    const none = 'no node is online';
    const polls = [[100, ''], [200, ''], [200, none], [200, none], [200, ''], [200, '']];
    let n = 0;
    const srv = await rawServer((sock) => {
      const body = JSON.stringify(n < polls.length
        ? { id: 5, state: 'running', items: 1000, progress: { items_done: polls[n][0], blocked: polls[n][1] || undefined } }
        : { id: 5, state: 'complete', items: 1000, result: { items_done: 1000, items_failed: 0, outputs: [] } });
      n++;
      sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    try {
      const r = await cli(['watch', '5', '--server', srv.url]);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith(' '));
      assert.deepEqual(lines, [
        'job 5 running: 100/1000 items (10.0%), 0 items/s',
        lines[1], // the rate, measured between two polls
        `job 5 running, blocked: ${none}`,
        lines[3],
        'job 5 complete: 1000 items done',
      ], r.stdout);
      assert.match(lines[1], /^job 5 running: 200\/1000 items \(20\.0%\), \d+ items\/s/);
      assert.match(lines[3], /^job 5 running: 200\/1000 items \(20\.0%\)/);
    } finally {
      await srv.close();
    }
  });

  test('watch on an 80-column terminal draws its bar, the estimate giving way to it', async () => {
    const outputs = [{ name: 'price', count: 1000, mean: 10.45059, stderr: 0.00045 }];
    let n = 0;
    const srv = await rawServer((sock) => {
      const body = JSON.stringify(n++ < 3
        ? { id: 5, state: 'running', items: 2e9, progress: { items_done: 1.054e9, items_per_s: 1.98e8, outputs } }
        : { id: 5, state: 'complete', items: 2e9, result: { items_done: 2e9, items_failed: 0, outputs } });
      sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    try {
      // script(1) gives it a terminal, of 80 columns
      const cmd = `stty cols 80 rows 24 && exec ${simfarm} watch 5 --server ${srv.url}`;
      const r = await run('script', ['-qfec', cmd, '/dev/null'], { env: baseEnv, timeoutMs: 30000 });
      assert.equal(r.code, 0, r.stdout);
      const drawn = r.stdout.split('\r').map((l) => l.replace(/\x1b\[K/g, '')).filter((l) => l.startsWith('job 5 ['));
      assert.ok(drawn.length >= 1, `no bar in ${JSON.stringify(r.stdout.slice(0, 400))}`);
      for (const l of drawn) {
        assert.ok(l.length <= 79, `${l.length} columns: ${l}`);
        assert.match(l, /^job 5 \[#{10,}\.{10,}\]  52\.7%  1\.1G\/2G items  198M items\/s  ETA \S+/);
      }
      assert.match(r.stdout, /job 5 complete: 2000000000 items done/);
    } finally {
      await srv.close();
    }
  });

  test('watch ends a stat_weights job with its weights, a tournament with its ranking and winner', async () => {
    const outputs = [{ name: 'price', count: 1000, mean: 7.1, stderr: 0.01 }];
    const ended = {
      7: { strategy: 'stat_weights', result: { items_done: 1000, outputs,
        weights: [{ name: 'delta', step: 0.5, weight: 0.5612, stderr: 0.0031 }] } },
      8: { strategy: 'tournament', result: { items_done: 800, outputs, winner: 'haste set', candidates: [
        { name: 'as worn', alive: false, rank: 2, items: 300, mean: 6.5, stderr: 0.1, dropped_after: 1 },
        { name: 'haste set', alive: true, rank: 1, items: 500, mean: 7.1, stderr: 0.01, dropped_after: 0 }] } },
    };
    const srv = await rawServer((sock, data) => {
      const id = Number(/^GET \/api\/jobs\/(\d+)/.exec(data)[1]);
      const body = JSON.stringify({ id, state: 'complete', items: 1000, ...ended[id] });
      sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    try {
      const w = await cli(['watch', '7', '--server', srv.url]);
      assert.equal(w.code, 0, w.stderr);
      assert.match(w.stdout, /^ {4}delta +0\.5612 ± 0\.0031 +\(step 0\.5\)$/m);
      const t = await cli(['watch', '8', '--server', srv.url]);
      assert.equal(t.code, 0, t.stderr);
      assert.match(t.stdout, /^ {2}winner {4}haste set$/m);
      assert.match(t.stdout, /^ {4}#1 +haste set +7\.1 ± 0\.01 +500 items, in to the end$/m);
      assert.match(t.stdout, /^ {4}#2 +as worn +6\.5 ± 0\.1 +300 items, dropped after phase 1$/m);
      // jobs shows a complete job 100% done whatever its items done, as the dashboard
      const listSrv = await rawServer((sock) => {
        const body = JSON.stringify([{ id: 8, state: 'complete', owner: 'o', kernel: 'combat', items: 128000,
          created_at: '2026-01-02T03:04:05+00:00', result: { items_done: 8000 } }]);
        sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
      try {
        const l = await cli(['jobs', '--server', listSrv.url]);
        assert.match(l.stdout, /^8 +complete +o +combat +128k +100% /m);
      } finally {
        await listSrv.close();
      }
    } finally {
      await srv.close();
    }
  });

  test('a long prefix and query make a whole request line', async () => {
    const srv = await rawServer((sock) => sock.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]'));
    try {
      const prefix = `/${'p'.repeat(200)}`, owner = '&'.repeat(150), kernel = 'k'.repeat(300);
      const r = await cli(['jobs', '--owner', owner, '--kernel', kernel, '--server', `${srv.url}${prefix}`]);
      assert.equal(r.code, 0, r.stderr);
      const want = `GET ${prefix}/api/jobs?owner=${'%26'.repeat(150)}&kernel=${kernel} HTTP/1.1\r\nHost: 127.0.0.1:`;
      assert.ok(srv.requests[0].startsWith(want), srv.requests[0].slice(0, 1200));
    } finally {
      await srv.close();
    }
  });

  test('a path prefix in --server is kept', async () => {
    const srv = await rawServer((sock) => sock.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]'));
    try {
      const r = await cli(['nodes', '--server', `${srv.url}/farm/`]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'no nodes\n');
      assert.match(srv.requests[0], /^GET \/farm\/api\/nodes HTTP\/1\.1/);
    } finally {
      await srv.close();
    }
  });

  test('submit sends its job again, with the same key, until it is answered', async () => {
    // Each connection is answered once, from a script: the keys it saw.
    const scripted = async (script) => {
      const keys = [];
      const srv = await rawServer((sock, data) => {
        if (sock.answered) return;
        sock.answered = true;
        keys.push(data.match(/\r\nIdempotency-Key: ([^\r]*)\r\n/)?.[1]);
        const next = script[Math.min(keys.length, script.length) - 1];
        if (next === null) sock.destroy();
        else sock.end(`HTTP/1.1 ${next[0]}\r\nContent-Length: ${Buffer.byteLength(next[1])}\r\n\r\n${next[1]}`);
      });
      return { srv, keys };
    };
    const busy = ['503 Service Unavailable', '{"error":"the database did not answer in time"}'];
    const a = await scripted([busy, null, ['201 Created', '{"id":7,"state":"pending"}']]);
    try {
      const r = await cli(['submit', smallJob, '--server', a.srv.url, '--token', 'sf_t']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^job 7 submitted: /);
      assert.equal(a.keys.length, 3, 'a 503 and a cut connection are tried again');
      assert.match(a.keys[0], /^[0-9a-f]{32}$/);
      assert.deepEqual(a.keys, [a.keys[0], a.keys[0], a.keys[0]]);
    } finally {
      await a.srv.close();
    }
    const b = await scripted([['409 Conflict', '{"error":"being stored right now"}'],
      ['200 OK', '{"id":9,"replayed":true}']]);
    try {
      const r = await cli(['submit', smallJob, '--key', 'nightly-1', '--server', b.srv.url]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^job 9 submitted: /);
      assert.deepEqual(b.keys, ['nightly-1', 'nightly-1']);
    } finally {
      await b.srv.close();
    }
    // Refused for 30 s: what happened over the tries, not only the last answer.
    const down = await scripted([busy]);
    try {
      const r = await cli(['submit', smallJob, '--server', down.srv.url], { timeoutMs: 60000 });
      failed(r, 'submit', 1, /^simfarm submit: the job was not stored after \d+ tries over (29|30|31) s \(the coordinator answered 503: its database is away or slow; the last: the database did not answer in time\): send it again with --key [0-9a-f]{32}, which stores it once$/);
      assert.ok(down.keys.length > 10, `${down.keys.length} tries`);
    } finally {
      await down.srv.close();
    }
    // A refusal is an answer: sent once.
    const c = await scripted([['400 Bad Request', '{"error":"must be positive","field":"items"}']]);
    try {
      failed(await cli(['submit', smallJob, '--server', c.srv.url]), 'submit', 1, /items: must be positive$/);
      assert.equal(c.keys.length, 1);
    } finally {
      await c.srv.close();
    }
    failed(await cli(['submit', smallJob, '--key', 'two words', '--server', c.srv.url]), 'submit', 2,
      /--key: must be 1 to 128 visible ASCII characters/);
  });

  test('job shows how much of a result is verified, only the parts there are; nodes marks a quarantined node', async () => {
    const ver = (v) => ({ verified_items: 0, trusted_items: 0, unchecked_items: 0, checks_passed: 0, checks_failed: 0,
      checks_waiting: 0, checks_abandoned: 0, retracted_items: 0, quarantined_nodes: [], ...v });
    const answers = {
      '/api/jobs/5': { id: 5, state: 'running', items: 4000000, kernel: 'option', progress: { items_done: 2000000,
        verification: ver({ verified_items: 1200000, unchecked_items: 2800000, checks_passed: 12, checks_failed: 1,
          retracted_items: 40000, quarantined_nodes: [7, 9] }) } },
      '/api/jobs/6': { id: 6, state: 'complete', items: 1000, kernel: 'option', started_at: '2026-01-02T03:04:05+00:00',
        finished_at: '2026-01-02T03:04:06+00:00', result: { items_done: 1000, outputs: [],
          verification: ver({ trusted_items: 1000 }) } },
      '/api/jobs/8': { id: 8, state: 'complete', items: 3000, kernel: 'option', result: { items_done: 3000, outputs: [],
        verification: ver({ verified_items: 1000, unchecked_items: 2000, checks_passed: 1, checks_abandoned: 2 }) } },
      '/api/jobs/9': { id: 9, state: 'pending', items: 10, kernel: 'option' },
      '/api/nodes': [
        { id: 7, name: 'bad', owner: 'mallory', tier: 'community', online: false, revoked_at: '2026-01-02T03:04:05+00:00',
          quarantined_at: '2026-01-02T03:04:05+00:00', checks_passed: 0, checks_failed: 1 },
        { id: 8, name: 'gone', owner: 'ann', tier: 'community', online: false, revoked_at: '2026-01-02T03:04:05+00:00',
          quarantined_at: null, checks_passed: 0, checks_failed: 0 },
        { id: 9, name: 'good', owner: 'bob', tier: 'community', online: false, quarantined_at: null, checks_passed: 12,
          checks_failed: 0 }],
    };
    const srv = await rawServer((sock, data) => {
      const target = data.match(/^GET (\S+) /)?.[1];
      const body = JSON.stringify(answers[target] ?? { error: 'no such thing' });
      sock.end(`HTTP/1.1 ${answers[target] ? '200 OK' : '404 Not Found'}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    try {
      const line = async (id) => {
        const r = await cli(['job', String(id), '--server', srv.url]);
        assert.equal(r.code, 0, r.stderr);
        return r.stdout.split('\n').filter((l) => l.startsWith('  verified'));
      };
      assert.deepEqual(await line(5), ['  verified  1,200,000 of 4,000,000 items (30.0%), trusted 0, unchecked 2,800,000; '
        + 'checks 12 passed, 1 failed, 0 waiting; retracted 40,000 items; quarantined nodes: 7, 9']);
      assert.deepEqual(await line(6), ['  verified  0 of 1,000 items (0.0%), trusted 1,000, unchecked 0']);
      assert.deepEqual(await line(8), ['  verified  1,000 of 3,000 items (33.3%), trusted 0, unchecked 2,000; '
        + 'checks 1 passed, 0 failed, 0 waiting, 2 abandoned']);
      assert.deepEqual(await line(9), [], 'a job with no verification yet has no line');
      // watch ends on the same line
      const w = await cli(['watch', '6', '--server', srv.url]);
      assert.equal(w.code, 0, w.stderr);
      assert.match(w.stdout, /^job 6 complete: 1000 items done in [\d.]+ s\n {2}verified 0 of 1,000 items \(0\.0%\), trusted 1,000, unchecked 0\n$/);

      const n = await cli(['nodes', '--server', srv.url]);
      assert.equal(n.code, 0, n.stderr);
      assert.match(n.stdout, /^ID +NAME +OWNER +TIER +STATUS +CORES +SLOTS +ITEMS\/S +ITEMS +CHECKS +SYSTEM +LAST SEEN$/m);
      assert.match(n.stdout, /^7 +bad +mallory +community +quarantined +\S+ +- +\S+ +\S+ +0\/1 /m);
      assert.match(n.stdout, /^8 +gone +ann +community +revoked +\S+ +- +\S+ +\S+ +- /m);
      assert.match(n.stdout, /^9 +good +bob +community +offline +\S+ +- +\S+ +\S+ +12\/0 /m);
    } finally {
      await srv.close();
    }
  });

  test('faults: cut short, not HTTP, not JSON, 429, a 5xx without a body', async () => {
    const answer = (status, body, headers = '') =>
      `HTTP/1.1 ${status}\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const cases = [
      ['HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[1,2', /closed the connection in the middle of the answer/],
      ['SSH-2.0-OpenSSH_9.2\r\n\r\n', /not an HTTP\/1\.x answer/],
      [answer('200 OK', '<html>hi'), /cannot read the server's answer: JSON: /],
      [answer('429 Too Many Requests', '{"error":"too many failed logins"}', 'Retry-After: 42\r\n'),
        /: too many failed logins \(retry after 42 s\)$/],
      [answer('502 Bad Gateway', ''), /answered 502$/],
      [answer('500 Internal Server Error', '{"error":"database on fire","field":"items"}'), /: items: database on fire$/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /malformed chunked body/],
    ];
    for (const [bytes, message] of cases) {
      const srv = await rawServer((sock) => sock.end(bytes));
      try {
        failed(await cli(['nodes', '--server', srv.url]), 'nodes', 1, message);
      } finally {
        await srv.close();
      }
    }
  });
});

// `simfarm serve` on a free port, its admin token written to --token-file.
function serve(db, tokenFile, { extra = [], timeoutMs = 60000 } = {}) {
  const child = spawn(simfarm, ['serve', '--db', db, '--listen', '127.0.0.1:0', '--token-file', tokenFile, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env: baseEnv });
  let out = '', err = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve not ready in ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
    const check = () => {
      const m = out.match(/listening on (https?:\/\/127\.0\.0\.1:\d+)/);
      if (m && err.includes('simfarm: database up')) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on('data', (d) => { out += d; check(); });
    child.stderr.on('data', (d) => { err += d; check(); });
    exited.then((e) => { clearTimeout(timer); reject(new Error(`serve exited (${e.code ?? e.signal}):\n${err}`)); });
  });
  return ready.then((url) => ({
    url,
    port: Number(url.split(':')[2]),
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      await exited;
      clearTimeout(timer);
    },
  }));
}

// The coordinator stores its token file's token after it starts listening:
// waits for the row in db (a failed login would count against the rate limit).
async function adminTokenStored(pg, db) {
  const deadline = Date.now() + 15000;
  while (await psql(pg, "SELECT count(*) FROM tokens WHERE owner = 'admin' AND kind = 'api'", { db }) === '0') {
    if (Date.now() > deadline) throw new Error('the admin token never reached the database');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('against simfarm serve', () => {
  let pg, srv, admin, as;
  before(async () => {
    pg = await startPostgres();
    const tokenFile = path.join(tmp, 'serve-token');
    srv = await serve(pg.url, tokenFile);
    admin = fs.readFileSync(tokenFile, 'utf8').trim();
    await adminTokenStored(pg, 'postgres');
    // Commands as admin on this server, through the environment.
    as = (args, token = admin, opts = {}) =>
      cli(args, { ...opts, env: { SIMFARM_SERVER: srv.url, ...(token ? { SIMFARM_TOKEN: token } : {}) } });
  });
  after(async () => {
    await srv?.stop();
    await pg?.stop();
  });

  test('the token file holds an admin API token, mode 0600', () => {
    assert.match(admin, /^sf_[A-Za-z0-9_-]{43}$/);
    assert.equal(fs.statSync(path.join(tmp, 'serve-token')).mode & 0o777, 0o600);
  });

  test('submit --json answers the id; jobs --json lists it; job shows it', async () => {
    const s = await as(['submit', smallJob, '--json']);
    assert.equal(s.code, 0, s.stderr);
    const { id, state } = JSON.parse(s.stdout);
    assert.ok(Number.isInteger(id) && id > 0, s.stdout);
    assert.equal(state, 'pending');

    const human = await as(['submit', smallJob]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^job \\d+ submitted: ${srv.url}/api/jobs/\\d+\\n$`));

    const list = await as(['jobs', '--json']);
    assert.equal(list.code, 0, list.stderr);
    const jobs = JSON.parse(list.stdout);
    assert.ok(jobs.some((j) => j.id === id), list.stdout);

    const table = await as(['jobs', '--kernel', 'option', '--limit', '5']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^ID +STATE +OWNER +KERNEL +ITEMS/);
    assert.match(table.stdout, new RegExp(`^${id} +(pending|running) +admin +option +1M`, 'm'));

    const one = await as(['job', String(id)]);
    assert.equal(one.code, 0, one.stderr);
    assert.match(one.stdout, new RegExp(`^job ${id}  European call`));
    assert.match(one.stdout, /^ {2}kernel {4}option, strategy single, 1000000 items, seed 1/m);
    const raw = await as(['job', String(id), '--json']);
    assert.equal(JSON.parse(raw.stdout).id, id);
  });

  test('an unknown job: exit 1, "no such job N"', async () => {
    for (const cmd of ['job', 'watch', 'cancel'])
      failed(await as([cmd, '424242']), cmd, 1, /no such job 424242$/);
    failed(await as(['token', 'revoke', '424242']), 'token revoke', 1, /no such token 424242$/);
  });

  test('the server refusing a job: its message, naming the field', async () => {
    const bad = writeFile('refused.json', JSON.stringify({ ...european, items: 0 }));
    failed(await as(['submit', bad]), 'submit', 1, /^simfarm submit: items: /);
    const unknown = writeFile('colour.json', JSON.stringify({ ...european, colour: 'red' }));
    failed(await as(['submit', unknown]), 'submit', 1, /colour: unknown field/);
    // a file of parameters alone, submitted: where those go
    failed(await as(['submit', path.join(top, 'examples/option.json')]), 'submit', 1,
      /^simfarm submit: style: unknown field: this looks like a kernel's parameters alone, which go inside "params" of a job .*`simfarm sim KERNEL FILE` runs such a file/);
  });

  test('a wrong or missing token: the server\'s 401 message', async () => {
    failed(await as(['submit', smallJob], `sf_${'A'.repeat(43)}`), 'submit', 1, /401|token/i);
    failed(await as(['submit', smallJob], 'sf_mistyped'), 'submit', 1,
      /^simfarm submit: unknown API token: no token has this text .* \(the token from \$SIMFARM_TOKEN\)$/);
    failed(await as(['submit', smallJob], null), 'submit', 1, /no token given/);
  });

  test('tokens: create with the admin token, use, list and revoke', async () => {
    const c = await as(['token', 'create', '--kind', 'api', '--owner', 'alice', '--note', 'for "tests"', '--json']);
    assert.equal(c.code, 0, c.stderr);
    const t = JSON.parse(c.stdout);
    assert.equal(t.kind, 'api');
    assert.equal(t.owner, 'alice');
    assert.match(t.token, /^sf_/);

    // Alice submits as herself.
    const s = await as(['submit', smallJob, '--json'], t.token);
    assert.equal(s.code, 0, s.stderr);
    const mine = await as(['jobs', '--owner', 'alice', '--json']);
    const jobs = JSON.parse(mine.stdout);
    assert.ok(jobs.length >= 1 && jobs.every((j) => j.owner === 'alice'), mine.stdout);

    const claim = await as(['token', 'create', '--kind', 'claim', '--tier', 'team', '--expires-in', '600']);
    assert.equal(claim.code, 0, claim.stderr);
    assert.match(claim.stdout, /^claim token \d+ for admin, tier team, expires /);
    assert.match(claim.stdout, new RegExp(`simfarm node --server ws://127\\.0\\.0\\.1:${srv.port}/ws/node --claim-token sfc_`));

    const list = await as(['token', 'list', '--json']);
    assert.equal(list.code, 0, list.stderr);
    const tokens = JSON.parse(list.stdout);
    assert.ok(tokens.some((k) => k.id === t.id && k.owner === 'alice'), list.stdout);
    assert.ok(tokens.every((k) => k.token === undefined), 'the list never shows secrets');
    const table = await as(['token', 'list']);
    assert.match(table.stdout, new RegExp(`^${t.id} +api +alice +\\S+ +active`, 'm'));

    const r = await as(['token', 'revoke', String(t.id)]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `token ${t.id} revoked\n`);
    failed(await as(['submit', smallJob], t.token), 'submit', 1);
    const after = await as(['token', 'list']);
    assert.match(after.stdout, new RegExp(`^${t.id} +api +alice +\\S+ +revoked`, 'm'));
  });

  test('watch follows a job until it is cancelled: plain lines, exit 1', async () => {
    const s = await as(['submit', smallJob, '--json']);
    const { id } = JSON.parse(s.stdout);
    // No node serves this coordinator: the job waits until cancelled.
    const child = spawn(simfarm, ['watch', String(id)], {
      env: { ...baseEnv, SIMFARM_SERVER: srv.url }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '', err = '';
    const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    const firstLine = new Promise((resolve) => child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(); }));
    child.stderr.on('data', (d) => { err += d; });
    const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} in ${ms} ms`)), ms).unref());
    await Promise.race([firstLine, deadline(15000, 'no progress line')]);
    assert.match(out, new RegExp(`^job ${id} (pending|running)`));
    assert.doesNotMatch(out, /\r|\x1b/, 'no terminal control characters when stdout is not a terminal');

    const c = await as(['cancel', String(id), '--json']);
    assert.equal(c.code, 0, c.stderr);
    assert.equal(JSON.parse(c.stdout).state, 'cancelled');
    const code = await Promise.race([exited, deadline(15000, 'watch did not end')]);
    assert.equal(code, 1);
    failed({ code, stderr: err }, 'watch', 1, new RegExp(`job ${id} cancelled$`));
    assert.match(out, new RegExp(`^job ${id} cancelled: `, 'm'));

    // Cancelling it again: the server's 409.
    failed(await as(['cancel', String(id)]), 'cancel', 1);
  });

  test('a database that does not exist: one line with the createdb to run', async () => {
    const r = await cli(['serve', '--db', pg.url.replace('dbname=postgres', 'dbname=nosuchdb'), '--listen', '127.0.0.1:0']);
    failed(r, 'serve', 1, /^simfarm serve: the database "nosuchdb" does not exist: create it with `createdb nosuchdb` .* \(--db\)$/);
  });

  test('a port in use: one line saying so and how to listen elsewhere, no libwebsockets lines', async () => {
    const taken = net.createServer();
    await new Promise((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address();
    try {
      const r = await cli(['serve', '--db', pg.url, '--listen', `127.0.0.1:${port}`, '--token-file', path.join(tmp, 'port-token')]);
      assert.equal(r.code, 1, r.stderr);
      const mine = r.stderr.split('\n').filter((l) => l.includes(String(port)));
      assert.equal(mine.length, 1, r.stderr);
      assert.match(mine[0], new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use .*--listen HOST:PORT \\(make run LISTEN=HOST:PORT\\)$`));
      assert.doesNotMatch(r.stderr, /binding|lws_/i);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  test('nodes: a table, or the API\'s JSON', async () => {
    const r = await as(['nodes', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(Array.isArray(JSON.parse(r.stdout)));
    const t = await as(['nodes']);
    assert.equal(t.code, 0, t.stderr);
    assert.match(t.stdout, /^(no nodes|ID +NAME +OWNER)/);
  });

  // A second coordinator, on a database of its own (one coordinator per
  // database), serving https with a self-signed certificate for 127.0.0.1.
  describe('over https', () => {
    let tls, good, stranger, token, node;
    before(async () => {
      await psql(pg, 'CREATE DATABASE tls');
      good = await selfSigned(tmp, 'coordinator');
      stranger = await selfSigned(tmp, 'stranger');
      const tokenFile = path.join(tmp, 'tls-token');
      tls = await serve(pg.url.replace('dbname=postgres', 'dbname=tls'), tokenFile,
        { extra: ['--tls-cert', good.cert, '--tls-key', good.key, '--open-enrolment'] });
      token = fs.readFileSync(tokenFile, 'utf8').trim();
      await adminTokenStored(pg, 'tls');
    });
    after(async () => {
      node?.kill('SIGKILL');
      await tls?.stop();
    });

    test('the certificate checked against --ca, $SIMFARM_CA or the config file\'s ca; then every command works', async () => {
      assert.match(tls.url, /^https:/);
      const s = await cli(['submit', smallJob, '--json', '--server', tls.url, '--token', token, '--ca', good.cert]);
      assert.equal(s.code, 0, s.stderr);
      const { id } = JSON.parse(s.stdout);
      assert.ok(Number.isInteger(id) && id > 0, s.stdout);

      const env = { SIMFARM_SERVER: tls.url, SIMFARM_TOKEN: token, SIMFARM_CA: good.cert };
      const one = await cli(['job', String(id)], { env });
      assert.equal(one.code, 0, one.stderr);
      assert.match(one.stdout, new RegExp(`^job ${id}  European call`));

      // The config file's ca, relative to the file.
      const cfg = writeFile('tls.conf', `server = ${tls.url}\ntoken = ${token}\nca = ${path.basename(good.cert)}\n`, 0o600);
      const list = await cli(['jobs', '--json', '--config', cfg]);
      assert.equal(list.code, 0, list.stderr);
      assert.ok(JSON.parse(list.stdout).some((j) => j.id === id), list.stdout);

      // A claim token's enrolment line names the node endpoint over TLS.
      const claim = await cli(['token', 'create', '--kind', 'claim', '--config', cfg]);
      assert.equal(claim.code, 0, claim.stderr);
      assert.match(claim.stdout, new RegExp(`simfarm node --server wss://127\\.0\\.0\\.1:${tls.port}/ws/node --claim-token sfc_`));

      const c = await cli(['cancel', String(id), '--config', cfg]);
      assert.equal(c.code, 0, c.stderr);
      const gone = await cli(['job', String(id), '--json'], { env });
      assert.equal(JSON.parse(gone.stdout).state, 'cancelled');
    });

    test('submit --watch over https follows a job a node computes over wss to its result', async () => {
      node = spawn(simfarm, ['node', '--server', `wss://127.0.0.1:${tls.port}/ws/node`, '--ca', good.cert,
        '--key', path.join(tmp, 'tls-node.key'), '--cores', '1'], { stdio: 'ignore', env: baseEnv });
      const env = { SIMFARM_SERVER: tls.url, SIMFARM_TOKEN: token, SIMFARM_CA: good.cert };
      // The node joins by open enrolment, as a public node: the job trusts
      // its tier, since no other node could spot-check it (an untrusted
      // result waits for a check until it is given up, after 120 s).
      const trusted = writeFile('small-trusted.json',
        JSON.stringify({ ...european, items: smallJobItems, verify: { trust: european.tiers } }));
      const r = await cli(['submit', trusted, '--watch', '--json'], { env, timeoutMs: 60000 });
      assert.equal(r.code, 0, r.stderr);
      const job = JSON.parse(r.stdout.trim().split('\n').at(-1));
      assert.equal(job.state, 'complete', r.stdout);
      assert.equal(job.result.outputs[0].count, smallJobItems, r.stdout);
      // `simfarm job` shows the result's digest: one local run's, to the last bit
      const shown = await cli(['job', String(job.id)], { env });
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, new RegExp(`^  digest    ${job.result.digest}$`, 'm'));
      const pfile = writeFile('small-params.json', JSON.stringify(european.params));
      const local = await run(simfarm, ['sim', european.kernel, pfile, '--items', String(smallJobItems), '--seed',
        String(job.seed), '--json']);
      assert.equal(local.code, 0, local.stderr);
      assert.equal(JSON.parse(local.stdout).digest, job.result.digest);
    });

    test('a certificate that is not trusted, or not for the host, is refused with the reason', async () => {
      const jobs = (args, env = {}) => cli(['jobs', ...args], { env });
      failed(await jobs(['--server', tls.url]), 'jobs', 1, new RegExp(`cannot reach ${tls.url}: TLS: the server's ` +
        'certificate is not trusted \\(self-signed certificate\\); give the CA that signed it with --ca FILE$'));
      failed(await jobs(['--server', tls.url], { SIMFARM_CA: stranger.cert }), 'jobs', 1,
        new RegExp(`not trusted \\(self-signed certificate\\); it is not signed by a CA in ${stranger.cert}$`));
      // The certificate names 127.0.0.1, not localhost.
      failed(await jobs(['--server', `https://localhost:${tls.port}`, '--ca', good.cert]), 'jobs', 1,
        /the server's certificate is not for localhost$/);
      // The wrong scheme, either way round.
      failed(await jobs(['--server', `http://127.0.0.1:${tls.port}`]), 'jobs', 1, /\(is it an https:\/\/ server\?\)$/);
      failed(await jobs(['--server', srv.url.replace('http:', 'https:'), '--ca', good.cert]), 'jobs', 1,
        /the TLS handshake failed: wrong version number \(is it a plain http:\/\/ server\?\)$/);
      // A CA file that cannot serve is a usage error, from wherever it came;
      // it matters to https only.
      failed(await jobs(['--server', tls.url, '--ca', path.join(tmp, 'absent.pem')]), 'jobs', 2,
        /cannot read the CA file .*absent\.pem: No such file or directory \(from --ca\)$/);
      failed(await jobs(['--server', tls.url], { SIMFARM_CA: good.key }), 'jobs', 2,
        /the CA file .* holds no PEM certificate .*\(from \$SIMFARM_CA\)$/);
      const plain = await jobs(['--server', srv.url, '--ca', path.join(tmp, 'absent.pem')]);
      assert.equal(plain.code, 0, plain.stderr);
    });
  });
});

// The verification line `simfarm job` prints for a job's "verification"
// member (docs/cli.md), built here from the API's numbers.
function verifiedLine(v, items) {
  const g = (n) => n.toLocaleString('en-US');
  // one decimal as C's printf gives it: a tie (0.25) goes to the even digit,
  // where toFixed would round it up
  const pct = (x) => {
    const t = x * 10, f = Math.floor(t);
    return ((t - f === 0.5 ? (f % 2 === 0 ? f : f + 1) : Math.round(t)) / 10).toFixed(1);
  };
  let s = `${g(v.verified_items)} of ${g(items)} items (${pct(100 * v.verified_items / items)}%), `
    + `trusted ${g(v.trusted_items)}, unchecked ${g(v.unchecked_items)}`;
  if (v.checks_passed + v.checks_failed + v.checks_waiting + v.checks_abandoned > 0)
    s += `; checks ${v.checks_passed} passed, ${v.checks_failed} failed, ${v.checks_waiting} waiting`
      + (v.checks_abandoned > 0 ? `, ${v.checks_abandoned} abandoned` : '');
  if (v.retracted_items > 0) s += `; retracted ${g(v.retracted_items)} items`;
  if (v.quarantined_nodes.length > 0) s += `; quarantined nodes: ${v.quarantined_nodes.join(', ')}`;
  return s;
}

// Two honest nodes of two owners and a saboteur of a third
// (tests/integration/saboteur.c), enrolled with community claim tokens: a job
// that trusts no tier is checked, and the saboteur is caught.
describe('a farm that checks its results', () => {
  let pg, srv, as;
  const nodes = [];
  before(async () => {
    pg = await startPostgres();
    srv = await serve(pg.url, path.join(tmp, 'checks-token'), { extra: ['--chunk-ms', '300'] });
    const token = fs.readFileSync(path.join(tmp, 'checks-token'), 'utf8').trim();
    await adminTokenStored(pg, 'postgres');
    as = (args, opts = {}) => cli(args, { ...opts, env: { SIMFARM_SERVER: srv.url, SIMFARM_TOKEN: token } });
    for (const [owner, bin, env] of [['alice', simfarm, {}], ['bob', simfarm, {}],
      ['mallory', path.join(build, 'tests/integration/saboteur'), { SIMFARM_SABOTAGE: 'zeros' }]]) {
      const c = await as(['token', 'create', '--kind', 'claim', '--owner', owner, '--tier', 'community', '--json']);
      assert.equal(c.code, 0, c.stderr);
      const args = ['--server', `ws://127.0.0.1:${srv.port}/ws/node`, '--claim-token', JSON.parse(c.stdout).token,
        '--key', path.join(tmp, `checks-${owner}.key`)];
      const child = spawn(bin, bin === simfarm ? ['node', ...args, '--cores', '1', '--backend', 'cpu'] : args,
        { stdio: 'ignore', env: { ...baseEnv, ...env } });
      nodes.push({ child, exited: new Promise((resolve) => child.on('exit', resolve)) });
    }
  });
  after(async () => {
    for (const n of nodes) {
      if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGTERM');
      const timer = setTimeout(() => n.child.kill('SIGKILL'), 20000);
      await n.exited;
      clearTimeout(timer);
    }
    await srv?.stop();
    await pg?.stop();
  });

  test('job prints how much of the result is verified, as the API counts it; nodes shows the quarantined node', async () => {
    const items = 6000000;
    const file = writeFile('checked.json', JSON.stringify({ ...european, items, seed: 31, tiers: ['community'],
      verify: { trust: [] } }));
    const r = await as(['submit', file, '--watch'], { timeoutMs: 240000 });
    assert.equal(r.code, 0, r.stderr);
    const id = Number(r.stdout.match(/^job (\d+) submitted/)[1]);
    // complete (again, where a quarantine after its end took results back)
    const job = await eventually(async () => {
      const j = JSON.parse((await as(['job', String(id), '--json'])).stdout);
      return j.state === 'complete' ? j : null;
    }, `job ${id} complete`, 60000, 100);
    const v = job.result.verification;
    assert.ok(v.checks_passed > 0, JSON.stringify(v));
    assert.equal(v.verified_items + v.trusted_items + v.unchecked_items, items);
    const mallory = (await psql(pg, "SELECT id FROM nodes WHERE owner = 'mallory'")).trim();
    assert.match(mallory, /^\d+$/, 'the saboteur enrolled');
    assert.deepEqual(v.quarantined_nodes, [Number(mallory)], JSON.stringify(v));
    // watch ends on the line of the result it saw (a job that held a
    // quarantined node's results may end again, with other counts: exact
    // below, from one answer)
    assert.match(r.stdout, /\n {2}verified [\d,]+ of 6,000,000 items \([\d.]+%\), trusted 0, unchecked [\d,]+; checks \d+ passed, \d+ failed, 0 waiting(; retracted [\d,]+ items)?(; quarantined nodes: \d+)?\n$/);
    const shown = await as(['job', String(id)]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(shown.stdout.split('\n').filter((l) => l.startsWith('  verified')),
      [`  verified  ${verifiedLine(v, items)}`], shown.stdout);
    assert.match(shown.stdout, /; quarantined nodes: \d+$/m);

    const list = await as(['nodes']);
    assert.equal(list.code, 0, list.stderr);
    const rows = await as(['nodes', '--json']);
    for (const n of JSON.parse(rows.stdout)) {
      const status = n.id === Number(mallory) ? 'quarantined' : 'online';
      const checks = n.checks_passed + n.checks_failed > 0 ? `${n.checks_passed}/${n.checks_failed}` : '-';
      assert.match(list.stdout, new RegExp(`^${n.id} +\\S+ +${n.owner} +community +${status} .* ${checks} `, 'm'),
        list.stdout);
    }
    assert.ok(JSON.parse(rows.stdout).some((n) => n.checks_passed > 0), rows.stdout);
  });
});

// Every process whose command line names dir (the nodes of `up` name their
// key files in it), as "pid: command line".
function processesUnder(dir) {
  const found = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd;
    try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '); } catch { continue; }
    if (cmd.includes(dir) && Number(pid) !== process.pid) found.push(`${pid}: ${cmd}`);
  }
  return found;
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
}

test('simfarm up --nodes 2, then submit examples/european.json --watch --json: the Black-Scholes price', async () => {
  const varDir = path.join(tmp, 'var');
  const upXdg = path.join(tmp, 'xdg-up');
  fs.mkdirSync(upXdg);
  const env = { ...baseEnv, XDG_CONFIG_HOME: upXdg };
  const child = spawn(simfarm, ['up', '--no-demo', '--var', varDir, '--listen', '127.0.0.1:0', '--nodes', '2', '--cores', '1'],
    { cwd: top, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`up not ready in 120 s:\n${out}\n${err}`)), 120000);
      const check = () => {
        if (/Ctrl-C stops everything/.test(out) && (out + err).match(/connected to \S+ as node \d+/g)?.length === 2) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on('data', (d) => { out += d; check(); });
      child.stderr.on('data', (d) => { err += d; check(); });
      exited.then((e) => { clearTimeout(timer); reject(new Error(`up exited (${e.code ?? e.signal}):\n${out}\n${err}`)); });
    });
    const base = out.match(/the dashboard is at (http:\/\/127\.0\.0\.1:\d+)\/$/m)[1];
    assert.match(out, new RegExp(`contribute a browser's cores at ${base}/contribute$`, 'm'));

    // var/config, private, with the server and the token `up` keeps in var/token.
    const config = path.join(varDir, 'config');
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    const token = fs.readFileSync(path.join(varDir, 'token'), 'utf8').trim();
    const text = fs.readFileSync(config, 'utf8');
    assert.match(text, new RegExp(`^server = ${base}$`, 'm'));
    assert.match(text, new RegExp(`^token = ${token}$`, 'm'));
    // No user config existed: the same was written there, and said.
    const userConfig = path.join(upXdg, 'simfarm', 'config');
    assert.equal(fs.readFileSync(userConfig, 'utf8'), text);
    assert.match(out, new RegExp(`wrote ${userConfig}`));

    // The client finds the farm through that config alone; both nodes are there.
    const nodes = await run(simfarm, ['nodes', '--json'], { env });
    assert.equal(nodes.code, 0, nodes.stderr);
    assert.equal(JSON.parse(nodes.stdout).filter((n) => n.online).length, 2, nodes.stdout);
    assert.ok(fs.existsSync(path.join(varDir, 'node-2.key')), 'the second node keeps its own key');

    const r = await run(simfarm, ['submit', 'examples/european.json', '--watch', '--json'], { env, timeoutMs: 90000 });
    assert.equal(r.code, 0, r.stderr);
    const job = JSON.parse(r.stdout);
    assert.equal(job.state, 'complete');
    assert.equal(job.items, european.items);
    const price = job.result.outputs.find((o) => o.name === 'price');
    const blackScholes = 10.450583572185565;
    assert.ok(Math.abs(price.mean - blackScholes) < 3 * price.stderr,
      `price ${price.mean} ± ${price.stderr} is not within 3 standard errors of ${blackScholes}`);

    const shown = await run(simfarm, ['job', String(job.id)], { env });
    assert.match(shown.stdout, /^ {4}price +10\.45\d* ± 0\.00\d+/m);
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }

  // Ctrl-C: up stops the node, the coordinator and PostgreSQL, and waits for
  // each, so nothing may be left once it has exited.
  const pgDir = out.match(/PostgreSQL running in (\S+)/)[1];
  const pidFile = path.join(pgDir, 'data', 'postmaster.pid');
  const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  assert.ok(alive(postmaster));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
  const e = await exited;
  clearTimeout(timer);
  assert.equal(e.code, 0, `up: ${e.code ?? e.signal}\n${err}`);
  assert.ok(!alive(child.pid));
  assert.ok(!fs.existsSync(pidFile), 'postmaster.pid left behind');
  assert.ok(!alive(postmaster), `postgres ${postmaster} still running`);
  assert.deepEqual(processesUnder(varDir), [], 'processes left running');
  assert.deepEqual(processesUnder(pgDir), [], 'processes left running');
});

test('up --nodes wants a number', async () => {
  const r = await cli(['up', '--nodes', 'many']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--nodes wants a number/);
});
