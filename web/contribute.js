// The contribute page: starts the browser node (node/node-worker.js, which
// runs the node actor and its compute workers) and shows what it does. This
// thread never runs a kernel. A claim token in the fragment
// (#claim=sfc_...) enrols the node under the token's owner; without one it
// joins as a public node. Every address is relative to the page, so the
// page works under a proxy's path prefix too. What this browser's node has
// done in all its sessions comes from the coordinator (GET api/nodes/ID),
// the node's id kept in localStorage once it has been welcomed, and so are
// the contributor's choices (cores, when to pause).
import { api, wsUrl } from './js/api.js';

const $ = (id) => document.getElementById(id);
const ui = {
  start: $('start'), cores: $('cores'), coresOut: $('cores-out'), pauseHidden: $('pause-hidden'),
  pauseBattery: $('pause-battery'), batteryNote: $('battery-note'),
  state: $('state'), rate: $('rate'), computed: $('computed'), chunks: $('chunks'), job: $('job'),
  enrolment: $('enrolment'), total: $('total'),
  detail: $('detail'), log: $('log'),
};

const PREFS_KEY = 'simfarm.contribute';
const maxCores = Math.max(1, Math.min(256, navigator.hardwareConcurrency || 1)); // a node's most workers
const prefs = (() => {
  try { return JSON.parse(localStorage.getItem(PREFS_KEY)) || {}; } catch { return {}; } // storage disabled, or junk
})();
ui.cores.max = String(maxCores);
ui.cores.value = String(Number.isInteger(prefs.cores) ? Math.max(1, Math.min(maxCores, prefs.cores))
  : Math.max(1, Math.min(maxCores, Math.floor(maxCores / 2) || 1)));
ui.coresOut.textContent = ui.cores.value;
if (typeof prefs.pauseHidden === 'boolean') ui.pauseHidden.checked = prefs.pauseHidden;
if (typeof prefs.pauseBattery === 'boolean') ui.pauseBattery.checked = prefs.pauseBattery;

function savePrefs() {
  const p = { cores: Number(ui.cores.value), pauseHidden: ui.pauseHidden.checked, pauseBattery: ui.pauseBattery.checked };
  try { localStorage.setItem(PREFS_KEY, JSON.stringify(p)); } catch { /* storage disabled: not kept */ }
}

const claimToken = new URLSearchParams(location.hash.slice(1)).get('claim') || '';

let node = null;          // the node worker while a node runs
let phase = 'stopped';    // stopped | running | stopping
let samples = [];         // [time ms, items computed] for items/s over the last 10 s
let paused = false;
let battery = null;       // the BatteryManager, where the browser has one
const NODE_KEY = 'simfarm.node';
let nodeId = 0;           // this browser's node, once welcomed
let totalTimer = null;    // refreshes the total while the node runs
let known = null;         // the largest total the coordinator has said: { items, chunks }
let asking = false, askAgain = false, lastAsked = 0, soonTimer = null;
const TOTAL_EVERY_MS = 5000; // while running, besides after each chunk
const TOTAL_GAP_MS = 1000;   // at most one question a second
try { nodeId = Number(localStorage.getItem(NODE_KEY)) || 0; } catch { /* storage disabled */ }
let keyEnrolled = false;  // this browser's key was enrolled with a claim token on an earlier visit
let enrolledNow = false;  // ... with the claim token of this page's address

// The Enrolment field. A key enrolled earlier sends no claim token (the node
// worker leaves it out), so one in the address is dropped from it unused.
function showEnrolment() {
  const id = nodeId ? ` (node ${nodeId})` : '';
  ui.enrolment.textContent = enrolledNow ? 'enrolled with the claim token'
    : keyEnrolled ? `enrolled earlier${id}${claimToken ? '; the claim token in the address was not used' : ''}`
    : claimToken ? 'enrolling with a claim token' : 'public node';
  if (keyEnrolled && claimToken && location.hash) history.replaceState(null, '', location.pathname + location.search);
}

