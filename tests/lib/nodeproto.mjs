// The node side of the wire protocol (proto/PROTOCOL.md) for tests, with
// nothing but node's own modules: msgpack for the subset the protocol uses,
// the envelope, Ed25519 signatures over §6's canonical message, and a
// WebSocket client over a plain TCP socket. Owning the socket lets a test
// send what no well-behaved client would (text frames, frames past the
// limit, raw bytes), and it sees every frame the coordinator writes, in
// order (node 20's experimental WebSocket client can lose frames that
// arrive back to back).
import crypto from 'node:crypto';
import net from 'node:net';

// ---- msgpack -----------------------------------------------------------------------

// Encodes v in the canonical form of PROTOCOL.md §2: the shortest header of
// every integer, string, bin, array and map. Integers are numbers or
// BigInts (u64 past 2^53); Buffers and Uint8Arrays are `bin`; objects are
// maps in their key order, and keys whose value is undefined are left out
// (the canonical form omits optional fields that are not given).
export function encode(v) {
  const out = [];
  const u8 = (...b) => { for (const x of b) out.push(x & 0xff); };
  const be = (x, n) => { for (let i = n - 1; i >= 0; i--) out.push(Number((BigInt(x) >> BigInt(8 * i)) & 0xffn)); };
  const header = (len, small, smallMax, c8, c16, c32) => {
    if (small !== null && len <= smallMax) u8(small | len);
    else if (c8 !== null && len < 0x100) u8(c8, len);
    else if (len < 0x10000) { u8(c16); be(len, 2); }
    else { u8(c32); be(len, 4); }
  };
  const int = (x) => {
    const n = BigInt(x);
    if (n >= 0n) {
      if (n < 0x80n) u8(Number(n));
      else if (n < 0x100n) u8(0xcc, Number(n));
      else if (n < 0x10000n) { u8(0xcd); be(n, 2); }
      else if (n < 0x100000000n) { u8(0xce); be(n, 4); }
      else if (n < 1n << 64n) { u8(0xcf); be(n, 8); }
      else throw new RangeError(`msgpack: ${n} does not fit 64 bits`);
    } else if (n >= -32n) u8(Number(n));
    else if (n >= -0x80n) u8(0xd0, Number(n));
    else if (n >= -0x8000n) { u8(0xd1); be(BigInt.asUintN(16, n), 2); }
    else if (n >= -0x80000000n) { u8(0xd2); be(BigInt.asUintN(32, n), 4); }
    else if (n >= -(1n << 63n)) { u8(0xd3); be(BigInt.asUintN(64, n), 8); }
    else throw new RangeError(`msgpack: ${n} does not fit 64 bits`);
  };
  const bytes = (b) => { for (const x of b) out.push(x); };
  (function w(x) {
    if (x === null) u8(0xc0);
    else if (x === false) u8(0xc2);
    else if (x === true) u8(0xc3);
    else if (typeof x === 'bigint') int(x);
    else if (typeof x === 'number') {
      if (Number.isInteger(x)) int(x);
      else { const b = Buffer.alloc(8); b.writeDoubleBE(x); u8(0xcb); bytes(b); }
    } else if (typeof x === 'string') {
      const b = Buffer.from(x, 'utf8');
      header(b.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
      bytes(b);
    } else if (x instanceof Uint8Array) {
      header(x.length, null, 0, 0xc4, 0xc5, 0xc6);
      bytes(x);
    } else if (Array.isArray(x)) {
      header(x.length, 0x90, 15, null, 0xdc, 0xdd);
      x.forEach(w);
    } else if (typeof x === 'object') {
      const e = Object.entries(x).filter(([, val]) => val !== undefined);
      header(e.length, 0x80, 15, null, 0xde, 0xdf);
      for (const [k, val] of e) { w(k); w(val); }
    } else throw new TypeError(`msgpack: cannot encode ${typeof x}`);
  })(v);
  return Buffer.from(out);
}

// Decodes exactly one msgpack value from buf. Maps become objects, `bin`
// Buffers, integers numbers (BigInts past 2^53). Throws on ext types, the
// reserved byte, a value that runs past the end, or trailing bytes.
export function decode(buf) {
  buf = Buffer.from(buf.buffer ?? buf, buf.byteOffset ?? 0, buf.byteLength ?? buf.length);
  let p = 0;
  const need = (n) => { if (p + n > buf.length) throw new Error('msgpack: truncated'); };
  const uint = (n) => {
    need(n);
    let v = 0n;
    for (let i = 0; i < n; i++) v = (v << 8n) | BigInt(buf[p + i]);
    p += n;
    return v;
  };
  const num = (v) => (v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v);
  const sint = (n) => num(BigInt.asIntN(8 * n, uint(n)));
  const raw = (n) => { need(n); const b = buf.subarray(p, p + n); p += n; return b; };
  const arr = (n) => Array.from({ length: n }, () => r());
  const map = (n) => {
    const o = {};
    for (let i = 0; i < n; i++) {
      const k = r();
      o[k] = r();
    }
    return o;
  };
  function r() {
    need(1);
    const b = buf[p++];
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return arr(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return raw(b & 0x1f).toString('utf8');
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return Buffer.from(raw(Number(uint(1))));
      case 0xc5: return Buffer.from(raw(Number(uint(2))));
      case 0xc6: return Buffer.from(raw(Number(uint(4))));
      case 0xca: { const v = raw(4).readFloatBE(0); return v; }
      case 0xcb: { const v = raw(8).readDoubleBE(0); return v; }
      case 0xcc: return num(uint(1));
      case 0xcd: return num(uint(2));
      case 0xce: return num(uint(4));
      case 0xcf: return num(uint(8));
      case 0xd0: return sint(1);
      case 0xd1: return sint(2);
      case 0xd2: return sint(4);
      case 0xd3: return sint(8);
      case 0xd9: return raw(Number(uint(1))).toString('utf8');
      case 0xda: return raw(Number(uint(2))).toString('utf8');
      case 0xdb: return raw(Number(uint(4))).toString('utf8');
      case 0xdc: return arr(Number(uint(2)));
      case 0xdd: return arr(Number(uint(4)));
      case 0xde: return map(Number(uint(2)));
      case 0xdf: return map(Number(uint(4)));
      default: throw new Error(`msgpack: byte 0x${b.toString(16)} is not in the protocol's subset`);
    }
  }
  const v = r();
  if (p !== buf.length) throw new Error('msgpack: trailing bytes');
  return v;
}

// ---- the envelope and the error codes ------------------------------------------------

// PROTOCOL.md §7, by name.
export const E = {
  EFRAMESIZE: -3, ETRUNC: -4, ETRAILING: -5, EMSGPACK: -6, EEXT: -7, ETYPE: -15, EMISSING: -18, EVERSION: -19,
  EUNKNOWNTYPE: -20, EKEYLEN: -25, ESIGLEN: -26, ESIG: -27, ESKEW: -28, EREPLAY: -29, EREPLAYOLD: -30,
  ENOTENROLLED: 1, ENOTREADY: 2, EJOB: 3, EDATABASE: 4, ERATELIMITED: 5, EKEYINUSE: 6,
};

// One frame: the envelope of §2 around body, keys in canonical order.
export function envelope(type, id, body, ts = Date.now()) {
  return encode({ v: 1, type, id, ts: BigInt(ts), body });
}

// ---- keys and signatures (§6) ----------------------------------------------------------

// An Ed25519 node key: from a 32-byte seed, or fresh. pk is the raw
// 32-byte public key the hello carries.
export function nodeKey(seed = crypto.randomBytes(32)) {
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(seed)]);
  const privateKey = crypto.createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const pk = Buffer.from(crypto.createPublicKey(privateKey).export({ format: 'jwk' }).x, 'base64url');
  return { pk, privateKey, sign: (bytes) => crypto.sign(null, bytes, privateKey) };
}

