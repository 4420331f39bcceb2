// What the tests' reverse proxies share: a request sent on to a server on
// 127.0.0.1, and a WebSocket upgrade passed through as bytes.
import http from 'node:http';
import net from 'node:net';

// Sends req on to port as path (default: its own), the answer back to res.
export function forward(port, req, res, path = req.url) {
  const up = http.request({ host: '127.0.0.1', port, method: req.method, path, headers: req.headers }, (ans) => {
    res.writeHead(ans.statusCode, ans.headers);
    ans.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
}

// Passes an upgrade (a server's 'upgrade' event) through to port: the
// request head, as path, then both directions piped. Both sockets are in
// tunnels while open, for a close that ends them.
export function tunnel(port, req, client, head, tunnels, path = req.url) {
  const up = net.connect(port, '127.0.0.1', () => {
    let text = `${req.method} ${path} HTTP/1.1\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    up.write(text + '\r\n');
    if (head.length) up.write(head);
    up.pipe(client);
    client.pipe(up);
  });
  tunnels.add(client);
  tunnels.add(up);
  const end = () => { up.destroy(); client.destroy(); tunnels.delete(up); tunnels.delete(client); };
  for (const s of [up, client]) { s.on('error', end); s.on('close', end); }
}
