// An independent reading of proto/PROTOCOL.md in JavaScript, with no code
// shared with proto/: a small msgpack reader and canonical writer, the
// canonical signed message of section 6, and Ed25519 from node's crypto. It
// must agree with the golden vectors the C implementation produced, which
// shows the specification is enough to write a compatible peer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { top } from '../lib/proc.mjs';

const HOST = 'farm.example.org';
const TEST_PK = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';

function vectors() {
  const text = fs.readFileSync(path.join(top, 'tests/vectors/proto.vec'), 'utf8');
  const frames = new Map();
  const expect = new Map();
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f[0] === 'frame') frames.set(f[1], Buffer.from(f[2], 'hex'));
    else if (f[0] === 'expect') expect.set(f[1], f[2]);
  }
  return { frames, expect };
}

// Reads one msgpack value; maps keep their order as [key, value] pairs.
function read(buf) {
  let i = 0;
  const need = (n) => { if (i + n > buf.length) throw new Error('ETRUNC'); };
  const uint = (n) => { need(n); let v = 0n; for (let k = 0; k < n; k++) v = (v << 8n) | BigInt(buf[i++]); return v; };
  const int = (n) => BigInt.asIntN(8 * n, uint(n));
  const bytes = (n) => { need(n); const b = buf.subarray(i, i + n); i += n; return b; };
  const str = (n) => ({ str: bytes(n).toString('utf8') });
  const arr = (n) => Array.from({ length: n }, () => value());
  const map = (n) => ({ map: Array.from({ length: n }, () => [value(), value()]) });
  function value() {
    need(1);
    const b = buf[i++];
    if (b <= 0x7f) return BigInt(b);
    if (b >= 0xe0) return BigInt(b - 0x100);
    if (b <= 0x8f) return map(b & 0x0f);
    if (b <= 0x9f) return arr(b & 0x0f);
    if (b <= 0xbf) return str(b & 0x1f);
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return bytes(Number(uint(1)));
      case 0xc5: return bytes(Number(uint(2)));
      case 0xc6: return bytes(Number(uint(4)));
      case 0xcb: return { f64: bytes(8).readDoubleBE(0) };
      case 0xcc: return uint(1);
      case 0xcd: return uint(2);
      case 0xce: return uint(4);
      case 0xcf: return uint(8);
      case 0xd0: return int(1);
      case 0xd1: return int(2);
      case 0xd2: return int(4);
      case 0xd3: return int(8);
      case 0xd9: return str(Number(uint(1)));
      case 0xda: return str(Number(uint(2)));
      case 0xdb: return str(Number(uint(4)));
      case 0xdc: return arr(Number(uint(2)));
      case 0xdd: return arr(Number(uint(4)));
      case 0xde: return map(Number(uint(2)));
      case 0xdf: return map(Number(uint(4)));
      default: throw new Error(`unsupported byte 0x${b.toString(16)}`);
    }
  }
  const v = value();
  if (i !== buf.length) throw new Error('ETRAILING');
  return v;
}

// Writes a value read by read() in the shortest forms (PROTOCOL.md section 2).
function write(v) {
  const out = [];
  const be = (x, n) => { for (let k = n - 1; k >= 0; k--) out.push(Number((BigInt(x) >> BigInt(8 * k)) & 0xffn)); };
  const head = (n, fix, fixmax, c8, c16, c32) => {
    if (fix !== null && n <= fixmax) out.push(fix | n);
    else if (c8 !== null && n < 0x100) { out.push(c8); be(n, 1); }
    else if (n < 0x10000) { out.push(c16); be(n, 2); }
    else { out.push(c32); be(n, 4); }
  };
  (function w(x) {
    if (x === null) out.push(0xc0);
    else if (x === true) out.push(0xc3);
    else if (x === false) out.push(0xc2);
    else if (typeof x === 'bigint') {
      if (x >= 0n) {
        if (x < 0x80n) out.push(Number(x));
        else if (x < 0x100n) { out.push(0xcc); be(x, 1); }
        else if (x < 0x10000n) { out.push(0xcd); be(x, 2); }
        else if (x < 0x100000000n) { out.push(0xce); be(x, 4); }
        else { out.push(0xcf); be(x, 8); }
      } else if (x >= -32n) out.push(Number(x + 0x100n));
      else if (x >= -0x80n) { out.push(0xd0); be(BigInt.asUintN(8, x), 1); }
      else if (x >= -0x8000n) { out.push(0xd1); be(BigInt.asUintN(16, x), 2); }
      else if (x >= -0x80000000n) { out.push(0xd2); be(BigInt.asUintN(32, x), 4); }
      else { out.push(0xd3); be(BigInt.asUintN(64, x), 8); }
    } else if (Buffer.isBuffer(x)) { head(x.length, null, 0, 0xc4, 0xc5, 0xc6); out.push(...x); }
    else if (Array.isArray(x)) { head(x.length, 0x90, 15, null, 0xdc, 0xdd); x.forEach(w); }
    else if ('f64' in x) { out.push(0xcb); const b = Buffer.alloc(8); b.writeDoubleBE(x.f64); out.push(...b); }
    else if ('str' in x) { const b = Buffer.from(x.str, 'utf8'); head(b.length, 0xa0, 31, 0xd9, 0xda, 0xdb); out.push(...b); }
    else { head(x.map.length, 0x80, 15, null, 0xde, 0xdf); for (const [k, val] of x.map) { w(k); w(val); } }
  })(v);
  return Buffer.from(out);
}

const get = (m, key) => m.map.find(([k]) => k.str === key)?.[1];

