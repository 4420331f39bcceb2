// The desktop node (build/bin/simfarm-desktop, GTK 3) end to end, in a
// private desktop session (session.mjs: Xvfb, its own session and system
// buses, AT-SPI, UPower and logind mocked, GNOME's idle monitor and a tray
// too), driven through its accessibility tree (atspi.mjs) against a real
// coordinator and PostgreSQL. It joins a farm through its first-run form
// with a claim token and computes chunks that are accepted; on battery it
// pauses within a second and runs again on AC, holding logind's sleep
// inhibitor only while it computes; it uses its in-use cores while the
// computer is in use and its idle cores once idle, and pauses while in use
// with no cores for that; it snoozes, pauses and resumes; Quit drains and
// exits 0; its settings survive a restart; a link joins at once. A
// screenshot of its main window goes to docs/images/desktop.png.
//
// Each test goes on from the state the one before left (one farm, one app
// installation), as a person using it would.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, eventually, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve, call, metrics } from '../lib/coord.mjs';
import { startSession } from './session.mjs';
import { driver } from './atspi.mjs';

const app = path.join(build, 'bin/simfarm-desktop');
const option = JSON.parse(fs.readFileSync(path.join(top, 'examples/option.json'), 'utf8'));
const tiers = ['own', 'team', 'community', 'public'];
const verify = { trust: tiers };
const cpus = os.availableParallelism();
const mainTitle = 'simfarm desktop node';
const joinTitle = 'simfarm — join a farm';
// "Changes take effect within one second": the deadline for each, with a
// little room for the accessibility bus's own round trips.
const SECOND = 1000 + 500;
// A worker switched off finishes the chunk it holds (the farm sizes chunks
// to about 10 s); a pause holds every worker inside its chunk at once.
const CHUNK_END = 30000;
// The input idle time is asked of the idle monitor once a second.
const IDLE_SEEN = SECOND + 1000;
// A node that paused told the farm it takes no new work: resumed, its held
// chunks go on at once, and it starts a new session once they are sent.
const RESUMED = 20000;

let pg, srv, s, ui;
let desktop; // the running app: { child, pid, out, exited, w }
let nodeId, jobId;

before(async () => {
  assert.ok(fs.existsSync(app), `${app} missing: build it with make`);
  pg = await startPostgres();
  srv = await serve(pg.url);
  s = await startSession({ mutter: true, tray: true });
  ui = await driver(s);
});

after(async () => {
  if (desktop) await quitHard(desktop);
  if (jobId) await call(srv, 'POST', `/api/jobs/${jobId}/cancel`).catch(() => {});
  await ui?.close();
  await s?.stop();
  await srv?.stop();
  await pg?.stop();
});

