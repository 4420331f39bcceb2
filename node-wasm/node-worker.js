// The node worker of the browser node: the node actor (the same C as the
// native node, actors/node/node.c) on the runtime's WebAssembly port, its
// WebSocket, the key seed in IndexedDB, and one compute worker per core
// the contributor allows. The page talks to it with messages:
//   in:  { type: 'start', cores, hardwareCores, audience, url, claimToken, os, browser, memory }
//        { type: 'cores', cores }    compute with this many workers from now
//                                    on, in the same session
//        { type: 'stop' }            drain (twice: leave now); before the
//                                    node exists: it never starts
//        { type: 'pause', on }       before the node exists: kept for it
//   out: { type: 'state', state, name, detail }   (name: in plain words)
//        { type: 'progress', chunks, items, computed, job, busy }
//             (items: of the chunks done; computed: every item the
//             workers computed, in chunks under way and stopped ones too;
//             job: that of a chunk in hand, null when none is; sent as
//             chunks start and end, and every second)
//        { type: 'log', level, line }
//        { type: 'key', enrolled }   at start: whether the key was enrolled
//                                    earlier (then no claim token is sent)
//        { type: 'enrolled' }        a claim token was used up
//        { type: 'stopped', code }
'use strict';
importScripts('simfarm-node.js');

const WS_PROTOCOL = 'simfarm.node.v1';
const ND_ECANCELLED = -200; // base/err.h, the node range
const ND_STOPPED = 6;       // nd_state, actors/node/node.h
const SIM_EDEVICE = -411;   // base/err.h, the sim range: "device or driver error"
let M = null;
let ws = null;
let workers = [];         // by number; null: none (past the count, or ended)
let cores = 0;            // workers 0 .. cores - 1 take chunks
let wantCores = 0;        // the last count asked for while the node was starting
let busySince = [];
let busyMs = 0;
let statsTimer = 0;
let progress = { chunks: 0, items: 0, job: null }; // job: the last one handed to a worker
let computedBefore = 0;   // items of chunks that ended (done or stopped)
let run = null; // { url, registering, hardwareCores }: from ndw_start until the node stops
let starting = null; // { pause, stop }: what the page asked for while start() waits for the module and the key

// ---- the key seed: 32 random bytes in IndexedDB, made on the first visit ----

function idb(mode, fn) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open('simfarm-node', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('key');
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const tx = open.result.transaction('key', mode);
      const req = fn(tx.objectStore('key'));
      tx.oncomplete = () => { open.result.close(); resolve(req.result); };
      tx.onerror = () => reject(tx.error);
    };
  });
}

async function loadKey() {
  let k = await idb('readonly', (s) => s.get('node'));
  if (!(k && k.seed instanceof Uint8Array && k.seed.length === 32)) {
    k = { seed: crypto.getRandomValues(new Uint8Array(32)), enrolled: false };
    await idb('readwrite', (s) => s.put(k, 'node'));
  }
  return k;
}

// ---- what the module asks of its host ----

function cstr(s) {
  if (s === null || s === undefined) return 0;
  const n = M.lengthBytesUTF8(s) + 1;
  const p = M._ndw_alloc(n);
  M.stringToUTF8(s, p, n);
  return p;
}

function bytesIn(bytes) {
  const p = M._ndw_alloc(bytes.length);
  M.HEAPU8.set(bytes, p);
  return p;
}

function down(why) {
  const p = cstr(why);
  M._ndw_down(p);
  M._ndw_free(p);
}

