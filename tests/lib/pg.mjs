// A throwaway PostgreSQL cluster for tests: initdb into a temporary
// directory, postgres listening only on a Unix socket inside it (no port to
// collide on), ready when the server says so on stderr, removed on stop.
//
// PostgreSQL refuses to run as root, so as root the cluster runs as the
// `postgres` system user; otherwise as the invoking user. setpriv (not
// runuser) execs in place, so the child's pid is the postmaster's own and
// signals reach it directly.
import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const pgBin = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const asRoot = process.getuid() === 0;

function asOwner(file, args) {
  return asRoot
    ? ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', file, ...args]]
    : [file, args];
}

function runToEnd(file, args, timeoutMs) {
  const [cmd, argv] = asOwner(file, args);
  return new Promise((resolve, reject) => {
    execFile(cmd, argv, { timeout: timeoutMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(file)} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

// Starts a cluster; resolves to { dir, host, port, user, url, pid, stop, restart,
// pause, resume }.
// `url` is a libpq connection string. Rejects if not ready within timeoutMs.
export async function startPostgres({ timeoutMs = 60000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-pg-'));
  if (asRoot) fs.chownSync(dir, ...ownerIds());
  const data = path.join(dir, 'data');
  await runToEnd(path.join(pgBin, 'initdb'),
    ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--locale=C'], timeoutMs);

  let server = await launch(data, dir, timeoutMs);
  const cleanup = () => { try { server.child.kill('SIGKILL'); } catch { /* gone */ } };
  process.once('exit', cleanup);
  const shutdown = async (stopMs) => {
    server.child.kill('SIGINT');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), stopMs);
    await server.exited;
    clearTimeout(timer);
  };

  return {
    dir,
    host: dir,
    port: 5432,
    user: 'postgres',
    url: `host=${dir} port=5432 user=postgres dbname=postgres`,
    get pid() { return server.child.pid; },
    // Fast shutdown (SIGINT), waits for the exit, then removes the directory.
    async stop({ timeoutMs: stopMs = 30000 } = {}) {
      process.removeListener('exit', cleanup);
      await shutdown(stopMs);
      fs.rmSync(dir, { recursive: true, force: true });
    },
    // A fast shutdown and a start on the same data: every connection drops.
    async restart({ timeoutMs: stopMs = 30000 } = {}) {
      await shutdown(stopMs);
      server = await launch(data, dir, timeoutMs);
    },
    // A fast shutdown that keeps the data: the database is away until
    // resume(). Between the two, pid is that of the exited server.
    async pause({ timeoutMs: stopMs = 30000 } = {}) {
      await shutdown(stopMs);
    },
    // Starts the server again on the paused data.
    async resume() {
      server = await launch(data, dir, timeoutMs);
    },
    // SIGSTOP to the server and every process it started: its sockets stay
    // open and nothing answers, as with a host that hangs. thaw() ends it.
    freeze() { signalAll(server.child.pid, 'SIGSTOP'); },
    thaw() { signalAll(server.child.pid, 'SIGCONT'); },
  };
}

// Sends signal to pid and its children (from /proc), the parent first.
function signalAll(pid, signal) {
  process.kill(pid, signal);
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let stat;
    try { stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8'); } catch { continue; } // gone meanwhile
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid !== pid) continue;
    try { process.kill(Number(e), signal); } catch { /* gone meanwhile */ }
  }
}

// Starts postgres on a data directory; resolves to { child, exited } once it
// accepts connections.
async function launch(data, dir, timeoutMs) {
  const [cmd, argv] = asOwner(path.join(pgBin, 'postgres'), [
    '-D', data, '-k', dir, '-c', 'listen_addresses=', '-c', 'fsync=off',
    '-c', 'logging_collector=off', '-c', 'log_min_messages=log',
  ]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`postgres not ready after ${timeoutMs} ms:\n${log}`));
    }, timeoutMs);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      if (log.includes('database system is ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`postgres exited (${code ?? signal}) before it was ready:\n${log}`));
    });
  });
  child.stderr.resume();
  return { child, exited: new Promise((resolve) => child.on('exit', resolve)) };
}

// Creates database `name` in the cluster; resolves to its libpq connection
// string. A coordinator holds its database alone (actors/coord/store.h,
// `exclusive`): a test that runs a second coordinator beside another gives
// it a database of its own.
export async function createDatabase(pg, name) {
  await psql(pg, `CREATE DATABASE ${name}`);
  return pg.url.replace('dbname=postgres', `dbname=${name}`);
}

// Runs SQL through psql against a cluster's database db; resolves to its stdout.
export function psql(pg, sql, { timeoutMs = 30000, db = 'postgres' } = {}) {
  return new Promise((resolve, reject) => {
    execFile('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', pg.host, '-p', String(pg.port),
      '-U', pg.user, '-d', db, '-c', sql], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`psql: ${stderr || err.message}`));
      else resolve(stdout.trim());
    });
  });
}

function ownerIds() {
  const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres system user: install the postgresql package (scripts/install-deps.sh)');
  const f = line.split(':');
  return [Number(f[2]), Number(f[3])];
}
