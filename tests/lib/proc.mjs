// Helpers for tests that run real programs: the build directory, the
// environment emscripten output needs under node 20, and running a program
// to completion under a deadline.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const top = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const build = path.resolve(top, process.env.BUILD ?? 'build');

// emscripten 3.1.6 output misdetects node 20's fetch as a browser's.
export const wasmEnv = {
  ...process.env,
  NODE_PATH: '/usr/share/nodejs',
  NODE_OPTIONS: '--no-experimental-fetch',
};

// Runs file with args; resolves to { code, stdout, stderr } once it exits,
// rejects if it is still running after timeoutMs (it is then killed).
export function run(file, args = [], { env = process.env, timeoutMs = 30000, cwd = top } = {}) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { env, cwd, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (err && err.killed) {
          reject(new Error(`${file} ${args.join(' ')}: still running after ${timeoutMs} ms`));
          return;
        }
        resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
      });
  });
}

// Parses "key value" lines into a Map.
export function transcript(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    const i = line.indexOf(' ');
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}

// Resolves to check()'s first truthy value, asking every everyMs; rejects
// when none came within timeoutMs (what names the awaited condition).
export async function eventually(check, what, timeoutMs = 120000, everyMs = 50) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

// Stops a spawned process kept as { child, exited } (exited: a promise of
// its exit): SIGTERM, then SIGKILL after 20 s. Resolves with what exited gives.
export async function stop(p) {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.exited;
  p.child.kill('SIGTERM');
  const t = setTimeout(() => p.child.kill('SIGKILL'), 20000);
  const e = await p.exited;
  clearTimeout(t);
  return e;
}
