// Database faults under a running coordinator, for the journal's reliability
// tests (tests/reliability/journal.test.mjs): a coordinator started on a
// port of the test's choosing and handed back at once (before its database
// is up, so a test can watch it wait), a transaction holding a table lock
// from a psql session of its own, the backends of a cluster listed and
// signalled, and a small tmpfs that can be filled to its last byte.
import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build } from './proc.mjs';
import { psql } from './pg.mjs';

const simfarm = path.join(build, 'bin/simfarm');

// A TCP port on 127.0.0.1 that was free a moment ago.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Starts `simfarm serve` on 127.0.0.1:port and returns at once. `listening`
// resolves once it says it listens (the token file is written by then),
// `up` once it says the database is up; both reject if it exits first.
// until(match, what, ms) waits for match() to hold (its stderr is
// stderr()). kill() sends SIGKILL and resolves once it has exited; stop()
// sends SIGTERM, then SIGKILL after 15 s.
export function launch(db, { port, tokenFile, extra = [], env } = {}) {
  const child = spawn(simfarm, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`, '--token-file', tokenFile,
    ...extra], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '', err = '';
  const waiters = new Set();
  const check = () => { for (const w of [...waiters]) if (w.match()) { waiters.delete(w); w.done(); } };
  child.stdout.on('data', (d) => { out += d; check(); });
  child.stderr.on('data', (d) => { err += d; check(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let gone = false;
  exited.then(() => { gone = true; });
  const until = (match, what, ms = 30000) => new Promise((resolve, reject) => {
    const w = { match };
    const timer = setTimeout(() => { waiters.delete(w); reject(new Error(`${what}: not seen in ${ms} ms; serve said:\n${err}`)); }, ms);
    w.done = () => { clearTimeout(timer); resolve(); };
    waiters.add(w);
    exited.then((e) => {
      if (!waiters.delete(w)) return;
      clearTimeout(timer);
      reject(new Error(`serve exited (${e.code ?? e.signal}) waiting for ${what}:\n${err}`));
    });
    check();
  });
  const c = {
    pid: child.pid,
    port,
    url: `http://127.0.0.1:${port}`,
    stdout: () => out,
    stderr: () => err,
    exited,
    get running() { return !gone; },
    until,
    listening: until(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 'listening', 60000),
    up: until(() => err.includes('simfarm: database up'), 'database up', 120000),
    async kill() {
      if (!gone) child.kill('SIGKILL');
      return exited;
    },
    async stop() {
      if (gone) return exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15000);
      const e = await exited;
      clearTimeout(t);
      return e;
    },
  };
  // Nobody need await these: a coordinator killed before it was up is no error here.
  c.listening.catch(() => {});
  c.up.catch(() => {});
  c.listening.then(() => { c.token = fs.readFileSync(tokenFile, 'utf8').trim(); }).catch(() => {});
  return c;
}

// GET path of a coordinator: { status, json, text }, or null when nothing
// answered (not listening yet, or killed).
export async function get(c, p, token) {
  try {
    const res = await fetch(c.url + p, { headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, json, text };
  } catch {
    return null;
  }
}

// Rows of a query as arrays of strings (psql's unaligned output).
export async function rows(pg, sql) {
  return (await psql(pg, sql)).split('\n').filter(Boolean).map((l) => l.split('|'));
}

// A psql session that takes `LOCK TABLE table IN mode MODE` in a
// transaction and holds it. Resolves, once the lock is held, to { pid (its
// backend), release() (COMMIT, then psql exits), kill() }.
export function holdLock(pg, table, mode) {
  const child = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', pg.host, '-p', String(pg.port),
    '-U', pg.user, '-d', 'postgres'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '', err = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`LOCK TABLE ${table} not held in 30 s: ${err}`)); }, 30000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^(\d+)\nlocked\n/);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        pid: Number(m[1]),
        async release() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.stdin.end('COMMIT;\n');
          const e = await exited;
          if (e.code !== 0) throw new Error(`the lock's psql ended with ${e.code ?? e.signal}: ${err}`);
        },
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await exited;
        },
      });
    });
    exited.then((e) => { clearTimeout(timer); reject(new Error(`psql exited (${e.code ?? e.signal}) before the lock: ${err}`)); });
    child.stdin.write(`SELECT pg_backend_pid();\nBEGIN;\nLOCK TABLE ${table} IN ${mode} MODE;\nSELECT 'locked';\n`);
  });
}

