// The attacking side of bench_hostile.mjs, in a process of its own so the
// benchmark can give it cores of its own (as an attacker on another
// machine has) or let it share the honest nodes' cores. Run as
// `node hostile_attacker.mjs PORT` with an IPC channel: it sends 'ready',
// attacks the coordinator on 127.0.0.1:PORT round after round until it is
// sent 'stop', then sends { frames, rounds, failed, seconds } and exits.
//
// Each round makes every attack of the hostile-node run once: garbage
// before hello, a frame past 4 MiB, completions with forged signatures,
// stolen tokens and replays, and a heartbeat flood cut off by the rate limit.
import crypto from 'node:crypto';
import { E, ScriptedNode, clientFrame, envelope, nodeKey, sealBody } from '../lib/nodeproto.mjs';

const port = Number(process.argv[2]);

// The frames that need no session of their own are built once and sent as
// they are, as an attacker elsewhere would: what the attacking process
// spends is then the sending itself.
const garbage = clientFrame(crypto.randomBytes(64));
const oversize = clientFrame(Buffer.alloc(4 * 1024 * 1024 + 1, 0x90));
const FLOOD = 2000;
const flood = Buffer.concat(Array(FLOOD).fill(clientFrame(envelope('heartbeat', 2, { cpu: 0, mem_used: 0, mem_total: 1 }))));
const batch = { job: 1, ctxHash: Buffer.alloc(32), results: [{ chunk: 1, token: crypto.randomBytes(16), start: 0,
  count: 1000, data: crypto.randomBytes(200) }] };

// One round of every attack; resolves to the frames it sent.
async function attackRound() {
  let frames = 0;
  const closeOrTimeout = (n) => Promise.race([n.closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
  // Garbage before hello.
  const g = await ScriptedNode.connect(port);
  g.link.raw(garbage);
  frames++;
  await closeOrTimeout(g);
  // A frame past the limit.
  const big = await ScriptedNode.connect(port);
  await big.hello();
  big.link.raw(oversize);
  frames += 2;
  await closeOrTimeout(big);
  // Forged, stolen and replayed completions, 20 of each; a session cut off
  // for too many bad frames (ERATELIMITED) is replaced by a new one under a
  // new key (a new enrolment), so every round sends all of them. The forged
  // frame (signed by a key that is not the session's) is signed once a round.
  const forged = clientFrame(envelope('complete', 1000, sealBody(nodeKey(), `127.0.0.1:${port}`, batch)));
  for (let i = 0; i < 20;) {
    const t = await ScriptedNode.connect(port);
    await t.hello();
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
      frames++;
    } catch (e) {
      if (!t.msgs.some((m) => m.type === 'error' && m.body.code === E.ERATELIMITED)) throw e;
      i++;
    }
  }
  // A heartbeat flood.
  const f = await ScriptedNode.connect(port);
  await f.hello();
  f.link.raw(flood);
  frames += FLOOD + 2;
  await closeOrTimeout(f);
  return frames;
}

let attacking = true, frames = 0, rounds = 0, failed = 0;
process.on('message', (m) => { if (m === 'stop') attacking = false; });
process.on('disconnect', () => { attacking = false; });
process.send('ready');
const t0 = performance.now();
while (attacking) {
  try {
    frames += await attackRound();
    rounds++;
  } catch (e) {
    failed++;
    console.error(`# an attack round ended early: ${e.message}`);
  }
}
if (process.connected)
  process.send({ frames, rounds, failed, seconds: (performance.now() - t0) / 1000 }, () => process.disconnect());