const host = {
  connect() {
    let sock;
    try {
      sock = new WebSocket(run.url, WS_PROTOCOL);
    } catch (e) {
      setTimeout(() => down(String(e.message || e)), 0);
      return;
    }
    sock.binaryType = 'arraybuffer';
    ws = sock;
    let opened = false;
    sock.onopen = () => {
      opened = true;
      if (ws === sock) M._ndw_up();
    };
    sock.onmessage = (e) => {
      if (ws !== sock || !(e.data instanceof ArrayBuffer)) return;
      const b = new Uint8Array(e.data);
      M._ndw_frame(bytesIn(b), b.length);
    };
    sock.onclose = (e) => {
      if (ws !== sock) return;
      ws = null;
      // 1006: closed with no close frame, before or after it opened
      down(e.reason || (e.code !== 1006 ? `closed (${e.code})` : opened ? 'connection lost' : 'cannot connect'));
    };
  },
  send(bytes) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(bytes);
  },
  compute(w, c) {
    workers[w] ||= computeWorker(w); // the count may have been lowered since the node chose w
    busySince[w] = performance.now();
    progress.job = c.job;
    workers[w].postMessage(c);
    workers[w].pending = c;
    postProgress();
  },
  // The chunk of worker w is not wanted any more: end that worker at once
  // (it cannot be asked while it computes), start a fresh one, and tell the
  // node the chunk was stopped (ND_ECANCELLED), after this call returns.
  cancel(w) {
    const c = workers[w]?.pending;
    if (!c) return;
    computedBefore += workers[w].partial || 0;
    workers[w].terminate();
    workers[w] = w < cores ? computeWorker(w) : null;
    const ms = Math.round(performance.now() - busySince[w]);
    busyMs += performance.now() - busySince[w];
    busySince[w] = 0;
    self.postMessage({ type: 'log', level: 0, line: `chunk ${c.chunk} of job ${c.job} stopped after ${ms} ms` });
    setTimeout(() => { if (M) M._ndw_done(w, ND_ECANCELLED, 0, 0, ms); }, 0);
  },
  // The coordinator's welcome is the state that names the node ("node N"),
  // running or paused: the claim token is used up then.
  state(st, name, detail) {
    if (run && run.registering && /^node \d+$/.test(detail)) {
      run.registering = false;
      idb('readwrite', (s) => s.get('node')).then(async (k) => {
        if (!k) return;
        k.enrolled = true;
        await idb('readwrite', (s) => s.put(k, 'node'));
        self.postMessage({ type: 'enrolled' });
      }).catch(() => {});
    }
    self.postMessage({ type: 'state', state: st, name, detail });
  },
  log(level, line) {
    self.postMessage({ type: 'log', level, line });
  },
  stopped(code) {
    clearInterval(statsTimer);
    for (const w of workers) w?.terminate();
    workers = [];
    cores = 0;
    const sock = ws;
    ws = null;
    if (sock) sock.close(1000, 'stopped');
    run = null;
    self.postMessage({ type: 'stopped', code });
  },
};

function computeWorker(w) {
  const worker = new Worker('compute-worker.js');
  worker.postMessage({ wasmBinary: M.wasmBinary }); // the module the node runs and hashed
  // A worker that was ended (cancel, fewer cores) may still have a message
  // or an error on its way. An error is the node worker's to handle: left
  // unhandled it would reach the page, which takes it for the node's own.
  worker.onmessage = (e) => { if (workers[w] === worker) onWorkerDone(w, e); };
  worker.onerror = (e) => {
    e.preventDefault();
    if (workers[w] === worker) workerFailed(w, e.message);
  };
  return worker;
}

// Compute worker w failed: its script or module would not load, or the
// module trapped. It is ended; a chunk it held fails (the node lists it no
// more, so the coordinator hands it out again), and the next chunk for w
// gets a fresh worker (host.compute).
function workerFailed(w, why) {
  const x = workers[w];
  const c = x.pending;
  self.postMessage({ type: 'log', level: 1, line: `compute worker ${w}: ${why}` });
  x.terminate();
  workers[w] = null;
  if (!c) return;
  computedBefore += x.partial || 0;
  const ms = Math.round(performance.now() - busySince[w]);
  busyMs += performance.now() - busySince[w];
  busySince[w] = 0;
  M._ndw_done(w, SIM_EDEVICE, 0, 0, ms);
  postProgress();
}

// The job of a chunk in hand (the last job handed out while one of its
// chunks is), or null while the node holds none: idle, paused, or between
// jobs.
function currentJob() {
  let job = null;
  for (const x of workers) {
    if (!x?.pending) continue;
    if (x.pending.job === progress.job) return progress.job;
    job = x.pending.job;
  }
  return job;
}

function postProgress() {
  let computed = computedBefore;
  for (const x of workers) computed += x?.partial || 0;
  self.postMessage({ type: 'progress', chunks: progress.chunks, items: progress.items, computed, job: currentJob(),
    busy: workers.filter((x) => x?.pending).length });
}

function onWorkerDone(w, e) {
  const r = e.data;
  if (r.progress !== undefined) {
    if (workers[w].pending) workers[w].partial = r.progress;
    return;
  }
  if (r.fatal !== undefined) {
    workerFailed(w, r.fatal);
    return;
  }
  const c = workers[w].pending;
  const partial = workers[w].partial || 0;
  workers[w].pending = null;
  workers[w].partial = 0;
  busyMs += performance.now() - busySince[w];
  busySince[w] = 0;
  if (r.err === 0) {
    const n = c.count[0] + c.count[1] * 4294967296;
    progress.chunks++;
    progress.items += n;
    computedBefore += n;
    M._ndw_done(w, 0, bytesIn(r.data), r.data.length, r.ms);
  } else {
    self.postMessage({ type: 'log', level: 1, line: `chunk ${c.chunk} of job ${c.job}: ${r.error}` });
    computedBefore += partial;
    M._ndw_done(w, r.err, 0, 0, r.ms);
  }
  if (w >= cores) { // fewer cores now: this one has finished its last chunk
    workers[w].terminate();
    workers[w] = null;
  }
  postProgress();
}

