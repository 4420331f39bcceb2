// A coordinator behind a reverse proxy (`simfarm serve --trusted-proxy`):
// what it keeps by client address, failed API logins and the penalty list of
// node connections, is kept by the address X-Forwarded-For names when the
// connection comes from the trusted proxy, so one offender behind the proxy
// does not lock out every other client of it. Any other connection's
// X-Forwarded-For is ignored: a client cannot pick its own address.
//
// The proxy is 127.0.0.2 and an untrusted client 127.0.0.3 (connections
// from other loopback addresses, as from other hosts); the clients the
// proxy speaks for are documentation addresses in its header.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { serve } from '../lib/coord.mjs';
import { E, ScriptedNode, envelope } from '../lib/nodeproto.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { build, run } from '../lib/proc.mjs';

const PROXY = '127.0.0.2', STRANGER = '127.0.0.3';
let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--allow-public-nodes', '--trusted-proxy', `${PROXY}/32`] });
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
});

// POST /api/jobs with an empty body from local address `from`, with the
// token and X-Forwarded-For given; resolves to the status (a good token
// gets 400 for the body, a bad one 401, a blocked address 429).
function post(from, token, xff) {
  return new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    if (xff !== undefined) headers['x-forwarded-for'] = xff;
    const req = http.request({ host: '127.0.0.1', port: srv.port, localAddress: from, method: 'POST', path: '/api/jobs',
      headers }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    req.end('{}');
  });
}

const BAD = 'sf_' + 'B'.repeat(43);
const fail10 = async (from, xff) => {
  for (let i = 0; i < 10; i++) assert.equal(await post(from, BAD, xff), 401);
};

test('--trusted-proxy refuses what is not an address, naming it', async () => {
  const r = await run(path.join(build, 'bin/simfarm'), ['serve', '--db', pg.url, '--trusted-proxy', '10.0.0.0/40']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--trusted-proxy: '10\.0\.0\.0\/40': the prefix length after '\/' must be a number from 0 to 32/);
});

test('failed logins through the trusted proxy block the client it names, not the proxy', async () => {
  // The client wrote an address of its own in the header; the proxy added
  // the one it saw, which is what counts.
  await fail10(PROXY, '198.51.100.1, 203.0.113.7');
  assert.equal(await post(PROXY, srv.token, '203.0.113.7'), 429, 'the offender is blocked');
  assert.equal(await post(PROXY, srv.token, '198.51.100.9, 203.0.113.7'), 429, 'whatever it writes in the header');
  assert.equal(await post(PROXY, srv.token, '203.0.113.8'), 400, 'another client of the proxy is not');
  assert.equal(await post(PROXY, srv.token, '198.51.100.1'), 400, 'nor the address the offender wrote');
  assert.equal(await post(PROXY, srv.token), 400, 'nor the proxy itself');
});

test('an untrusted client\'s X-Forwarded-For is ignored', async () => {
  await fail10(STRANGER, '203.0.113.30');
  assert.equal(await post(STRANGER, srv.token, '203.0.113.31'), 429, 'a new header does not unblock it');
  assert.equal(await post(STRANGER, srv.token), 429);
  assert.equal(await post(PROXY, srv.token, '203.0.113.30'), 400, 'the address it claimed was never blocked');
});

const via = (client) => ({ from: PROXY, headers: { 'X-Forwarded-For': client } });

// A node session that floods heartbeats until the coordinator cuts it off
// for abuse, which puts its address on the penalty list for 2 s.
async function cutOff(opts) {
  const offender = await ScriptedNode.connect(srv.port, opts);
  await offender.hello();
  const frame = envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 });
  for (let i = 0; i < 500; i++) offender.link.send(frame);
  assert.equal((await offender.error(0, 'ERATELIMITED')).body.code, E.ERATELIMITED);
  await offender.closed;
}

// A connection held by the penalty list gets its challenge once the
// refusal runs out.
async function challengedLater(held) {
  const first = await held.until((m) => m.type === 'challenge' || m.type === 'error', 'the held connection answered');
  assert.equal(first.type, 'challenge', 'challenged once the 2 s refusal ran out');
}

test('a node cut off for abuse through the proxy: its client is refused, the proxy\'s other clients are not', async () => {
  await cutOff(via('203.0.113.20'));
  // The offender's next connection is held (its address is refused for
  // 2 s); one for another client of the proxy is challenged meanwhile.
  const again = await ScriptedNode.connect(srv.port, { ...via('203.0.113.20'), challenge: false });
  const other = await ScriptedNode.connect(srv.port, via('203.0.113.21'));
  await other.hello();
  assert.equal(again.msgs.length, 0, 'the offender\'s connection is held while another client is welcomed');
  // So is a connection from the proxy itself, and one that names the
  // offender from an untrusted address.
  const direct = await ScriptedNode.connect(srv.port, { from: PROXY });
  await direct.hello();
  const spoof = await ScriptedNode.connect(srv.port, { from: STRANGER, headers: { 'X-Forwarded-For': '203.0.113.21' } });
  await spoof.hello();
  await challengedLater(again);
  for (const n of [again, other, direct, spoof]) await n.close();
});

test('a node connection\'s X-Forwarded-For from an untrusted address is ignored', async () => {
  await cutOff({ from: STRANGER });
  const again = await ScriptedNode.connect(srv.port, { from: STRANGER, challenge: false,
    headers: { 'X-Forwarded-For': '203.0.113.40' } });
  const other = await ScriptedNode.connect(srv.port, via('203.0.113.41'));
  await other.hello();
  assert.equal(again.msgs.length, 0, 'held: its own address is refused, whatever it names');
  await challengedLater(again);
  for (const n of [again, other]) await n.close();
});
