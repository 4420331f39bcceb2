// A compute worker of the browser node: its own instance of the module, one
// chunk at a time. In: first { wasmBinary }, the bytes the node worker
// fetched and hashed (without it the module fetches its own); then { job,
// chunk, hash, work, start: [lo, hi], count: [lo, hi], variant } from the
// node worker. Out: { progress } (the chunk's items done so far, about
// every 100 ms while it runs), then { err, data, ms, error }; or { fatal }
// when the module would not instantiate or trapped: the node worker ends
// this worker then.
'use strict';
importScripts('simfarm-node.js');

let ready = null;
let hashPtr = 0;

function instance(opts) {
  return SimfarmNode(opts).then((m) => {
    m.onChunkProgress = (done) => self.postMessage({ progress: done });
    return m;
  });
}

function bytesIn(m, bytes) {
  const p = m._ndw_alloc(bytes.length);
  m.HEAPU8.set(bytes, p);
  return p;
}

self.onmessage = (e) => {
  const c = e.data;
  if (c.wasmBinary) {
    ready ||= instance({ wasmBinary: c.wasmBinary });
    ready.catch(() => {}); // told with the first chunk
    return;
  }
  ready ||= instance({});
  compute(c).catch((err) => self.postMessage({ fatal: String(err?.message || err) }));
};

async function compute(c) {
  const m = await ready;
  if (!hashPtr) hashPtr = m._ndw_alloc(32);
  m.HEAPU8.set(c.hash, hashPtr);
  const work = bytesIn(m, c.work);
  const t0 = performance.now();
  const err = m._ndw_compute(hashPtr, work, c.work.length, c.start[0], c.start[1], c.count[0], c.count[1],
    c.variant ?? 0);
  const ms = Math.round(performance.now() - t0);
  m._ndw_free(work);
  if (err !== 0) {
    const p = m._ndw_error();
    let end = p;
    while (m.HEAPU8[end] !== 0) end++;
    self.postMessage({ err, error: new TextDecoder().decode(m.HEAPU8.subarray(p, end)), ms });
    return;
  }
  const p = m._ndw_result();
  const data = m.HEAPU8.slice(p, p + m._ndw_result_len());
  self.postMessage({ err: 0, data, ms }, [data.buffer]);
}