// Whether the key the node worker keeps (IndexedDB, node-worker.js) was
// enrolled on an earlier visit. The page only reads: where there is no
// database yet it makes none.
function readKeyEnrolled() {
  return new Promise((resolve) => {
    let open;
    try { open = indexedDB.open('simfarm-node', 1); } catch { resolve(false); return; }
    open.onupgradeneeded = () => open.transaction.abort(); // no key yet
    open.onerror = (e) => { e.preventDefault(); resolve(false); };
    open.onsuccess = () => {
      const db = open.result;
      try {
        const req = db.transaction('key', 'readonly').objectStore('key').get('node');
        req.onsuccess = () => { db.close(); resolve(req.result?.enrolled === true); };
        req.onerror = () => { db.close(); resolve(false); };
      } catch { db.close(); resolve(false); }
    };
  });
}

function log(line) {
  ui.log.textContent += `${new Date().toLocaleTimeString()} ${line}\n`;
}

// This browser's node's work in all its sessions, from the coordinator.
// Totals only grow: an answer below what was shown (the coordinator
// answers 0 just after a session ends, before the session's row is
// written) leaves the larger one, and "nothing yet" is said only while
// nothing was ever counted. One question at a time; one asked meanwhile
// follows it.
async function showTotal() {
  if (!nodeId) return;
  if (asking) { askAgain = true; return; }
  asking = true;
  lastAsked = Date.now();
  try {
    const n = await api('GET', `api/nodes/${nodeId}`);
    if (known === null || n.items_total > known.items || (n.items_total === known.items && n.chunks_total > known.chunks))
      known = { items: n.items_total, chunks: n.chunks_total };
    ui.total.textContent = known.chunks === 0 ? 'nothing yet'
      : `${known.items.toLocaleString('en')} items in ${known.chunks.toLocaleString('en')} chunks`;
  } catch { /* a node this coordinator does not know (another farm's, or not reachable now): left as it is */ }
  asking = false;
  if (askAgain) { askAgain = false; totalSoon(); }
}

// The total again soon: a chunk was done (so counted by the coordinator)
// or the session ended; not sooner than TOTAL_GAP_MS after the last ask.
function totalSoon(delay = 0) {
  if (soonTimer !== null) return;
  soonTimer = setTimeout(() => { soonTimer = null; showTotal(); },
    Math.max(delay, lastAsked + TOTAL_GAP_MS - Date.now(), 0));
}

function setPhase(p) {
  phase = p;
  ui.start.textContent = p === 'running' ? 'Stop' : p === 'stopping' ? 'Stop now' : 'Start';
  ui.start.classList.toggle('running', p !== 'stopped');
}

function browserName() {
  const b = navigator.userAgentData?.brands?.find((x) => !/not.a.brand/i.test(x.brand));
  return (b ? `${b.brand} ${b.version}` : navigator.userAgent).slice(0, 120);
}

function start() {
  const cores = Number(ui.cores.value);
  node = new Worker('node/node-worker.js');
  node.onmessage = (e) => onNode(e.data);
  node.onerror = (e) => { log(`node worker: ${e.message}`); stopped(1); };
  samples = [[performance.now(), 0]];
  node.postMessage({
    type: 'start', cores, hardwareCores: maxCores, claimToken,
    url: wsUrl('ws/node'),
    audience: location.host.toLowerCase(), // what the coordinator reads from the Host header
    os: (navigator.userAgentData?.platform || navigator.platform || '').toLowerCase().slice(0, 31),
    browser: browserName(),
    memory: (navigator.deviceMemory || 0) * 1073741824,
  });
  setPhase('running');
  ui.state.textContent = 'starting';
  log(`starting with ${cores} core${cores > 1 ? 's' : ''}`);
  syncPause();
}

function stopped(code) {
  node?.terminate();
  node = null;
  paused = false;
  setPhase('stopped');
  if (code !== 0 && ui.state.textContent !== 'not enrolled') ui.state.textContent = 'stopped';
  ui.rate.textContent = '0';
  ui.job.textContent = 'none';
  clearInterval(totalTimer);
  totalTimer = null;
  showTotal();
  totalSoon(1500); // the session's last chunks, written as it ended
}

