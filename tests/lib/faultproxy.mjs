// A TCP proxy on 127.0.0.1 that injects network faults between nodes and a
// coordinator (or a coordinator and its database): drop() cuts every
// connection through it at once, delay(ms) holds each chunk of bytes that
// long in both directions, pause()/resume() refuse new connections for a
// while (an outage), and cutAnswer(bytes) cuts the next connection whose
// server sends those bytes, before they reach the client. The target (a
// port on 127.0.0.1, or a Unix socket's path) may change (a restarted
// coordinator), with retarget().
import net from 'node:net';

export function faultProxy(targetPort) {
  let target = targetPort, delayMs = 0, refusing = false, cutOn = null;
  const pairs = new Set();
  const stats = { connections: 0, dropped: 0, refused: 0, cut: 0 };

  // Forwards a → b, each chunk after the current delay, in order.
  const pipe = (a, b, pair, answers) => {
    let chain = Promise.resolve();
    a.on('data', (chunk) => {
      if (answers && cutOn !== null && chunk.includes(cutOn)) {
        cutOn = null;
        stats.cut++;
        pairs.delete(pair);
        a.destroy();
        b.destroy();
        return;
      }
      if (delayMs === 0) { b.write(chunk); return; }
      a.pause();
      const wait = delayMs;
      chain = chain.then(() => new Promise((resolve) => setTimeout(resolve, wait))).then(() => {
        if (!b.destroyed) b.write(chunk);
        a.resume();
      });
    });
  };

  const server = net.createServer((client) => {
    if (refusing) { stats.refused++; client.destroy(); return; }
    stats.connections++;
    const upstream = typeof target === 'string' ? net.connect(target) : net.connect(target, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    const close = () => { pairs.delete(pair); client.destroy(); upstream.destroy(); };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    pipe(client, upstream, pair, false);
    pipe(upstream, client, pair, true);
  });

  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    port: server.address().port,
    stats,
    drop() {
      for (const p of pairs) { p.client.destroy(); p.upstream.destroy(); stats.dropped++; }
      pairs.clear();
    },
    delay(ms) { delayMs = ms; },
    cutAnswer(bytes) { cutOn = Buffer.from(bytes); },
    pause() { refusing = true; },
    resume() { refusing = false; },
    retarget(port) { target = port; },
    close() {
      this.drop();
      return new Promise((done) => server.close(() => done()));
    },
  })));
}
