// How the coordinator ends a node session (proto/PROTOCOL.md §5, Closing):
// with a WebSocket close frame whose code and reason say why, after the
// error frame, never by cutting the connection (1006); and an unknown
// message type is answered with an error that names it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPostgres } from '../lib/pg.mjs';
import { serve } from '../lib/coord.mjs';
import { clientFrame, envelope, E, ScriptedNode } from '../lib/nodeproto.mjs';

let pg, srv;
before(async () => {
  pg = await startPostgres();
  srv = await serve(pg.url, { extra: ['--open-enrolment'] });
});
after(async () => {
  await srv?.stop();
  await pg?.stop();
});

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
