// A private desktop session for one test file: an X server (Xvfb) on a
// display of its own, a session bus and a system bus of its own, the AT-SPI
// bus (so GTK 3 programs export their accessibility tree, which
// tests/desktop/atspi.mjs reads), and python-dbusmock servers standing in
// for UPower and logind on the system bus and, when asked, GNOME's idle
// monitor and a tray (StatusNotifierWatcher) on the session bus.
//
//   const s = await startSession({ mutter: true, tray: true });
//   spawn(app, args, { env: s.env });
//   await s.setBattery(true); await s.setIdle(600000); await s.inhibitors();
//   await s.stop();
//
// Nothing waits by sleeping: each piece is ready when it says so (Xvfb
// writes its display number on -displayfd once it accepts connections,
// dbus-daemon prints its address once it listens, `gdbus wait` returns once
// a name has its owner), each under a deadline. Every process runs in a
// process group of its own, and stop() ends the groups (so what they
// started, the AT-SPI bus's daemon and registry, goes too).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../lib/proc.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
// Debian's Python: the one with python-dbusmock and the GObject bindings
// (a python3 earlier on PATH, pyenv's, has neither).
export const python = '/usr/bin/python3';
export const mocks = path.join(here, 'mocks');
const busLauncher = '/usr/libexec/at-spi-bus-launcher';

// What a session needs on this machine; null when all is there, else why not.
export function missing() {
  for (const f of ['/usr/bin/Xvfb', '/usr/bin/dbus-daemon', '/usr/bin/gdbus', busLauncher, python]) {
    if (!fs.existsSync(f)) return `${f} missing: run scripts/install-deps.sh`;
  }
  if (!fs.existsSync('/usr/lib/python3/dist-packages/dbusmock')) return 'python3-dbusmock missing: run scripts/install-deps.sh';
  return null;
}

// A bus configuration that lets everyone own and call everything, and
// activates nothing (no service directories): the bus has only what the
// session starts on it.
function busConfig(type, dir) {
  const file = path.join(dir, `${type}.conf`);
  fs.writeFileSync(file, `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>${type}</type>
  <keep_umask/>
  <listen>unix:dir=${dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <allow user="*"/>
  </policy>
</busconfig>
`);
  return file;
}

