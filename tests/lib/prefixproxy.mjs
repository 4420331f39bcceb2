// A reverse proxy on 127.0.0.1 that serves a coordinator under a path prefix,
// as an operator's nginx with `location /farm/ { proxy_pass http://coord/; }`
// does: a request for /farm/x goes to the coordinator as /x, WebSocket
// upgrades included, with the client's Host header kept. Anything outside the
// prefix gets a 404 and is listed in stray, so a page that reaches past its
// prefix shows there.
import http from 'node:http';
import { forward, tunnel } from './forward.mjs';

export async function prefixProxy(targetPort, prefix) {
  const stray = [], upgrades = [], tunnels = new Set();
  const inside = (url) => url.startsWith(prefix + '/');
  const strip = (url) => url.slice(prefix.length);

  const server = http.createServer((req, res) => {
    if (!inside(req.url)) {
      stray.push(req.url);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('outside the prefix\n');
      return;
    }
    forward(targetPort, req, res, strip(req.url));
  });

  // An upgrade goes through as bytes: the request head with its path
  // stripped, then both directions piped.
  server.on('upgrade', (req, client, head) => {
    if (!inside(req.url)) {
      stray.push(req.url);
      client.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    upgrades.push(req.url);
    tunnel(targetPort, req, client, head, tunnels, strip(req.url));
  });

  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}${prefix}`,
    stray,
    upgrades,
    close: () => new Promise((resolve) => {
      for (const s of tunnels) s.destroy();
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}
