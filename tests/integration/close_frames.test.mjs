// How the coordinator ends a node session (proto/PROTOCOL.md §5, Closing):
// with a WebSocket close frame whose code and reason say why, after the
// error frame, never by cutting the connection (1006); and an unknown
// message type is answered with an error that names it. Each close code
// the coordinator sends is provoked here the way a node would earn it,
// except 1011 (an allocation failing while a frame is decoded, or libsodium
// failing to start: neither can be brought about from outside without
// faking it).
//
// The sessions cut off for abuse (1009, 4005) put their address on the
// penalty list, so each comes from an address of its own in 127.0.0.0/8.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createDatabase, startPostgres } from '../lib/pg.mjs';
import { call, serve } from '../lib/coord.mjs';
import { clientFrame, envelope, E, helloBody, nodeKey, ScriptedNode } from '../lib/nodeproto.mjs';

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment'] });
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
});

// A loopback address no other test here uses.
let lastHost = 20;
const fresh = () => `127.0.0.${++lastHost}`;

// The close frame n's session ended with: {code, reason}.
async function closedWith(n) {
  const code = await n.closed;
  return { code, reason: n.link.closeReason };
}

test('a frame before hello: error ENOTREADY, then close 4002 with the error as its reason', async () => {
  const n = await ScriptedNode.connect(srv.port);
  const id = n.send('heartbeat', { cpu: 0, mem_used: 0, mem_total: 1 });
  const err = await n.error(id);
  assert.equal(err.body.code, 2);
  assert.deepEqual(await closedWith(n), { code: 4002, reason: 'ENOTREADY: say hello first' });
});

test('a frame that does not decode before welcome: close 1002 with the decode error', async () => {
  const n = await ScriptedNode.connect(srv.port);
  n.link.send(Buffer.from([0x81, 0xa1, 0x76, 0xc1])); // the reserved byte 0xc1
  const err = await n.error(undefined);
  assert.equal(err.body.code, E.EMSGPACK);
  const { code, reason } = await closedWith(n);
  assert.equal(code, 1002);
  assert.match(reason, /^EMSGPACK: /);
  assert.ok(Buffer.byteLength(reason) <= 123);
});

test('an unknown type before welcome is named in the error and the close frame', async () => {
  const n = await ScriptedNode.connect(srv.port);
  n.link.send(envelope('telemetry', 4, {}));
  const err = await n.error(4);
  assert.equal(err.body.code, -20);
  assert.equal(err.body.message, 'unknown message type "telemetry" (protocol version 1)');
  assert.deepEqual(await closedWith(n),
    { code: 1002, reason: 'EUNKNOWNTYPE: unknown message type "telemetry" (protocol version 1)' });
});

test('an unknown type after welcome is named in the error, and the session stays', async () => {
  const n = await ScriptedNode.connect(srv.port);
  await n.hello();
  n.link.send(envelope('x'.repeat(40) + '\u00e9', 7, {}));
  const err = await n.error(7);
  assert.equal(err.body.code, -20);
  assert.equal(err.body.message, `unknown message type "${'x'.repeat(32)}..." (protocol version 1)`);
  const id = n.send('heartbeat', { cpu: 0, mem_used: 0, mem_total: 1 });
  const bad = n.send('welcome', { node_id: 1, heartbeat_ms: 1, config: {} });
  assert.equal((await n.error(bad)).body.code, 2, 'the session still answers');
  assert.equal(n.link.closeCode, null, `the session is kept (heartbeat ${id})`);
  await n.close();
});

test('a text frame: close 1003 with why', async () => {
  const n = await ScriptedNode.connect(srv.port);
  n.link.raw(clientFrame(Buffer.from('hello'), { opcode: 1 }));
  const { code, reason } = await closedWith(n);
  assert.equal(code, 1003);
  assert.match(reason, /text frames are not part of the protocol/);
});

test('bye leaving: close 1000', async () => {
  const n = await ScriptedNode.connect(srv.port);
  await n.hello();
  n.send('bye', { reason: 'leaving' });
  assert.deepEqual(await closedWith(n), { code: 1000, reason: 'bye' });
});

test('a hello whose signature does not verify: close 1002 with ESIG', async () => {
  const n = await ScriptedNode.connect(srv.port);
  const id = n.send('hello', { ...helloBody(nodeKey(), n.host, n.challenge.nonce), pk: n.key.pk });
  assert.equal((await n.error(id)).body.code, E.ESIG);
  assert.deepEqual(await closedWith(n), { code: 1002, reason: 'ESIG: signature does not verify' });
});

test('a hello signed 1,000 s ago: close 1002 with ESKEW', async () => {
  const n = await ScriptedNode.connect(srv.port);
  const id = n.send('hello', helloBody(n.key, n.host, n.challenge.nonce, { ts: Math.floor(Date.now() / 1000) - 1000 }));
  assert.equal((await n.error(id)).body.code, E.ESKEW);
  assert.deepEqual(await closedWith(n),
    { code: 1002, reason: 'ESKEW: timestamp more than 300 s away from the receiver\'s clock' });
});