// The advisory locks of the coordinator (docs/coordinator.md, "One
// coordinator per database" and "Fencing"): the listener session holds
// LOCK_KEY alone, each pool session holds FENCE_KEY shared.
export const LOCK_KEY = 7216058;
export const FENCE_KEY = 7216059;

// The client sessions of a cluster other than the asking one:
// [{ pid, app, state, waitType, wait, query, fence }] (fence: it holds
// FENCE_KEY shared).
export async function sessions(pg) {
  const r = await rows(pg, `SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''),
    coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''),
    EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.classid = 0
      AND l.objid = ${FENCE_KEY} AND l.objsubid = 1 AND l.mode = 'ShareLock' AND l.granted),
    replace(replace(left(coalesce(a.query, ''), 120), '|', '/'), E'\\n', ' ')
    FROM pg_stat_activity a WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid() ORDER BY a.pid`);
  return r.map(([pid, app, state, waitType, wait, fence, ...q]) => ({ pid: Number(pid), app, state, waitType, wait,
    fence: fence === 't', query: q.join('|') }));
}

// Sends sig to each pid still there (one gone meanwhile is no error; one
// this process may not signal is).
export function signal(pids, sig) {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch (e) {
      if (e.code !== 'ESRCH') throw e;
    }
  }
}

function run(cmd, args) {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 30000 }, (e, stdout, stderr) => resolve({ ok: !e, out: `${stdout}${stderr}`.trim() || e?.message }));
  });
}

function ids(user) {
  const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${user}:`));
  if (!line) return null;
  const f = line.split(':');
  return [Number(f[2]), Number(f[3])];
}

// A tmpfs of sizeMb MiB owned by `owner` (the cluster's user) on a new
// directory. Resolves to { dir, fill(), unfill(), unmount() }, or to
// { skip: reason } when this machine does not let the test mount one (not
// root, or mount refused, as in a container without CAP_SYS_ADMIN).
// fill() writes a file until the filesystem refuses with ENOSPC and
// resolves to the bytes written; unfill() removes it.
export async function tmpfs(sizeMb, owner = 'postgres') {
  if (process.getuid() !== 0) return { skip: 'mounting a tmpfs needs root' };
  const who = ids(owner);
  if (!who) return { skip: `no ${owner} system user to own the tmpfs` };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-tmpfs-'));
  const m = await run('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,uid=${who[0]},gid=${who[1]},mode=0700`,
    'simfarm-test', dir]);
  if (!m.ok) {
    fs.rmSync(dir, { recursive: true, force: true });
    return { skip: `mount -t tmpfs refused: ${m.out}` };
  }
  const filler = path.join(dir, 'filler');
  let mounted = true;
  // A run that ends before unmount() (an exception past it, ^C) leaves no mount behind.
  const atExit = () => { try { execFileSync('umount', ['-l', dir]); fs.rmSync(dir, { recursive: true, force: true }); } catch { /* done */ } };
  process.once('exit', atExit);
  return {
    dir,
    fill() {
      const fd = fs.openSync(filler, 'a');
      const block = Buffer.alloc(1 << 16, 0x5a);
      let bytes = 0;
      try {
        for (;;) {
          try {
            bytes += fs.writeSync(fd, block);
          } catch (e) {
            if (e.code === 'ENOSPC') break;
            throw e;
          }
        }
        // The last block's worth, a byte at a time: not one byte left.
        for (;;) {
          try {
            bytes += fs.writeSync(fd, block, 0, 1);
          } catch (e) {
            if (e.code === 'ENOSPC') break;
            throw e;
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      return bytes;
    },
    unfill() {
      fs.rmSync(filler, { force: true });
    },
    // Unmounts (lazily if busy) and removes the directory; safe to call twice.
    async unmount() {
      if (!mounted) return;
      let u = await run('umount', [dir]);
      if (!u.ok) u = await run('umount', ['-l', dir]);
      if (!u.ok) throw new Error(`umount ${dir}: ${u.out}`);
      mounted = false;
      process.removeListener('exit', atExit);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