// The canonical message: ts \0 POST \0 host \0 path \0 hex(sha256(body)).
export function canonical(ts, host, path, body) {
  const digest = crypto.createHash('sha256').update(body).digest('hex');
  return Buffer.from(`${ts}\0POST\0${host}\0${path}\0${digest}`);
}

// The body of a hello answering a challenge nonce.
export function helloBody(key, host, nonce, { ts = Math.floor(Date.now() / 1000), version = 'nodeproto',
  claimToken, cores = 1, maxParallel = 1, backends = [], features, name } = {}) {
  // features (PROTOCOL.md §2): e.g. ['malformed'] to be told a malformed
  // result as its own outcome; absent, a node of the first four outcomes
  return {
    pk: key.pk, ts, sig: key.sign(canonical(ts, host, '/v1/node/hello', nonce)), version,
    claim_token: claimToken, caps: { cores, max_parallel: maxParallel, os: 'linux', arch: 'x86_64', backends },
    features, name,
  };
}

// The body of a `complete`: batch {job, ctx_hash, results} encoded as the
// payload, with a fresh 16-byte nonce unless one is given, signed at ts.
export function sealBody(key, host, { job, ctxHash, results }, { ts = Math.floor(Date.now() / 1000),
  nonce = crypto.randomBytes(16) } = {}) {
  const payload = encode({
    nonce, job, ctx_hash: ctxHash,
    results: results.map((x) => ({ chunk: x.chunk, token: x.token, start: x.start, count: x.count,
      elapsed_ms: x.elapsedMs, data: x.data, backend: x.backend || undefined })),
  });
  return { ts, payload, sig: key.sign(canonical(ts, host, '/v1/node/complete', payload)) };
}

