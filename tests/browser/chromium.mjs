// Debian's Chromium driven by playwright-core, and a static file server on
// 127.0.0.1 for pages under test. Both are closed by the caller.
import { chromium } from 'playwright-core';
import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';

const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.json': 'application/json',
};

// Starts Debian's Chromium headless; `extra` are more flags.
export function launch(extra = []) {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic', ...extra],
    timeout: 30000,
  });
}

// Serves files from roots ({ urlPrefix: directory }) plus fixed pages
// ({ '/path': text }, HTML unless the path ends in another known
// extension). Resolves to { url, close } once listening.
export async function serve(roots, pages = {}) {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (pages[url.pathname] !== undefined) {
      res.writeHead(200, { 'content-type': types[path.extname(url.pathname)] ?? types['.html'] });
      res.end(pages[url.pathname]);
      return;
    }
    for (const [prefix, dir] of Object.entries(roots)) {
      if (!url.pathname.startsWith(prefix)) continue;
      const file = path.join(dir, path.normalize(url.pathname.slice(prefix.length)));
      if (!file.startsWith(dir)) break;
      try {
        const body = await fs.readFile(file);
        res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' });
        res.end(body);
        return;
      } catch {
        break;
      }
    }
    res.writeHead(404).end('not found');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
