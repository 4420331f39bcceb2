// The coordinator's cost of idle connections: PostgreSQL and `simfarm
// serve` on this machine, 2,000 TCP connections opened to it from ten
// loopback addresses (200 each, under the per-address cap) and held idle.
//
//   coord_idle_rss_mb         the coordinator's resident memory with them
//   coord_idle_rss_per_conn_kb  what each added to it, from before
//   coord_idle_cpu_pct        its CPU over IDLE_S seconds with them held
//   coord_idle_conns          how many it held at the end of that window
//                             (libwebsockets closes a connection that sends
//                             nothing within its timeout)
//
// Prints BENCH lines; progress goes to stderr.
import fs from 'node:fs';
import net from 'node:net';
import { metrics, serve } from '../lib/coord.mjs';
import { startPostgres } from '../lib/pg.mjs';

const CONNS = 2000, ADDRS = 10, IDLE_S = 5;

function bench(name, value, unit) {
  console.log(`BENCH ${name} ${Number(value.toPrecision(3))} ${unit}`);
}

const rssKb = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)[1]);
const cpuS = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};

const pg = await startPostgres();
const srv = await serve(pg.url);
const socks = [];
try {
  const rss0 = rssKb(srv.pid);
  const settled = [];
  for (let a = 1; a <= ADDRS; a++)
    for (let i = 0; i < CONNS / ADDRS; i++) {
      const s = net.connect({ host: '127.0.0.1', port: srv.port, localAddress: `127.0.0.${a}` });
      s.on('error', () => {});
      socks.push(s);
      settled.push(new Promise((resolve) => { s.once('connect', resolve); s.once('close', resolve); }));
    }
  await Promise.all(settled);
  const held0 = (await metrics(srv)).simfarm_connections;
  process.stderr.write(`# ${held0} connections held\n`);
  const rss = rssKb(srv.pid);
  const c0 = cpuS(srv.pid), t0 = Date.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000)); // the window measured
  const cpu = (cpuS(srv.pid) - c0) / ((Date.now() - t0) / 1000);
  const held = (await metrics(srv)).simfarm_connections;
  bench('coord_idle_rss_mb', rss / 1024, 'MB');
  bench('coord_idle_rss_per_conn_kb', (rss - rss0) / Math.max(held0, 1), 'kB');
  bench('coord_idle_cpu_pct', cpu * 100, '%');
  bench('coord_idle_conns', held, 'connections');
} finally {
  for (const s of socks) s.destroy();
  await srv.stop();
  await pg.stop();
}