test('a frame past 4 MiB: close 1009 with EFRAMESIZE', async () => {
  const n = await ScriptedNode.connect(srv.port, { from: fresh() });
  await n.hello();
  n.link.send(Buffer.alloc(4 * 1024 * 1024 + 1, 0x90));
  assert.equal((await n.error(0)).body.code, E.EFRAMESIZE);
  assert.deepEqual(await closedWith(n),
    { code: 1009, reason: 'EFRAMESIZE: a frame larger than 4194304 bytes (the frame limit): the session is closed' });
});

test('a claim token the coordinator does not know: close 4001 with ENOTENROLLED', async () => {
  const n = await ScriptedNode.connect(srv.port);
  const id = n.send('hello', helloBody(n.key, n.host, n.challenge.nonce, { claimToken: 'no-such-token' }));
  assert.equal((await n.error(id)).body.code, E.ENOTENROLLED);
  assert.deepEqual(await closedWith(n), { code: 4001,
    reason: 'ENOTENROLLED: the claim token is unknown, used up, revoked or expired: ask for a new one' });
});

test('a flood of frames: close 4005 with ERATELIMITED', async () => {
  const n = await ScriptedNode.connect(srv.port, { from: fresh() });
  await n.hello();
  const frame = envelope('heartbeat', 1, { cpu: 0, mem_used: 0, mem_total: 1 });
  for (let i = 0; i < 1000; i++) n.link.send(frame);
  assert.equal((await n.error(0)).body.code, E.ERATELIMITED);
  assert.deepEqual(await closedWith(n),
    { code: 4005, reason: 'ERATELIMITED: more than 200 frames a second (400 at once): the session is closed' });
});

test('too many bad frames: close 4005 with ERATELIMITED', async () => {
  const n = await ScriptedNode.connect(srv.port, { from: fresh() });
  await n.hello();
  for (let i = 0; i < 17; i++) n.link.send(Buffer.from([0xc1])); // 16 at once are let through, each answered
  await n.until((m) => m.type === 'error' && m.body.code === E.ERATELIMITED, 'ERATELIMITED');
  assert.equal(n.msgs.filter((m) => m.type === 'error' && m.body.code === E.EMSGPACK).length, 17);
  assert.deepEqual(await closedWith(n),
    { code: 4005, reason: 'ERATELIMITED: more than 16 bad frames (one more each 10 s): the session is closed' });
});

test('a second session of a live key: close 4006 with EKEYINUSE, the first kept', async () => {
  const first = await ScriptedNode.connect(srv.port);
  await first.hello();
  const second = await ScriptedNode.connect(srv.port, { key: first.key });
  const id = second.send('hello', helloBody(second.key, second.host, second.challenge.nonce));
  const err = await second.error(id);
  assert.equal(err.body.code, E.EKEYINUSE);
  const { code, reason } = await closedWith(second);
  assert.equal(code, 4006);
  assert.equal(reason, Buffer.from(`EKEYINUSE: ${err.body.message}`).subarray(0, 123).toString(),
    'the error\'s words, cut to what a close frame holds');
  const beat = first.heartbeat();
  const bad = first.send('welcome', { node_id: 1, heartbeat_ms: 1, config: {} });
  assert.equal((await first.error(bad)).body.code, E.ENOTREADY, `the first session still answers (heartbeat ${beat})`);
  assert.equal(first.link.closeCode, null);
  await first.close();
});

test('a node an operator revokes: error ENOTENROLLED (id 0), then close 4001', async () => {
  const n = await ScriptedNode.connect(srv.port);
  await n.hello();
  assert.equal((await call(srv, 'POST', `/api/nodes/${n.nodeId}/revoke`)).status, 200);
  assert.equal((await n.error(0)).body.code, E.ENOTENROLLED);
  assert.deepEqual(await closedWith(n), { code: 4001, reason: 'ENOTENROLLED: this node was revoked' });
});

test('a hello whose name holds a control character: close 1002 with EINVAL', async () => {
  const n = await ScriptedNode.connect(srv.port);
  const id = n.send('hello', helloBody(n.key, n.host, n.challenge.nonce, { name: 'a\tb' }));
  assert.equal((await n.error(id)).body.code, -2);
  const { code, reason } = await closedWith(n);
  assert.equal(code, 1002);
  assert.match(reason, /^EINVAL: the node name /);
});

// Last: it stops the database.
test('a hello while the database is down: close 4004 with EDATABASE', async () => {
  await pg.pause();
  try {
    const n = await ScriptedNode.connect(srv.port);
    const id = n.send('hello', helloBody(n.key, n.host, n.challenge.nonce));
    assert.equal((await n.error(id, 'EDATABASE', 30000)).body.code, E.EDATABASE);
    assert.deepEqual(await closedWith(n),
      { code: 4004, reason: 'EDATABASE: the database is unavailable, try again' });
  } finally {
    await pg.resume();
  }
});

test('a coordinator that stops: close 1001 with why, once its sessions\' work is written', async () => {
  const own = await serve(await createDatabase(pg, 'closing'), { extra: ['--open-enrolment'] });
  let stopped;
  try {
    const n = await ScriptedNode.connect(own.port);
    await n.hello();
    stopped = own.stop();
    assert.deepEqual(await closedWith(n), { code: 1001, reason: 'the coordinator is stopping' });
  } finally {
    const e = await (stopped ?? own.stop());
    assert.equal(e.code, 0, own.stderr());
  }
});