// Section 6: ts \0 method \0 host \0 path \0 hex(sha256(body)).
function canonical(ts, pathName, body) {
  const digest = crypto.createHash('sha256').update(body).digest('hex');
  return Buffer.concat([Buffer.from(`${ts}\0POST\0${HOST}\0${pathName}\0`), Buffer.from(digest)]);
}

function verify(pkHex, msg, sig) {
  const key = crypto.createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pkHex, 'hex').toString('base64url') },
    format: 'jwk',
  });
  return crypto.verify(null, msg, key, sig);
}

const { frames, expect } = vectors();

test('every good vector is canonical msgpack by an independent writer', () => {
  let n = 0;
  for (const [name, frame] of frames) {
    if (expect.has(`${name}.decode`)) continue;
    const env = read(frame);
    assert.deepEqual(env.map.map(([k]) => k.str), ['v', 'type', 'id', 'ts', 'body'], name);
    assert.equal(get(env, 'v'), 1n);
    assert.equal(get(env, 'type').str, name.replace(/_(browser|tampered|malformed|malformed_stale)$/, ''), name);
    assert.ok(write(env).equals(frame), `${name}: not in canonical form`);
    n++;
  }
  assert.ok(n >= 13);
});

test('the malformed outcome: its own value with a reason to a node that announced it, stale to one that did not', () => {
  const hello = get(read(frames.get('hello')), 'body');
  assert.deepEqual(get(hello, 'features').map((f) => f.str), ['malformed'], 'the node announces the feature');
  assert.equal(get(get(read(frames.get('hello_browser')), 'body'), 'features'), undefined);

  const [ok, bad] = get(get(read(frames.get('complete_ack_malformed')), 'body'), 'outcomes');
  assert.equal(get(ok, 'outcome').str, 'accepted');
  assert.equal(get(ok, 'reason'), undefined);
  assert.equal(get(bad, 'outcome').str, 'malformed');
  assert.equal(get(bad, 'malformed'), undefined);
  const why = get(bad, 'reason').str;
  assert.ok(why.length > 0 && Buffer.byteLength(why) <= 200, why);

  const [, old] = get(get(read(frames.get('complete_ack_malformed_stale')), 'body'), 'outcomes');
  assert.equal(get(old, 'outcome').str, 'stale', 'a reader of the four outcomes drops it as stale');
  assert.equal(get(old, 'reason'), undefined);
  assert.equal(get(old, 'malformed').str, why);
});

// PROTOCOL.md, ctx: the bytes are a msgpack map {kernel, seed, params} (and
// variants, every for jobs of several parameter sets), canonical as the
// envelope is, and its SHA-256 is the hash that assign and ctx_req carry.
test('the work context is what the specification says', () => {
  const body = get(read(frames.get('ctx')), 'body');
  const bytes = get(body, 'bytes');
  const ctx = read(bytes);
  assert.ok(write(ctx).equals(bytes), 'canonical msgpack');
  assert.deepEqual(ctx.map.map(([k]) => k.str), ['kernel', 'seed', 'params']);
  assert.equal(get(ctx, 'kernel').str, get(get(read(frames.get('assign')), 'body'), 'kernel').str);
  assert.equal(get(ctx, 'seed'), 1n);
  const params = get(ctx, 'params');
  assert.deepEqual(params.map.map(([k]) => k.str), ['style', 'type', 'S0', 'K', 'r', 'sigma', 'T'],
    'the submission\'s params in their order');
  assert.equal(get(params, 'S0'), 100n, 'a whole number is an integer');
  assert.deepEqual(get(params, 'sigma'), { f64: 0.2 }, 'a number with a fraction is a float64');
  const hash = crypto.createHash('sha256').update(bytes).digest();
  assert.ok(hash.equals(get(body, 'hash')));
  assert.ok(hash.equals(get(get(read(frames.get('assign')), 'body'), 'ctx_hash')));
});

test('signatures verify from the specification alone', () => {
  const complete = read(frames.get('complete'));
  const body = get(complete, 'body');
  const ts = get(body, 'ts');
  const payload = get(body, 'payload');
  assert.ok(verify(TEST_PK, canonical(ts, '/v1/node/complete', payload), get(body, 'sig')));
  assert.ok(write(read(payload)).equals(payload), 'the payload is canonical too');
  assert.equal(get(read(payload), 'job'), 77n);

  const tampered = get(read(frames.get('complete_tampered')), 'body');
  assert.ok(!verify(TEST_PK, canonical(get(tampered, 'ts'), '/v1/node/complete', get(tampered, 'payload')),
    get(tampered, 'sig')));

  const nonce = get(get(read(frames.get('challenge')), 'body'), 'nonce');
  for (const name of ['hello', 'hello_browser']) {
    const h = get(read(frames.get(name)), 'body');
    assert.equal(get(h, 'pk').toString('hex'), TEST_PK);
    assert.ok(verify(TEST_PK, canonical(get(h, 'ts'), '/v1/node/hello', nonce), get(h, 'sig')), name);
  }
});

test('the worked example of PROTOCOL.md matches the vectors', () => {
  const doc = fs.readFileSync(path.join(top, 'proto/PROTOCOL.md'), 'utf8');
  assert.ok(doc.includes(frames.get('bye').toString('hex')), 'the bye frame');
  const body = get(read(frames.get('complete')), 'body');
  const payload = get(body, 'payload');
  assert.ok(doc.replace(/\s+/g, '').includes(payload.toString('hex')), 'the payload');
  assert.ok(doc.includes(crypto.createHash('sha256').update(payload).digest('hex')), 'its SHA-256');
  const sig = get(body, 'sig').toString('hex');
  assert.ok(doc.includes(sig.slice(0, 64)) && doc.includes(sig.slice(64)), 'the signature');
  assert.ok(doc.includes(`these ${canonical(get(body, 'ts'), '/v1/node/complete', payload).length} bytes`));
});
