// The coordinator's health (GET health, docs/api.md), asked every few
// seconds: while it is degraded a banner at the top of every page says what
// is wrong and what the farm does meanwhile, and it goes once the answer
// says ok again. health needs no token, on a private coordinator too.
import { clear, h } from './dom.js';

const EVERY_MS = 3000;

// What is wrong, in words, one sentence each, from an answer of health;
// none when it says ok. No figure that moves (how long, how many), so the
// text changes, and is announced again, only when what is wrong does.
export function problems(hj) {
  if (!hj || hj.status === 'ok') return [];
  const out = [];
  const j = hj.journal ?? {};
  if (hj.database === 'down') {
    out.push('The database is unreachable: no new work is handed out until it is back. Results of the chunks ' +
      'nodes hold are kept and written once it is.');
  } else if (hj.lock === 'fencing') {
    out.push('This coordinator waits for the sessions of an earlier coordinator to end before it reads the ' +
      'journal: no new work is handed out until they have.');
  } else if (hj.lock === 'not held') {
    out.push('This coordinator does not hold its database\'s lock: no new work is handed out until it holds ' +
      'it again.');
  }
  if (j.state === 'failing') {
    const said = j.last_error ? ` (it said: ${j.last_error})` : '';
    out.push(`The database refuses the journal's writes${said}: no new work is handed out until they succeed. ` +
      'Each write refused is sent again until it is committed, and the results it holds are kept.');
  } else if (j.state === 'behind') {
    out.push('The database is behind with the journal\'s writes: no new work is handed out until it catches up.');
  }
  if (hj.backlog?.state === 'refusing') {
    out.push('The coordinator\'s database backlog is full: requests that need the database are refused until ' +
      'it catches up.');
  }
  if (out.length === 0) out.push(`The coordinator says it is ${hj.status}.`);
  return out;
}

// Shows the banner in el (hidden while all is well), asking now and every
// EVERY_MS. A request that fails (the coordinator away) leaves it as it is:
// the header's live status says the connection is lost.
export function watchHealth(el) {
  let shown = '';
  const show = (list) => {
    const key = list.join('\n');
    if (key === shown) return; // unchanged: not announced again
    shown = key;
    el.hidden = list.length === 0;
    if (list.length === 0) clear(el);
    else clear(el, h('strong', {}, 'The farm is degraded.'), h('ul', {}, list.map((p) => h('li', {}, p))));
  };
  const ask = async () => {
    try {
      const res = await fetch('health', { cache: 'no-store' });
      show(problems(await res.json()));
    } catch { /* unreachable or not JSON: keep what is shown */ }
    setTimeout(ask, EVERY_MS);
  };
  ask();
}