// ---- WebSocket (RFC 6455) over TCP ----------------------------------------------------

const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 };

// One client frame of data (opcode binary unless told), masked as RFC 6455
// asks of a client, under a fresh random mask unless one is given. The
// bytes can be sent at once (link.send) or kept and sent later with
// link.raw, as often as wanted.
export function clientFrame(data, { opcode = OP.binary, fin = true, mask = crypto.randomBytes(4) } = {}) {
  const n = data.length;
  const head = n < 126 ? Buffer.from([0, 0x80 | n])
    : n < 0x10000 ? Buffer.from([0, 0x80 | 126, n >> 8, n & 0xff])
      : Buffer.concat([Buffer.from([0, 0x80 | 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  head[0] = (fin ? 0x80 : 0) | opcode;
  // Head, mask and masked body in one buffer of its own (aligned, so the
  // body is masked four bytes at a time: a 4 MiB frame is cheap).
  const out = Buffer.allocUnsafeSlow(head.length + 4 + ((n + 3) & ~3));
  head.copy(out, 0);
  mask.copy(out, head.length);
  const at = head.length + 4;
  Buffer.from(data.buffer ?? data, data.byteOffset ?? 0, n).copy(out, at);
  const words = new Uint32Array(out.buffer, 0, out.length >> 2), m32 = mask.readUInt32LE(0);
  // at is 6, 8 or 14 bytes: mask the bytes up to the first word, then whole words.
  const w0 = (at + 3) >> 2;
  for (let i = at; i < Math.min(w0 * 4, at + n); i++) out[i] ^= mask[(i - at) & 3];
  const rot = (w0 * 4 - at) & 3, mw = rot === 0 ? m32 : ((m32 >>> (8 * rot)) | (m32 << (32 - 8 * rot))) >>> 0;
  const wEnd = (at + n) >> 2;
  for (let w = w0; w < wEnd; w++) words[w] ^= mw;
  for (let i = Math.max(wEnd * 4, w0 * 4); i < at + n; i++) out[i] ^= mask[(i - at) & 3];
  return out.subarray(0, at + n);
}

// Opens a WebSocket to 127.0.0.1:port, from the local address `from` when
// given (any of 127.0.0.0/8: a connection from another host, as far as the
// coordinator can tell), with extra request headers when given. Resolves,
// after the 101, to a link:
// frames (every data message received, {opcode, data}), send(bytes, opcode),
// raw(bytes) (straight onto the socket), close(), closed (a promise of the
// close code, or 1006 when the connection ended without one; closeReason the close frame's text) and
// wait(pred, what, ms) (resolves to the first frame pred accepts, at the
// deadline rejects).
export function connect(port, { path = '/ws/node', protocol = 'simfarm.node.v1', timeoutMs = 10000, from,
  headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host: '127.0.0.1', localAddress: from });
    const key = crypto.randomBytes(16).toString('base64');
    const link = { frames: [], closeCode: null, closeReason: null, sock };
    const waiters = new Set();
    let buf = Buffer.alloc(0), upgraded = false, parts = [], partOp = 0;
    let closedResolve;
    link.closed = new Promise((r) => { closedResolve = r; });
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`no WebSocket upgrade in ${timeoutMs} ms`)); },
      timeoutMs);
    const wake = () => { for (const w of [...waiters]) w(); };

    const write = (opcode, data, fin = true) => {
      if (!sock.destroyed) sock.write(clientFrame(data, { opcode, fin }));
    };
    link.send = (data, opcode = OP.binary) => write(opcode, data);
    link.raw = (bytes) => { if (!sock.destroyed) sock.write(bytes); };
    link.close = () => {
      write(OP.close, Buffer.from([0x03, 0xe8]));
      setTimeout(() => sock.destroy(), 1000).unref();
    };
    link.wait = (pred, what, ms = 10000) => new Promise((res, rej) => {
      let seen = 0;
      const t = setTimeout(() => { waiters.delete(w); rej(new Error(`${what}: not seen in ${ms} ms`)); }, ms);
      const w = () => {
        for (; seen < link.frames.length; seen++) {
          if (pred(link.frames[seen])) {
            clearTimeout(t);
            waiters.delete(w);
            res(link.frames[seen]);
            return;
          }
        }
        if (link.closeCode !== null) {
          clearTimeout(t);
          waiters.delete(w);
          rej(new Error(`${what}: the connection closed (${link.closeCode})`));
        }
      };
      waiters.add(w);
      w();
    });

    const frames = () => {
      for (;;) {
        if (buf.length < 2) return;
        const fin = buf[0] & 0x80, op = buf[0] & 0x0f, masked = buf[1] & 0x80;
        let n = buf[1] & 0x7f, at = 2;
        if (n === 126) { if (buf.length < 4) return; n = buf.readUInt16BE(2); at = 4; }
        else if (n === 127) { if (buf.length < 10) return; n = Number(buf.readBigUInt64BE(2)); at = 10; }
        const maskAt = at;
        if (masked) at += 4;
        if (buf.length < at + n) return;
        const data = Buffer.from(buf.subarray(at, at + n));
        if (masked) for (let i = 0; i < n; i++) data[i] ^= buf[maskAt + (i & 3)];
        buf = buf.subarray(at + n);
        if (op === OP.ping) write(OP.pong, data);
        else if (op === OP.close) {
          link.closeCode = data.length >= 2 ? data.readUInt16BE(0) : 1005;
          link.closeReason = data.subarray(2).toString('utf8');
          write(OP.close, data.subarray(0, 2));
          sock.end();
        } else if (op !== OP.pong) {
          if (op !== OP.continuation) partOp = op;
          parts.push(data);
          if (fin) {
            link.frames.push({ opcode: partOp, data: Buffer.concat(parts) });
            parts = [];
          }
        }
      }
    };

    sock.on('connect', () => {
      sock.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ${protocol}\r\n` +
        Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n');
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
        clearTimeout(timer);
        if (!/^HTTP\/1\.1 101/.test(head) || !head.toLowerCase().includes(`sec-websocket-accept: ${accept.toLowerCase()}`)) {
          sock.destroy();
          reject(new Error(`WebSocket upgrade refused: ${head.split('\r\n')[0]}`));
          return;
        }
        upgraded = true;
        buf = buf.subarray(end + 4);
        resolve(link);
      }
      frames();
      wake();
    });
    sock.on('error', () => {});
    sock.on('close', () => {
      clearTimeout(timer);
      if (link.closeCode === null) link.closeCode = 1006;
      if (!upgraded) reject(new Error('the connection closed before the WebSocket upgrade'));
      closedResolve(link.closeCode);
      wake();
    });
  });
}

// ---- a node session ------------------------------------------------------------------

// A scripted node: connect(port) reads the challenge; hello() enrols the
// key (open enrolment, or claimToken) and resolves to the welcome.
// Received frames are decoded into msgs ({v, type, id, ts, body}); a frame
// that does not decode is kept as {type: 'undecodable'}. send() numbers
// frames 1, 2, 3, ... unless told an id, and returns the id.
export class ScriptedNode {
  // With challenge false it resolves once the WebSocket is open, before
  // the challenge (for a connection the coordinator refuses instead).
  static async connect(port, { key = nodeKey(), challenge = true, ...opts } = {}) {
    const n = new ScriptedNode();
    n.port = port;
    n.host = `127.0.0.1:${port}`;
    n.key = key;
    n.nextId = 0;
    n.link = await connect(port, opts);
    if (challenge)
      n.challenge = (await n.until((m) => m.type === 'challenge', 'challenge')).body;
    return n;
  }

  get msgs() {
    return this.link.frames.map(decodeFrame);
  }

  get closed() {
    return this.link.closed;
  }

  // Resolves to the first message pred accepts (of all received so far).
  async until(pred, what, ms = 10000) {
    return decodeFrame(await this.link.wait((f) => pred(decodeFrame(f)), what, ms));
  }

  // The error answering frame id (or any error, id undefined).
  error(id, what = `error for frame ${id}`, ms = 10000) {
    return this.until((m) => m.type === 'error' && (id === undefined || m.id === id), what, ms);
  }

  send(type, body, id = ++this.nextId) {
    this.link.send(envelope(type, id, body));
    return id;
  }

  async hello(opts = {}) {
    const id = this.send('hello', helloBody(this.key, this.host, this.challenge.nonce, opts));
    const m = await this.until((x) => x.id === id && (x.type === 'welcome' || x.type === 'error'), 'welcome');
    if (m.type !== 'welcome') throw new Error(`hello refused: ${m.body.code} ${m.body.message}`);
    this.nodeId = m.body.node_id;
    return m.body;
  }

  // maxParallel: the chunks the node computes at once from now on.
  heartbeat(inFlight, { maxParallel } = {}) {
    return this.send('heartbeat', { cpu: 0, mem_used: 0, mem_total: 1 << 30,
      in_flight: inFlight?.length ? inFlight : undefined, max_parallel: maxParallel });
  }

  // Sends a signed batch; returns {id, frame} (frame: the exact bytes sent,
  // for a replay). key signs (default the node's own).
  complete(batch, { key = this.key, ...seal } = {}) {
    const id = ++this.nextId;
    const frame = envelope('complete', id, sealBody(key, this.host, batch, seal));
    this.link.send(frame);
    return { id, frame };
  }

  close() {
    this.link.close();
    return this.link.closed;
  }
}

function decodeFrame(f) {
  if (f.decoded === undefined) {
    try {
      f.decoded = f.opcode === OP.binary ? decode(f.data) : { type: 'text', text: f.data.toString('utf8') };
    } catch (e) {
      f.decoded = { type: 'undecodable', why: e.message };
    }
  }
  return f.decoded;
}