// Starts the session; resolves to the object described at the end. Options:
// mutter: also mock org.gnome.Mutter.IdleMonitor (else the idle time comes
// from logind alone); tray: also mock a StatusNotifierWatcher; onBattery:
// UPower's OnBattery at the start; timeoutMs: the deadline of each step.
export async function startSession({ mutter = false, tray = false, onBattery = false, timeoutMs = 20000 } = {}) {
  const t0 = Date.now();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-desktop-'));
  const runtime = path.join(dir, 'runtime');
  fs.mkdirSync(runtime, { mode: 0o700 });
  const procs = []; // { name, child, exited, log }
  const logs = () => procs.map((p) => `--- ${p.name}:\n${p.log.slice(-2000)}`).join('\n');

  const env = { ...process.env };
  for (const k of ['NO_AT_BRIDGE', 'AT_SPI_BUS_ADDRESS', 'WAYLAND_DISPLAY', 'XAUTHORITY', 'DESKTOP_SESSION',
    'XDG_CURRENT_DESKTOP', 'DBUS_STARTER_ADDRESS', 'DBUS_STARTER_BUS_TYPE', 'GTK_MODULES']) delete env[k];
  Object.assign(env, {
    XDG_RUNTIME_DIR: runtime,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_CACHE_HOME: path.join(dir, 'cache'),
    XDG_SESSION_ID: 'c1',
    XDG_SESSION_TYPE: 'x11',
    GDK_BACKEND: 'x11',
    // No dconf or gvfs on these buses: GSettings in memory, GIO on local files.
    GSETTINGS_BACKEND: 'memory',
    GIO_USE_VFS: 'local',
    LANG: process.env.LANG || 'C.UTF-8',
  });

  const start = (name, file, args, { stdio = ['ignore', 'pipe', 'pipe'] } = {}) => {
    const child = spawn(file, args, { env, stdio, detached: true });
    const p = { name, child, log: '' };
    p.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    child.on('error', (e) => { p.log += `spawn: ${e.message}\n`; });
    for (const s of [child.stdout, child.stderr]) s?.on('data', (d) => { p.log += d; if (p.log.length > 1 << 20) p.log = p.log.slice(-(1 << 19)); });
    procs.push(p);
    return p;
  };
  // Resolves to the first line p writes on stream (or its stdout).
  const firstLine = (p, what, stream = p.child.stdout) => new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${what}: nothing within ${timeoutMs} ms\n${logs()}`)), timeoutMs);
    stream.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) { clearTimeout(timer); resolve(buf.slice(0, nl).trim()); }
    });
    p.exited.then((e) => { clearTimeout(timer); reject(new Error(`${what}: ${p.name} exited (${e.code ?? e.signal})\n${logs()}`)); });
  });

  const killAll = (signal) => {
    for (const p of procs) {
      if (p.child.exitCode !== null || p.child.signalCode !== null || !p.child.pid) continue;
      try { process.kill(-p.child.pid, signal); } catch { /* gone */ }
    }
  };
  const onExit = () => killAll('SIGKILL');
  process.once('exit', onExit);

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', onExit);
    // The mocks and the AT-SPI pieces first, the buses, then the X server.
    for (const p of [...procs].reverse()) {
      if (p.child.exitCode === null && p.child.signalCode === null && p.child.pid) {
        // the leader alone first, so that it ends and reaps what it started
        try { process.kill(p.child.pid, 'SIGTERM'); } catch { /* gone */ }
        const timer = setTimeout(() => { try { process.kill(-p.child.pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
        await p.exited;
        clearTimeout(timer);
      }
      // what it started in its group and left behind
      try { process.kill(-p.child.pid, 'SIGKILL'); } catch { /* none */ }
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  // gdbus with the session's environment; resolves to its stdout.
  const gdbus = async (args, what) => {
    const r = await run('/usr/bin/gdbus', args, { env, timeoutMs });
    if (r.code !== 0) throw new Error(`${what ?? 'gdbus ' + args.join(' ')}: ${r.stderr.trim()}`);
    return r.stdout.trim();
  };
  const busArg = (bus) => (bus === 'system' ? '--system' : '--session');
  const waitName = (bus, name) =>
    gdbus(['wait', busArg(bus), '--timeout', String(Math.ceil(timeoutMs / 1000)), name], `${name} on the ${bus} bus`);
  // Calls method (interface.name) on dest's object p; args in GVariant text.
  const callBus = (bus, dest, p, method, ...args) =>
    gdbus(['call', busArg(bus), '--dest', dest, '--object-path', p, '--method', method, ...args]);

  try {
    // The X server: -displayfd picks a free display and writes its number
    // once it accepts connections.
    const x = start('Xvfb', '/usr/bin/Xvfb', ['-displayfd', '3', '-screen', '0', '1280x800x24', '-nolisten', 'tcp'],
      { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const display = await firstLine(x, 'Xvfb display number', x.child.stdio[3]);
    env.DISPLAY = `:${display}`;

    const session = start('session bus', '/usr/bin/dbus-daemon',
      ['--config-file', busConfig('session', dir), '--nofork', '--print-address=1']);
    const system = start('system bus', '/usr/bin/dbus-daemon',
      ['--config-file', busConfig('system', dir), '--nofork', '--print-address=1']);
    // both listened to at once: a line written before its listener is there is gone
    [env.DBUS_SESSION_BUS_ADDRESS, env.DBUS_SYSTEM_BUS_ADDRESS] = await Promise.all([
      firstLine(session, 'session bus address'), firstLine(system, 'system bus address')]);

    // The accessibility bus, with its registry (activated on that bus).
    start('at-spi-bus-launcher', busLauncher, ['--launch-immediately']);
    const mock = (name, args) => start(name, python, ['-m', 'dbusmock', ...args]);
    mock('upower', ['--system', '--template', 'upower', '--parameters', JSON.stringify({ OnBattery: onBattery })]);
    mock('logind', ['--system', '--template', 'logind']);
    if (mutter) mock('idle monitor', ['--session', '--template', path.join(mocks, 'idlemonitor.py')]);
    if (tray) mock('tray', ['--session', '--template', path.join(mocks, 'sniwatcher.py')]);

    await Promise.all([
      waitName('session', 'org.a11y.Bus'),
      waitName('system', 'org.freedesktop.UPower'),
      waitName('system', 'org.freedesktop.login1'),
      mutter && waitName('session', 'org.gnome.Mutter.IdleMonitor'),
      tray && waitName('session', 'org.kde.StatusNotifierWatcher'),
    ]);
    // The a11y bus's address (the launcher starts its daemon before it
    // answers), and the registry on it, which GTK registers with.
    const a11y = (await callBus('session', 'org.a11y.Bus', '/org/a11y/bus', 'org.a11y.Bus.GetAddress')).match(/'([^']*)'/)[1];
    await gdbus(['wait', '--address', a11y, '--activate', 'org.a11y.atspi.Registry', '--timeout',
      String(Math.ceil(timeoutMs / 1000)), 'org.a11y.atspi.Registry'], 'the AT-SPI registry');
    // logind: this user's session c1 (XDG_SESSION_ID), active on seat0, and
    // GetSessionByPID answering it for any process.
    const uid = process.getuid();
    await callBus('system', 'org.freedesktop.login1', '/org/freedesktop/login1', 'org.freedesktop.DBus.Mock.AddSession',
      'c1', 'seat0', String(uid), os.userInfo().username, 'true');
    await callBus('system', 'org.freedesktop.login1', '/org/freedesktop/login1', 'org.freedesktop.DBus.Mock.AddMethod',
      'org.freedesktop.login1.Manager', 'GetSessionByPID', 'u', 'o', 'ret = "/org/freedesktop/login1/session/c1"');
  } catch (e) {
    await stop();
    throw e;
  }

  const sessionPath = '/org/freedesktop/login1/session/c1';
  const s = {
    env,
    dir,
    display: env.DISPLAY,
    startMs: Date.now() - t0,
    // The combined output of the session's processes (for failure messages).
    logs,
    // UPower's OnBattery, with its PropertiesChanged.
    async setBattery(onBattery) {
      await callBus('system', 'org.freedesktop.UPower', '/org/freedesktop/UPower', 'org.freedesktop.DBus.Mock.UpdateProperties',
        'org.freedesktop.UPower', `{'OnBattery': <${onBattery ? 'true' : 'false'}>}`);
    },
    // No input for the last ms milliseconds (0: in use now), from this call
    // on growing as time passes: the idle monitor's GetIdletime (when
    // mocked), and logind's IdleHint and IdleSinceHintMonotonic (µs of
    // CLOCK_MONOTONIC) for session c1, with PropertiesChanged.
    async setIdle(ms) {
      const nowUs = process.hrtime.bigint() / 1000n; // CLOCK_MONOTONIC
      const since = nowUs - BigInt(Math.round(ms * 1000));
      await Promise.all([
        mutter && callBus('session', 'org.gnome.Mutter.IdleMonitor', '/org/gnome/Mutter/IdleMonitor/Core',
          'org.freedesktop.DBus.Mock.SetIdletime', String(Math.round(ms))),
        callBus('system', 'org.freedesktop.login1', sessionPath, 'org.freedesktop.DBus.Mock.UpdateProperties',
          'org.freedesktop.login1.Session',
          `{'IdleHint': <${ms > 0 ? 'true' : 'false'}>, 'IdleSinceHintMonotonic': <uint64 ${since > 0n ? since : 0n}>}`),
      ]);
    },
    // logind's inhibitors: [{ what, who, why, mode, uid, pid }].
    async inhibitors() {
      const out = await callBus('system', 'org.freedesktop.login1', '/org/freedesktop/login1',
        'org.freedesktop.login1.Manager.ListInhibitors');
      return [...out.matchAll(/\('([^']*)', '([^']*)', '([^']*)', '([^']*)', uint32 (\d+), uint32 (\d+)\)/g)]
        .map(([, what, who, why, mode, u, pid]) => ({ what, who, why, mode, uid: Number(u), pid: Number(pid) }));
    },
    // The tray's registered StatusNotifierItems ("<bus name><path>"); only with tray.
    async sniItems() {
      const out = await callBus('session', 'org.kde.StatusNotifierWatcher', '/StatusNotifierWatcher',
        'org.freedesktop.DBus.Properties.Get', 'org.kde.StatusNotifierWatcher', 'RegisteredStatusNotifierItems');
      return [...out.matchAll(/'([^']*)'/g)].map((m) => m[1]);
    },
    // A method call on either bus: (bus 'session'|'system', dest, path,
    // 'interface.method', ...GVariant text args); resolves to gdbus's text.
    call: callBus,
    stop,
  };
  return s;
}
