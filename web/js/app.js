// The dashboard: a hash router over the views (jobs, one job, submit,
// nodes, one node), the API token box, the live events connection, and the banner
// that says when the coordinator is degraded.
import { setToken, token } from './api.js';
import { onStatus, reconnect, start } from './events.js';
import { watchHealth } from './health.js';
import { jobsView } from './jobs.js';
import { jobView } from './job.js';
import { submitView } from './submit.js';
import { nodeView, nodesView } from './nodes.js';

const main = document.getElementById('main');
let current = null; // the view shown: { stop() }

function route() {
  const hash = location.hash.replace(/^#/, '') || '/jobs';
  const parts = hash.split('?')[0].split('/').filter(Boolean);
  const query = new URLSearchParams(hash.split('?')[1] ?? '');
  current?.stop?.();
  main.replaceChildren();
  let nav = parts[0];
  if (parts[0] === 'jobs' && parts[1]) current = jobView(main, Number(parts[1]));
  else if (parts[0] === 'submit') current = submitView(main, query);
  else if (parts[0] === 'nodes' && parts[1]) current = nodeView(main, Number(parts[1]));
  else if (parts[0] === 'nodes') current = nodesView(main, query);
  else { nav = 'jobs'; current = jobsView(main, query); }
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function tokenBox() {
  const box = document.getElementById('token-box');
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  const summary = document.getElementById('token-summary');
  const note = document.getElementById('token-note');
  const show = () => { summary.textContent = token() ? 'API token ✓' : 'API token'; };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    input.value = '';
    show();
    box.open = false;
    // what a private coordinator refused is asked again with the token
    if (box.dataset.needed) {
      delete box.dataset.needed;
      reconnect();
      route();
    }
  });
  // a coordinator run with --private: viewing needs the token too
  window.addEventListener('simfarm:token-needed', (e) => {
    if (box.dataset.needed) return;
    box.dataset.needed = '1';
    note.textContent = token() ? `This token was refused (${e.detail}): viewing this farm needs a valid API token.`
      : 'This farm is private: viewing it needs an API token.';
    note.classList.add('needed');
    box.open = true;
    input.focus();
  });
  document.getElementById('token-forget').addEventListener('click', () => {
    setToken('');
    input.value = '';
    show();
  });
  show();
}

tokenBox();
watchHealth(document.getElementById('health'));
onStatus((s) => { document.getElementById('live').textContent = s; });
start();
window.addEventListener('hashchange', route);
route();