// Starts the app in the session (env: more variables); resolves once its
// accessibility tree is on the bus, to { child, pid, out(), exited, w } with
// w the atspi helpers bound to it.
async function launch(args = [], env = {}) {
  const child = spawn(app, args, { env: { ...s.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const d = { child, pid: child.pid, out: () => out, exited };
  const gone = exited.then((e) => { throw new Error(`simfarm-desktop exited (${e.code ?? e.signal}) at its start:\n${out}`); });
  d.w = await Promise.race([ui.waitApp({ pid: child.pid }, 30000), gone]).catch((e) => {
    e.message += `\nits output:\n${out}`;
    throw e;
  });
  gone.catch(() => {});
  return d;
}

// Kills what is left of an app's process group.
async function quitHard(d) {
  if (d.child.exitCode === null && d.child.signalCode === null) {
    try { process.kill(-d.pid, 'SIGKILL'); } catch { /* gone */ }
    await d.exited;
  }
}

// The app's output appended to a failing step's message.
async function step(what, f) {
  try {
    return await f();
  } catch (e) {
    e.message = `${what}: ${e.message}${desktop ? `\nsimfarm-desktop's output:\n${desktop.out().slice(-4000)}` : ''}`;
    throw e;
  }
}

const state = (want, ms = SECOND) => desktop.w.untilText('label', 'State', want, ms);
// Resumed within `ms` (computing its held chunks, or starting its new
// session), then running in the new session.
async function resumed(ms = SECOND) {
  await state(/^(Running|Resuming: a new session with the farm)$/, ms);
  await state('Running', RESUMED);
}
// The "Workers" label's CPU lines: [{ n, off, idle, line }].
async function cpuWorkers() {
  const text = await desktop.w.text('label', 'Workers');
  return text.split('\n').filter((l) => /^CPU \d+:/.test(l)).map((line) => ({
    // held inside its chunk (paused): computing nothing, as off
    n: Number(line.match(/^CPU (\d+)/)[1]), off: /: off$|, held inside it$/.test(line), idle: /: idle$/.test(line), line,
  }));
}
// Waits until exactly n CPU workers are on (computing or idle, not off).
async function cpusOn(n, ms = SECOND) {
  let last = '';
  try {
    return await eventually(async () => {
      const w = await cpuWorkers().catch((e) => { last = e.message; return []; });
      if (w.length) last = w.map((x) => x.line).join(' | ');
      return w.length && w.filter((x) => !x.off).length === n ? w : null;
    }, `${n} CPU workers on`, ms, 20);
  } catch (e) {
    e.message += ` (Workers label: ${last})`;
    throw e;
  }
}
const simfarmInhibitors = async () => (await s.inhibitors()).filter((i) => i.who === 'simfarm');
const inhibited = (held, ms = SECOND) => eventually(async () => {
  const list = await simfarmInhibitors();
  return (list.length > 0) === held ? list : null;
}, held ? 'logind\'s sleep inhibitor held by simfarm' : 'simfarm\'s sleep inhibitor released', ms, 20);
const settingsFile = () => path.join(s.env.XDG_CONFIG_HOME, 'simfarm/desktop.ini');
const settings = () => fs.readFileSync(settingsFile(), 'utf8');
// A value from the [desktop] group of desktop.ini.
const setting = (key) => settings().match(new RegExp(`^${key}=(.*)$`, 'm'))?.[1];

test('the first-run form joins the farm with a claim token; its chunks are accepted', async () => {
  const t = await call(srv, 'POST', '/api/tokens', { kind: 'claim', owner: 'alice', tier: 'team', expires_in: 600 });
  assert.equal(t.status, 201, t.text);
  // A job long enough to keep the node busy through the tests that follow
  // (cancelled at the end).
  const created = await call(srv, 'POST', '/api/jobs', { kernel: 'option', params: option, items: 1e12, seed: 7, tiers, verify });
  assert.equal(created.status, 201, created.text);
  jobId = created.json.id;

  // Nobody at the keyboard: idle, so the defaults (no cores while in use) run.
  await s.setIdle(10 * 60000);
  desktop = await step('starting simfarm-desktop with no settings', () => launch());
  const { w } = desktop;
  await step('the first-run form', async () => {
    await w.window(joinTitle, 10000);
    await w.find('push button', 'Join');
    await w.find('push button', 'Join as a public node');
  });
  await step('a wrong claim token refused in "Join error"', async () => {
    await w.setText('text', 'Farm address', srv.url);
    await w.setText('text', 'Claim token', 'sfc_not-a-token');
    await w.click('push button', 'Join');
    await w.untilText('label', 'Join error', /^The farm refused to enrol this computer: the claim token is unknown, used up, revoked or expired/, 15000);
  });
  await step('joining with the claim token', async () => {
    await w.setText('text', 'Claim token', t.json.token);
    await w.click('push button', 'Join');
    await w.window(mainTitle, 15000);
  });
  const node = await step('the "Node" label naming the node, its owner and tier', async () => {
    const text = await w.untilText('label', 'Node', /^Node \d+ · owner alice · tier team$/, 15000);
    return Number(text.match(/^Node (\d+)/)[1]);
  });
  nodeId = node;
  await step('the node online at the coordinator', () => eventually(async () => {
    const r = await call(srv, 'GET', `/api/nodes/${nodeId}`);
    return r.status === 200 && r.json.online && r.json.owner === 'alice' && r.json.tier === 'team';
  }, `node ${nodeId} online as alice's, tier team`, 15000));
  await step('the "State" label saying "Running"', () => state('Running', 30000));
  await step('chunks accepted, counted in "Today" and "In all"', async () => {
    await eventually(async () => {
      const j = (await call(srv, 'GET', `/api/jobs/${jobId}`)).json;
      return (j.progress?.chunks_accepted ?? 0) >= 1;
    }, 'a chunk of the job accepted', 120000);
    await w.untilText('label', 'Today', /^Today: [1-9][\d,]* chunks?, [1-9][\d,]* items accepted$/, 30000);
    await w.untilText('label', 'In all', /[1-9]/, 30000);
  });
  await step('the settings and key files', () => {
    assert.equal(setting('server'), srv.url, settings());
    assert.ok(fs.existsSync(path.join(s.env.XDG_DATA_HOME, 'simfarm/desktop.key')), 'desktop.key');
    assert.ok(fs.existsSync(path.join(s.env.XDG_DATA_HOME, 'simfarm/desktop-totals.ini')), 'desktop-totals.ini');
  });
  await step('a tray icon registered with the StatusNotifierWatcher', () =>
    eventually(async () => (await s.sniItems()).length >= 1, 'a StatusNotifierItem registered', 10000));
});

test('on battery it pauses within a second and drops the sleep inhibitor; on AC it runs again', async () => {
  assert.ok(nodeId, 'the node joined (the test before)');
  await step('the sleep inhibitor held while computing on AC', async () => {
    const [i] = await inhibited(true, 5000);
    assert.deepEqual([i.what, i.who, i.why, i.mode], ['sleep', 'simfarm', 'computing chunks for the farm', 'block']);
  });
  await step('on battery: "Paused: on battery" within a second', async () => {
    await s.setBattery(true);
    await state('Paused: on battery');
  });
  await step('on battery: no inhibitor', () => inhibited(false));
  await step('on battery: no CPU worker on', () => cpusOn(0));
  await step('on AC: "Running" within a second', async () => {
    await s.setBattery(false);
    await resumed();
  });
  await step('on AC: the inhibitor held again', () => inhibited(true));
});

test('idle, it uses its idle cores; in use, its in-use cores; with none for in use, it pauses', async () => {
  assert.ok(nodeId, 'the node joined');
  const { w } = desktop;
  const idleCores = cpus;
  const inUse = Math.max(1, Math.floor(cpus / 2));
  await step('setting the cores', async () => {
    await w.setValue('spin button', 'Cores while idle', idleCores);
    await w.setValue('spin button', 'Cores while in use', inUse);
    await w.setValue('spin button', 'Idle after (minutes)', 3);
    await w.check('check box', 'Use the GPU', false);
  });
  await step('in use (input now): the in-use cores', async () => {
    await s.setIdle(0);
    await state('Running');
    await cpusOn(inUse, CHUNK_END);
  });
  await step('idle for 4 minutes (idle after 3): the idle cores', async () => {
    await s.setIdle(4 * 60000);
    await cpusOn(idleCores, IDLE_SEEN);
  });
  await step('in use again: back to the in-use cores', async () => {
    await s.setIdle(0);
    await cpusOn(inUse, CHUNK_END);
  });
  await step('no cores while in use and no GPU: "Paused: you are using the computer"', async () => {
    await w.setValue('spin button', 'Cores while in use', 0);
    await state('Paused: you are using the computer');
    await inhibited(false);
  });
  await step('idle again: running on the idle cores', async () => {
    await s.setIdle(10 * 60000);
    await resumed(IDLE_SEEN);
    await cpusOn(idleCores);
  });
  await step('"Run at idle priority": the compute threads under SCHED_IDLE, and back', async () => {
    // the scheduling policy of each of the app's threads: field 41 of
    // /proc/PID/task/TID/stat (5 is SCHED_IDLE)
    const idleThreads = () => fs.readdirSync(`/proc/${desktop.pid}/task`).filter((tid) => {
      try {
        const stat = fs.readFileSync(`/proc/${desktop.pid}/task/${tid}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38] === '5';
      } catch { return false; } // a thread that has just ended
    }).length;
    assert.ok(idleThreads() >= cpus, `${idleThreads()} threads under SCHED_IDLE, want one a core at least`);
    await w.check('check box', 'Run at idle priority', false);
    await eventually(() => idleThreads() === 0, 'no thread under SCHED_IDLE', SECOND);
    await w.check('check box', 'Run at idle priority', true);
    await eventually(() => idleThreads() >= cpus, 'the compute threads under SCHED_IDLE again', SECOND);
  });
  await step('the settings written', () => eventually(() =>
    setting('cores_in_use') === '0' && setting('cores_idle') === String(idleCores) && setting('idle_minutes') === '3' &&
    setting('gpu') === 'false', `desktop.ini with the cores set:\n${fs.existsSync(settingsFile()) ? settings() : '(none)'}`, 5000));
});

test('snooze 1 h, pause and resume', async () => {
  assert.ok(nodeId, 'the node joined');
  const { w } = desktop;
  await step('"Snooze 1 h": "Paused: snoozed until HH:MM", an hour from now', async () => {
    const at = new Date(Date.now() + 3600000);
    await w.click('push button', 'Snooze 1 h');
    const text = await state(/^Paused: snoozed until \d\d:\d\d$/);
    const [h, m] = text.match(/(\d\d):(\d\d)$/).slice(1).map(Number);
    const minutes = (h * 60 + m - (at.getHours() * 60 + at.getMinutes()) + 1440) % 1440;
    assert.ok(minutes <= 1 || minutes >= 1439, `snoozed until ${h}:${m}, expected about ${at.getHours()}:${at.getMinutes()}`);
    await inhibited(false);
    await cpusOn(0);
  });
  await step('"Resume" ends the snooze', async () => {
    await w.click('push button', 'Resume');
    await resumed();
    await w.find('push button', 'Pause');
  });
  await step('"Pause": "Paused by you"', async () => {
    await w.click('push button', 'Pause');
    await state('Paused by you');
    await w.find('push button', 'Resume');
    await inhibited(false);
    await cpusOn(0);
  });
  await step('"Resume": running again', async () => {
    await w.click('push button', 'Resume');
    await resumed();
    await inhibited(true);
  });
});

test('the main window as docs/images/desktop.png', async () => {
  assert.ok(nodeId, 'the node joined');
  await step('the screenshot', async () => {
    await state('Running', 5000);
    const file = path.join(top, 'docs/images/desktop.png');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const e = await desktop.w.screenshot(file, 'frame', mainTitle);
    assert.ok(e.width > 100 && e.height > 100, `window extents ${JSON.stringify(e)}`);
    assert.equal(fs.readFileSync(file).subarray(1, 4).toString(), 'PNG');
  });
});

test('"Quit" finishes the chunks in hand and exits 0', async () => {
  assert.ok(nodeId, 'the node joined');
  const reclaimed = async () => (await metrics(srv))['simfarm_claims_reclaimed_total{why="node_gone"}'] ?? 0;
  const reclaimedBefore = await reclaimed();
  const d = desktop;
  const seen = new Set();
  await step('"Quit"', async () => {
    await state('Running', 5000);
    await d.w.click('push button', 'Quit');
  });
  await step('"Stopping: finishing the chunks in hand", then exit status 0', async () => {
    // The label while it drains (it may drain faster than a look).
    const watch = (async () => {
      while (d.child.exitCode === null && d.child.signalCode === null) {
        const t = await d.w.text('label', 'State', 200).catch(() => null);
        if (t) seen.add(t);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const timer = setTimeout(() => d.child.kill('SIGKILL'), 120000);
    const e = await d.exited;
    clearTimeout(timer);
    await watch;
    assert.deepEqual(e, { code: 0, signal: null }, `exit after Quit (states seen: ${[...seen].join(' | ')})`);
    assert.ok(![...seen].some((x) => x !== 'Running' && x !== 'Stopping: finishing the chunks in hand'),
      `states while quitting: ${[...seen].join(' | ')}`);
  });
  desktop = null;
  await step('no chunk of its taken back as the node\'s loss', async () => {
    assert.equal(await reclaimed(), reclaimedBefore);
    await eventually(async () => (await call(srv, 'GET', `/api/nodes/${nodeId}`)).json.online === false,
      'the node offline', 20000);
  });
});

test('its settings survive a restart; with "Pause on battery" off it runs on battery', async () => {
  assert.ok(nodeId, 'the node joined');
  desktop = await step('starting it again', () => launch());
  const { w } = desktop;
  await step('the main window at once, the same node', async () => {
    await w.window(mainTitle, 15000);
    await w.untilText('label', 'Node', new RegExp(`^Node ${nodeId}\\b`), 15000);
  });
  await step('the settings as they were set', async () => {
    assert.equal(await w.value('spin button', 'Cores while in use'), 0);
    assert.equal(await w.value('spin button', 'Cores while idle'), cpus);
    assert.equal(await w.value('spin button', 'Idle after (minutes)'), 3);
    assert.equal(await w.checked('check box', 'Use the GPU'), false);
    assert.equal(await w.checked('check box', 'Pause on battery'), true);
  });
  await step('idle: running', async () => {
    await s.setIdle(10 * 60000);
    await state('Running', 30000);
  });
  await step('"Pause on battery" off: on battery it keeps running', async () => {
    await w.check('check box', 'Pause on battery', false);
    await eventually(() => setting('pause_on_battery') === 'false', 'pause_on_battery=false in desktop.ini', 5000);
    await s.setBattery(true);
    // Given the second a change takes, it still runs after it.
    const end = Date.now() + SECOND;
    while (Date.now() < end) {
      assert.equal(await w.text('label', 'State'), 'Running');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await s.setBattery(false);
  });
  await step('"Start at login" writes and removes the autostart entry', async () => {
    const entry = path.join(s.env.XDG_CONFIG_HOME, 'autostart/simfarm-desktop.desktop');
    await w.check('check box', 'Start at login', true);
    // the program that runs, by its path (a build tree's is not on PATH)
    const exec = `Exec=${fs.realpathSync(app)} --hidden`;
    await eventually(() => fs.existsSync(entry) && fs.readFileSync(entry, 'utf8').split('\n').includes(exec),
      `${entry} with ${exec}`, SECOND);
    await w.check('check box', 'Start at login', false);
    await eventually(() => !fs.existsSync(entry), `${entry} removed`, SECOND);
  });
  await step('"Quit" again', async () => {
    await w.click('push button', 'Quit');
    const timer = setTimeout(() => desktop.child.kill('SIGKILL'), 120000);
    const e = await desktop.exited;
    clearTimeout(timer);
    assert.deepEqual(e, { code: 0, signal: null });
    desktop = null;
  });
});

test('a simfarm://join link with no settings joins at once', async () => {
  const t = await call(srv, 'POST', '/api/tokens', { kind: 'claim', owner: 'bob', tier: 'community', expires_in: 600 });
  assert.equal(t.status, 201, t.text);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-desktop-link-'));
  try {
    const link = `simfarm://join?server=${encodeURIComponent(srv.url)}&token=${encodeURIComponent(t.json.token)}`;
    desktop = await step('starting it with a link', () => launch([link],
      { XDG_CONFIG_HOME: path.join(home, 'config'), XDG_DATA_HOME: path.join(home, 'data') }));
    await step('no first-run form: the main window, a node of bob\'s', async () => {
      await desktop.w.window(mainTitle, 15000);
      assert.ok(!(await desktop.w.titles()).includes(joinTitle), 'no first-run form');
      await desktop.w.untilText('label', 'Node', /^Node \d+ · owner bob · tier community$/, 15000);
    });
    await step('"Quit"', async () => {
      await desktop.w.click('push button', 'Quit');
      const timer = setTimeout(() => desktop.child.kill('SIGKILL'), 120000);
      assert.deepEqual(await desktop.exited, { code: 0, signal: null });
      clearTimeout(timer);
      desktop = null;
    });
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
});
