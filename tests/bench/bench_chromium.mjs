// The browser node's kernel speed: European option paths per second per
// Web Worker in Debian's Chromium (the compute workers of web/node/, fed
// chunks the way the node worker feeds them), against the native CPU
// backend on one thread of the same machine, in the same run. Both get
// chunks sized, as the coordinator sizes them, to take BENCH_CHROMIUM_CHUNK_MS
// (default 1,000; the coordinator's default is 10,000) at the speed of the
// last one, after a first chunk of 200,000 paths.
//
//   sim_european_native_thread   native nd_compute_cpu, one thread
//   sim_european_chromium        Chromium, paths/s per worker, with
//                                BENCH_CHROMIUM_WORKERS workers (default:
//                                every core, at most 4)
//   sim_european_chromium_over_native   the ratio (target ≥ 0.5)
//   sim_stage_<stage>_chromium   build/wasm/bench_sim_stages.js in a Web
//                                Worker: ns per item of each stage of a
//                                path (the same program's _cpu and _wasm
//                                lines come from `make bench ONLY=sim_stages`)
//
// Prints BENCH lines; progress goes to stderr. Needs `make` (the bundle in
// web/node/ and build/tests/wasm/node_actor) and tests/browser's npm packages.
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';
import { launch, serve } from '../browser/chromium.mjs';

const SECONDS = 4;
const CHUNK = 200000;
const CHUNK_MS = Number(process.env.BENCH_CHROMIUM_CHUNK_MS) || 1000;
const european = '{"S0": 100, "K": 100, "r": 0.05, "sigma": 0.2, "T": 1}';
const harness = path.join(build, 'tests/wasm/node_actor');
const workers = Number(process.env.BENCH_CHROMIUM_WORKERS) || Math.min(4, os.availableParallelism());

function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}

// Runs in the page: n compute workers, each sent chunk after chunk until the
// time is up; resolves to the paths each computed per second.
const page = `<!doctype html><meta charset="utf-8"><title>bench</title><script>
window.bench = (n, seconds, first, chunkMs, ctxHex, hashHex) => new Promise((resolve, reject) => {
  const bytes = (h) => new Uint8Array(h.match(/../g).map((x) => parseInt(x, 16)));
  const work = bytes(ctxHex), hash = bytes(hashHex);
  const rates = [];
  let left = n;
  for (let w = 0; w < n; w++) {
    const worker = new Worker('/node/compute-worker.js');
    let next = w * 1e11, chunk = first, items = 0, t0 = 0, sent = 0;
    const send = () => {
      sent = performance.now();
      worker.postMessage({ job: 1, chunk: next, hash, work, start: [next % 4294967296, Math.floor(next / 4294967296)],
        count: [chunk, 0] });
    };
    worker.onerror = (e) => reject(new Error(e.message));
    worker.onmessage = (e) => {
      if (e.data.progress !== undefined) return; // the chunk's items so far (for the contribute page)
      if (e.data.fatal !== undefined || e.data.err !== 0) { reject(new Error(e.data.fatal ?? e.data.error)); return; }
      const now = performance.now();
      if (t0 === 0) t0 = now; // the first chunk warms the worker up
      else items += chunk;
      if (now - t0 < seconds * 1000) {
        next += chunk;
        chunk = Math.max(first, Math.round(chunk / (now - sent) * chunkMs / 64) * 64);
        send();
        return;
      }
      rates[w] = items * 1000 / (now - t0);
      worker.terminate();
      if (--left === 0) resolve(rates);
    };
    send();
  }
});
</script>`;

// A worker that runs an emcc program's main and posts what it prints; it
// sits beside the program, which loads its .wasm from its own directory.
const stagesPage = `<!doctype html><meta charset="utf-8"><title>stages</title><script>
window.stages = () => new Promise((resolve, reject) => {
  const w = new Worker('/wasm/stages-worker.js');
  const lines = [];
  w.onerror = (e) => reject(new Error(e.message));
  w.onmessage = (e) => { if (e.data === null) resolve(lines); else lines.push(e.data); };
});
</script>`;
const stagesWorker = `var Module = { print: (s) => postMessage(s), printErr: (s) => postMessage('# ' + s),
  onExit: () => postMessage(null), quit: () => {}, onAbort: (what) => { postMessage('# abort: ' + what); postMessage(null); } };
importScripts('bench_sim_stages.js');`;

const ctxRun = await run(harness, ['ctx', 'option', european, '1']);
if (ctxRun.code !== 0) throw new Error(`node_actor ctx: ${ctxRun.stderr}`);
const ctxHex = ctxRun.stdout.trim().split(' ')[1];
const hashHex = crypto.createHash('sha256').update(Buffer.from(ctxHex, 'hex')).digest('hex');

console.error(`# native, one thread, ${SECONDS} s, chunks of about ${CHUNK_MS} ms`);
const nat = await run(harness, ['bench', String(SECONDS), String(CHUNK_MS)], { timeoutMs: 60000 });
const m = nat.stdout.match(/BENCH sim_european_cpu (\S+) paths\/s/);
if (nat.code !== 0 || !m) throw new Error(`node_actor bench: ${nat.stderr}${nat.stdout}`);
const native = Number(m[1]);

const server = await serve({ '/node/': path.join(top, 'web/node'), '/wasm/': path.join(build, 'wasm') },
  { '/': page, '/stages': stagesPage, '/wasm/stages-worker.js': stagesWorker });
const browser = await launch();
try {
  const tab = await browser.newPage();
  await tab.goto(server.url + '/');
  const version = browser.version();
  console.error(`# Chromium ${version}, ${workers} workers, ${SECONDS} s, chunks of about ${CHUNK_MS} ms`);
  const rates = await tab.evaluate(([n, s, c, ms, x, h]) => window.bench(n, s, c, ms, x, h),
    [workers, SECONDS, CHUNK, CHUNK_MS, ctxHex, hashHex]);
  const perWorker = rates.reduce((a, b) => a + b, 0) / rates.length;
  bench('sim_european_native_thread', native, 'paths/s');
  bench('sim_european_chromium', perWorker, 'paths/s');
  bench('sim_european_chromium_over_native', perWorker / native, 'ratio');
  const stagesTab = await browser.newPage();
  await stagesTab.goto(server.url + '/stages');
  console.error('# build/wasm/bench_sim_stages.js in a Web Worker');
  const lines = await stagesTab.evaluate(() => window.stages());
  const stages = lines.map((l) => l.match(/^BENCH (sim_stage_\w+)_wasm (\S+) (\S+)$/)).filter((m) => m);
  if (stages.length === 0) throw new Error(`bench_sim_stages in Chromium printed no stage:\n${lines.join('\n')}`);
  for (const m of stages) bench(`${m[1]}_chromium`, Number(m[2]), m[3]);
} finally {
  await browser.close();
  await server.close();
}