function onNode(m) {
  switch (m.type) {
  case 'state': {
    ui.state.textContent = m.name;
    ui.detail.textContent = m.detail;
    const welcomed = /^node (\d+)$/.exec(m.detail || ''); // running or paused, as welcomed
    if (welcomed) {
      nodeId = Number(welcomed[1]);
      try { localStorage.setItem(NODE_KEY, String(nodeId)); } catch { /* storage disabled */ }
      showEnrolment();
      showTotal();
      clearInterval(totalTimer);
      totalTimer = setInterval(showTotal, TOTAL_EVERY_MS);
    }
    break;
  }
  case 'progress': {
    // computed counts the chunks under way (their workers report every
    // 100 ms or so), so the rate is live even when a chunk takes minutes
    // a chunk done: the coordinator counts it once its result is accepted,
    // a round trip later
    if (String(m.chunks) !== ui.chunks.textContent) totalSoon(500);
    ui.chunks.textContent = String(m.chunks);
    ui.computed.textContent = m.computed.toLocaleString('en');
    ui.job.textContent = m.job === null ? 'none' : `job ${m.job}`;
    const now = performance.now();
    samples.push([now, m.computed]);
    while (samples.length > 2 && now - samples[1][0] > 10000) samples.shift();
    const [t0, i0] = samples[0];
    ui.rate.textContent = now > t0 ? Math.round((m.computed - i0) * 1000 / (now - t0)).toLocaleString('en') : '0';
    break;
  }
  case 'log':
    log(m.line);
    break;
  case 'key': // what the node worker found at start
    keyEnrolled ||= m.enrolled;
    showEnrolment();
    break;
  case 'enrolled':
    enrolledNow = true;
    showEnrolment();
    history.replaceState(null, '', location.pathname + location.search);
    break;
  case 'stopped':
    log(`stopped (${m.code})`);
    stopped(m.code);
    break;
  }
}

// Pause while hidden, or while on battery power, only if the contributor
// asked for it.
function syncPause() {
  const why = ui.pauseHidden.checked && document.visibilityState === 'hidden' ? 'this tab is hidden'
    : ui.pauseBattery.checked && battery && !battery.charging ? 'on battery power' : '';
  const want = why !== '';
  if (node && want !== paused) {
    paused = want;
    node.postMessage({ type: 'pause', on: want });
    log(want ? `pausing: ${why}` : 'resuming');
  }
}

// Without the battery's state the choice means nothing: the checkbox is
// disabled, and the note beside it says why.
function noBattery(why) {
  ui.pauseBattery.disabled = true;
  ui.batteryNote.textContent = why;
  ui.batteryNote.hidden = false;
}

if (navigator.getBattery) {
  navigator.getBattery().then((b) => {
    battery = b;
    b.addEventListener('chargingchange', syncPause);
    syncPause();
  }).catch(() => noBattery('this browser would not tell this page whether it runs on battery'));
} else {
  noBattery('this browser does not tell pages whether it runs on battery');
}

ui.start.addEventListener('click', () => {
  if (phase === 'stopped') start();
  else { setPhase('stopping'); node.postMessage({ type: 'stop' }); }
});
ui.cores.addEventListener('input', () => { ui.coresOut.textContent = ui.cores.value; });
ui.cores.addEventListener('change', () => {
  savePrefs();
  if (phase !== 'running') return;
  // the same session goes on: new workers start now, ones past the count
  // finish the chunk they hold first
  const cores = Number(ui.cores.value);
  node.postMessage({ type: 'cores', cores });
  log(`${cores} core${cores > 1 ? 's' : ''} from now on`);
});
ui.pauseHidden.addEventListener('change', () => { savePrefs(); syncPause(); });
ui.pauseBattery.addEventListener('change', () => { savePrefs(); syncPause(); });
document.addEventListener('visibilitychange', syncPause);
showTotal();
showEnrolment();
readKeyEnrolled().then((e) => { keyEnrolled ||= e; showEnrolment(); });