// More cores: the new workers first, then the node is told. Fewer: the
// node is told; idle workers past the count end now, busy ones once their
// chunk is done (onWorkerDone).
function setCores(k) {
  if (!run || !(k >= 1 && k <= run.hardwareCores) || k === cores) return;
  for (let w = cores; w < k; w++) {
    workers[w] ||= computeWorker(w);
    busySince[w] ||= 0;
  }
  cores = k;
  M._ndw_set_workers(k);
  for (let w = k; w < workers.length; w++) {
    if (workers[w] && !workers[w].pending) {
      workers[w].terminate();
      workers[w] = null;
    }
  }
}

// CPU use for heartbeats: the workers' busy time over the last interval, of
// all the machine's cores.
function reportStats(machineCores) {
  let last = performance.now();
  return setInterval(() => {
    const now = performance.now();
    let busy = busyMs;
    busyMs = 0;
    for (let w = 0; w < busySince.length; w++) {
      if (busySince[w]) { busy += now - busySince[w]; busySince[w] = now; }
    }
    const permille = Math.min(1000, Math.round(1000 * busy / ((now - last) * machineCores)));
    last = now;
    M._ndw_stats(permille, M.HEAPU8.length, 0);
    postProgress();
  }, 1000);
}

// The module is instantiated from bytes we fetched ourselves, and the
// compute workers from the same bytes, so the SHA-256 the node reports in
// hello is that of the WebAssembly that runs.
async function loadModule() {
  const r = await fetch('simfarm-node.wasm');
  if (!r.ok) throw new Error(`simfarm-node.wasm: HTTP ${r.status}`);
  const wasmBinary = new Uint8Array(await r.arrayBuffer());
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', wasmBinary));
  const m = await SimfarmNode({ wasmBinary });
  m.wasmBinary = wasmBinary;
  m.checksum = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  return m;
}

// The page may ask for a pause (or a resume) or a stop while the module
// loads: the node does not exist yet, so what it asked for is kept in
// `starting`. A stop ends the start there (the node never connects); the
// last pause or resume is given to the node once it exists.
async function start(msg) {
  if (run || starting) return;
  starting = { pause: false, stop: false };
  if (!M) M = await loadModule();
  M.ndHost = host;
  const key = await loadKey();
  self.postMessage({ type: 'key', enrolled: key.enrolled === true });
  const asked = starting;
  starting = null;
  if (asked.stop) {
    self.postMessage({ type: 'log', level: 0, line: 'stopped before the node started' });
    self.postMessage({ type: 'state', state: ND_STOPPED, name: 'stopped', detail: '' });
    self.postMessage({ type: 'stopped', code: 0 });
    return;
  }
  const token = key.enrolled ? '' : (msg.claimToken || '');
  const hardwareCores = Math.max(msg.hardwareCores || 0, msg.cores);
  run = { url: msg.url, registering: token !== '', hardwareCores };
  progress = { chunks: 0, items: 0, job: null };
  computedBefore = 0;
  workers = [];
  busySince = [];
  cores = msg.cores;
  for (let w = 0; w < cores; w++) {
    workers.push(computeWorker(w));
    busySince.push(0);
  }
  statsTimer = reportStats(hardwareCores);
  const args = [msg.audience, token, msg.os, msg.browser, 'wasm-simd128', M.checksum].map(cstr);
  const seed = bytesIn(key.seed);
  const rc = M._ndw_start(seed, args[0], args[1], cores, hardwareCores, args[2], args[3], args[4], msg.memory || 0,
    args[5]);
  M._ndw_free(seed);
  args.forEach((p) => M._ndw_free(p));
  if (rc !== 0) {
    self.postMessage({ type: 'log', level: 1, line: `cannot start the node (${rc})` });
    host.stopped(1);
  } else {
    if (wantCores) setCores(wantCores);
    if (asked.pause) M._ndw_pause(1);
  }
}

self.onmessage = (e) => {
  const msg = e.data;
  if (msg.type === 'start') {
    start(msg).catch((err) => {
      self.postMessage({ type: 'log', level: 1, line: `cannot start the node: ${err.message || err}` });
      self.postMessage({ type: 'stopped', code: 1 });
      run = null;
      starting = null;
    });
  } else if (msg.type === 'cores') {
    wantCores = msg.cores;
    if (cores > 0) setCores(msg.cores);
  } else if (msg.type === 'stop') {
    if (starting) starting.stop = true;
    else if (run) M._ndw_drain();
  } else if (msg.type === 'pause') {
    if (starting) starting.pause = msg.on;
    else if (run) M._ndw_pause(msg.on ? 1 : 0);
  }
};
