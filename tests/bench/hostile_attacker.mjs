// The attacking side of bench_hostile.mjs, in a process of its own so the
// benchmark can give it cores of its own (as an attacker on another
// machine has) or let it share the honest nodes' cores. Run as
// `node hostile_attacker.mjs PORT` with an IPC channel: it sends 'ready',
// attacks the coordinator on 127.0.0.1:PORT round after round until it is
// sent 'stop', then sends { frames, rounds, refused, failed, seconds } and
// exits.
//
// Each round makes every attack of the hostile-node run once: garbage
// before hello, a frame past 4 MiB, completions with forged signatures,
// stolen tokens and replays, and a heartbeat flood cut off by the rate limit.
// HOSTILE_ATTACKS=garbage,oversize,completions,flood picks some of them.
//
// HOSTILE_SOURCES=one (the default) makes every connection from 127.0.0.1,
// the honest nodes' address: an offender on one host, which the
// coordinator's address penalties hold and refuse. HOSTILE_SOURCES=many
// makes each from an address of its own in 127.0.0.0/8, as from a botnet:
// no address offends twice, so what the attacks cost is what each frame
// costs. A connection the coordinator refuses ends its attack for the round
// (counted in refused); the attacker goes on to the next.
import crypto from 'node:crypto';
import { E, ScriptedNode, clientFrame, envelope, nodeKey, sealBody } from '../lib/nodeproto.mjs';

const port = Number(process.argv[2]);
const ATTACKS = ['garbage', 'oversize', 'completions', 'flood'];
const attacks = new Set((process.env.HOSTILE_ATTACKS ?? ATTACKS.join(',')).split(','));
for (const a of attacks) if (!ATTACKS.includes(a)) throw new Error(`HOSTILE_ATTACKS: "${a}" is not one of ${ATTACKS.join(', ')}`);
const sources = process.env.HOSTILE_SOURCES ?? 'one';
if (sources !== 'one' && sources !== 'many') throw new Error(`HOSTILE_SOURCES: "${sources}" is not one or many`);

// The frames that need no session of their own are built once and sent as
// they are, as an attacker elsewhere would: what the attacking process
// spends is then the sending itself.
const garbage = clientFrame(crypto.randomBytes(64));
const oversize = clientFrame(Buffer.alloc(4 * 1024 * 1024 + 1, 0x90));
const FLOOD = 2000;
const flood = Buffer.concat(Array(FLOOD).fill(clientFrame(envelope('heartbeat', 2, { cpu: 0, mem_used: 0, mem_total: 1 }))));
const batch = { job: 1, ctxHash: Buffer.alloc(32), results: [{ chunk: 1, token: crypto.randomBytes(16), start: 0,
  count: 1000, data: crypto.randomBytes(200) }] };

// 127.1.0.1, 127.1.0.2, ...: a new address for each connection (many).
let lastHost = 0;
const nextFrom = () => {
  lastHost = (lastHost + 1) % (254 * 256 * 256);
  const h = lastHost;
  return `127.${1 + Math.floor(h / 65536)}.${Math.floor(h / 256) % 256}.${h % 256}`;
};

class Refused extends Error {}

// A session, enrolled when hello is true; a connection or hello the
// coordinator refuses throws Refused.
async function open({ hello = false } = {}) {
  const n = await ScriptedNode.connect(port, { from: sources === 'many' ? nextFrom() : undefined })
    .catch((e) => { throw new Refused(e.message); });
  if (hello) {
    try {
      await n.hello();
    } catch (e) {
      n.link.close();
      if (n.msgs.some((m) => m.type === 'error' && m.body.code === E.ERATELIMITED)) throw new Refused(e.message);
      throw e;
    }
  }
  return n;
}

// Waits for the coordinator to close n, at most 5 s.
function closeOrTimeout(n) {
  let t;
  return Promise.race([n.closed, new Promise((resolve) => { t = setTimeout(resolve, 5000); })]).finally(() => clearTimeout(t));
}

let frames = 0; // sent, by all attacks

async function attackGarbage() {
  const g = await open();
  g.link.raw(garbage);
  frames++;
  await closeOrTimeout(g);
}

async function attackOversize() {
  const big = await open({ hello: true });
  big.link.raw(oversize);
  frames += 2;
  await closeOrTimeout(big);
}

// Forged, stolen and replayed completions, 20 of each; a session cut off
// for too many bad frames (ERATELIMITED) is replaced by a new one under a
// new key (a new enrolment). The forged frame (signed by a key that is not
// the session's) is signed once.
async function attackCompletions() {
  const forged = clientFrame(envelope('complete', 1000, sealBody(nodeKey(), `127.0.0.1:${port}`, batch)));
  for (let i = 0; i < 20;) {
    const t = await open({ hello: true });
    frames++;
    try {
      for (; i < 20; i++) {
        t.link.raw(forged);
        const stolen = t.complete(batch);
        frames += 2;
        await t.until((m) => m.id === stolen.id && m.type === 'complete_ack', 'complete_ack');
        t.link.send(stolen.frame);
        frames++;
      }
      await t.error(undefined, 'replay');
      await t.close();
    } catch (e) {
      if (!t.msgs.some((m) => m.type === 'error' && m.body.code === E.ERATELIMITED)) throw e;
      i++;
    }
  }
}

async function attackFlood() {
  const f = await open({ hello: true });
  f.link.raw(flood);
  frames += FLOOD + 1;
  await closeOrTimeout(f);
}

const rounds = [['garbage', attackGarbage], ['oversize', attackOversize], ['completions', attackCompletions],
  ['flood', attackFlood]].filter(([name]) => attacks.has(name));

let attacking = true, nrounds = 0, refused = 0, failed = 0;
process.on('message', (m) => { if (m === 'stop') attacking = false; });
process.on('disconnect', () => { attacking = false; });
process.send('ready');
const t0 = performance.now();
while (attacking) {
  for (const [name, attack] of rounds) {
    try {
      await attack();
    } catch (e) {
      if (e instanceof Refused) {
        refused++;
      } else {
        failed++;
        console.error(`# the ${name} attack ended early: ${e.message}`);
      }
    }
  }
  nrounds++;
}
if (process.connected)
  process.send({ frames, rounds: nrounds, refused, failed, seconds: (performance.now() - t0) / 1000 },
    () => process.disconnect());
