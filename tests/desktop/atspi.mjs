// Drives GTK programs in a desktop session (session.mjs) through their
// accessibility tree: tests/desktop/atspi.py, a long-lived Debian Python
// child speaking JSON lines, does the AT-SPI calls; this side waits for
// what a test expects under deadlines.
//
//   const ui = await driver(session);
//   const w = ui.app({ pid: child.pid });       // or { app: 'name' }
//   await w.click('push button', 'Pause');
//   await w.untilText('label', 'State', 'Paused by you', 1000);
//   await ui.close();
//
// A selector is { app, pid } (the application) with a role (AT-SPI's role
// name: 'push button', 'label', 'spin button', 'check box', 'text', 'frame')
// and an accessible name. Every wait fails with what it waited for, the
// driver's last answer and the application's tree.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { python } from './session.mjs';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'atspi.py');

// Starts the driver in session s; resolves once it answers.
export async function driver(s, { timeoutMs = 20000 } = {}) {
  const child = spawn(python, [script], { env: s.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = '', err = '', nextId = 1;
  const pending = new Map();
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`the AT-SPI driver exited (${code ?? signal}): ${err}`));
    pending.clear();
    resolve({ code, signal });
  }));
  child.stderr.on('data', (d) => { err = (err + d).slice(-8000); });
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const m = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      const p = pending.get(m.id);
      if (!p) continue;
      pending.delete(m.id);
      clearTimeout(p.timer);
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(m.error));
    }
  });

  // One request; resolves to its result, rejects with the driver's error
  // (or when no answer came within timeoutMs).
  const request = (op, fields = {}) => new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      reject(new Error(`the AT-SPI driver has exited: ${err}`));
      return;
    }
    const id = nextId++;
    const timer = setTimeout(() => { pending.delete(id); reject(new Error(`AT-SPI ${op}: no answer within ${timeoutMs} ms`)); }, timeoutMs);
    pending.set(id, { resolve, reject, timer });
    child.stdin.write(JSON.stringify({ id, op, ...fields }) + '\n');
  });

  // Retries request(op) until it succeeds and ok(result) holds, every
  // everyMs, up to ms; fails saying what and the last answer.
  const until = async (what, op, fields, ms, ok = () => true, everyMs = 50) => {
    const end = Date.now() + ms;
    let last;
    for (;;) {
      try {
        const r = await request(op, fields);
        if (ok(r)) return r;
        last = `last answer: ${JSON.stringify(r)}`;
      } catch (e) {
        last = `last error: ${e.message}`;
      }
      if (Date.now() > end) {
        let tree = '';
        if (fields.app !== undefined || fields.pid !== undefined) {
          tree = await request('tree', { app: fields.app, pid: fields.pid }).then((t) => `\ntree:\n${t}`, () => '');
        }
        throw new Error(`${what}: not within ${ms} ms (${last})${tree}`);
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  };

  await until('the AT-SPI driver answering', 'apps', {}, timeoutMs);

  const matchText = (want) => (typeof want === 'function' ? want
    : want instanceof RegExp ? (t) => want.test(t) : (t) => t === want);

  const ui = {
    request,
    // [{ name, pid }] of the applications registered with AT-SPI.
    apps: () => request('apps'),
    // The application a program started (by pid, name or both), once it
    // has registered; resolves to its bound helpers.
    async waitApp(app, ms = 20000) {
      await until(`application ${JSON.stringify(app)} on the accessibility bus`, 'find', app, ms);
      return ui.app(app);
    },
    // Helpers bound to one application ({ app } or { pid }); each waits up
    // to ms (default 10 s) for its widget.
    app(app) {
      const sel = (role, name, more) => ({ ...app, role, name, ...more });
      const label = (role, name) => `${role} ${JSON.stringify(name)}`;
      return {
        // {role, name, states, text?, value?} of the widget.
        find: (role, name, ms = 10000, more = {}) => until(`${label(role, name)} shown`, 'find', sel(role, name, more), ms),
        // Every widget of the role (and name, when given).
        all: (role, name) => request('all', sel(role, name)),
        // Its text now (a label's or entry's; its name if it has no text).
        text: (role, name, ms = 10000) => until(`the text of ${label(role, name)}`, 'text', sel(role, name), ms),
        // Waits until its text is want (a string), matches want (a RegExp)
        // or want(text) holds; resolves to the text.
        untilText: (role, name, want, ms = 10000) =>
          until(`${label(role, name)} saying ${want instanceof RegExp || typeof want === 'string' ? want : 'what was awaited'}`,
            'text', sel(role, name), ms, matchText(want), 20),
        click: (role, name, ms = 10000, action = 'click') =>
          until(`${action} on ${label(role, name)}`, 'click', sel(role, name, { action }), ms),
        checked: (role, name, ms = 10000) => until(`${label(role, name)} state`, 'checked', sel(role, name), ms),
        // Clicks a check box until it is on (true) or off (false).
        check: (role, name, on, ms = 10000) =>
          until(`${label(role, name)} ${on ? 'checked' : 'unchecked'}`, 'check', sel(role, name, { on }), ms),
        value: (role, name, ms = 10000) => until(`the value of ${label(role, name)}`, 'value', sel(role, name), ms),
        setValue: (role, name, value, ms = 10000) =>
          until(`${label(role, name)} set to ${value}`, 'setValue', sel(role, name, { value }), ms),
        setText: (role, name, text, ms = 10000) =>
          until(`${label(role, name)} set to ${JSON.stringify(text)}`, 'setText', sel(role, name, { text }), ms),
        // The titles of its windows (frames and dialogs) now.
        async titles() {
          const frames = [...await request('all', sel('frame')), ...await request('all', sel('dialog'))];
          return frames.map((f) => f.name);
        },
        // Waits for a window titled title; resolves to its description.
        window: (title, ms = 10000) => until(`a window titled ${JSON.stringify(title)}`, 'find', sel('frame', title), ms),
        extents: (role, name, ms = 10000) => until(`the extents of ${label(role, name)}`, 'extents', sel(role, name), ms),
        tree: () => request('tree', app),
        // A PNG of the widget (a window: role 'frame', its title) at file.
        screenshot: (file, role, name, ms = 10000) =>
          until(`a screenshot of ${label(role, name)}`, 'screenshot', sel(role, name, { path: file }), ms),
      };
    },
    // A PNG of the whole screen at file.
    screenshot: (file) => request('screenshot', { path: file }),
    async close() {
      child.stdin.end();
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
  return ui;
}
