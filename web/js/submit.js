// Submit: a form per kernel built from GET /api/kernels (types, ranges,
// defaults, allowed values), the job's own fields, the server's refusals
// shown at the field they name, and the same submission as curl or CLI.
// #/submit?from=ID opens the form filled with job ID's submission (its
// page's Resubmit), to send again as it is or changed.
import { ApiError, api, coordinatorUrl } from './api.js';
import { onEvent } from './events.js';
import { askToken, clear, h, message } from './dom.js';
import { handWarning, submissionOf } from './submission.js';

const PILOT_ITEMS = 100000;
const TIERS = ['own', 'team', 'community', 'public'];
const MAX_ITEMS = 2 ** 50;

// "abilities[2].coefficient" -> "p-abilities-2-coefficient"
const idOf = (path) => `p-${path.replace(/[^A-Za-z0-9_]+/g, '-').replace(/-$/, '')}`;

// A field's error, announced when it is shown (role=alert) and tied to the
// field by its aria-describedby.
const fieldError = (id) => h('p', { class: 'field-error', id, role: 'alert', hidden: true });

function rangeText(d) {
  if (d.type !== 'number' && d.type !== 'integer') return '';
  return `${d.min_exclusive ? '(' : '['}${d.min}, ${d.max}]`;
}

// One parameter's control; returns { el, read() } where read() gives the
// value to send or undefined to leave it out (the kernel's default).
function control(d, path) {
  const id = idOf(path);
  const errId = `${id}-error`, helpId = `${id}-help`;
  const help = [d.help, rangeText(d), d.default_text ? `default ${d.default_text}` : ''].filter(Boolean).join(' · ');
  const common = { id, name: path, 'aria-describedby': `${helpId} ${errId}`, dataset: { path } };
  const err = fieldError(errId);
  const helpEl = h('p', { class: 'help', id: helpId }, help);
  const label = `${d.name}${d.required ? ' (required)' : ''}`;
  let input, read, set;
  switch (d.type) {
  case 'number':
  case 'integer':
    input = h('input', { ...common, type: 'number', inputmode: 'decimal', step: d.type === 'integer' ? 1 : 'any',
      min: d.min, max: d.max, value: d.default !== undefined ? String(d.default) : '' });
    // left out when empty or the kernel's default: the body says what differs
    read = () => (input.value === '' || (!d.required && Number(input.value) === d.default) ? undefined : Number(input.value));
    set = (v) => { input.value = v === null || v === undefined ? '' : String(v); };
    break;
  case 'bool':
    input = h('input', { ...common, type: 'checkbox', checked: d.default === true });
    read = () => (input.checked === (d.default === true) ? undefined : input.checked);
    return {
      el: h('div', { class: 'field field-check', dataset: { param: d.name } }, input, ' ', h('label', { for: id }, d.name), helpEl, err),
      read, input, set: (v) => { input.checked = v === true; },
    };
  case 'enum':
    input = h('select', common, d.values.map((v) => h('option', { value: v }, v)));
    input.value = d.default ?? d.values[0];
    read = () => (!d.required && input.value === d.default ? undefined : input.value);
    set = (v) => { input.value = String(v); };
    break;
  case 'range': {
    const lo = h('input', { id: `${id}-lo`, type: 'number', step: 'any', 'aria-label': `${d.name} low`, dataset: { path } });
    const hi = h('input', { id: `${id}-hi`, type: 'number', step: 'any', 'aria-label': `${d.name} high` });
    input = h('div', { class: 'row', id, role: 'group', 'aria-describedby': `${helpId} ${errId}`, dataset: { path } }, lo, '–', hi);
    read = () => (lo.value === '' && hi.value === '' ? undefined
      : [lo.value === '' ? null : Number(lo.value), hi.value === '' ? null : Number(hi.value)]);
    set = (v) => {
      lo.value = Array.isArray(v) && v[0] !== null ? String(v[0]) : '';
      hi.value = Array.isArray(v) && v[1] !== null ? String(v[1]) : '';
    };
    return { el: h('div', { class: 'field', dataset: { param: d.name } }, h('label', { for: `${id}-lo` }, label), input, helpEl, err), read, input, set };
  }
  case 'string':
  default:
    input = h('input', { ...common, type: 'text', autocomplete: 'off' });
    read = () => (input.value === '' ? undefined : input.value);
    set = (v) => { input.value = v === null || v === undefined ? '' : String(v); };
    break;
  }
  return { el: h('div', { class: 'field', dataset: { param: d.name } }, h('label', { for: id }, label), input, helpEl, err), read, input, set };
}

// A list of objects (combat's abilities): a fieldset per entry.
function listControl(d, path) {
  const entries = [];
  const box = h('div');
  const addBtn = h('button', { type: 'button', class: 'secondary', onclick: () => { add(); sync(); } }, `Add to ${d.name}`);
  // The list's own id: a refusal of the whole list ("params.abilities")
  // is shown under it.
  const id = idOf(path);
  const err = fieldError(`${id}-error`);
  const wrap = h('fieldset', { class: 'list', id, 'aria-describedby': `${id}-help ${id}-error`, dataset: { path, param: d.name } },
    h('legend', {}, `${d.name} (${d.min_items} to ${d.max_items})`), h('p', { class: 'help', id: `${id}-help` }, d.help),
    box, addBtn, err);
  let onchange = () => {};
  function add() {
    const entry = { controls: null };
    const fs = h('fieldset');
    entry.el = fs;
    entries.push(entry);
    renumber();
  }
  // Rebuilds the entries' controls with their new numbers, keeping what
  // was typed (the ids carry the index the server's errors name).
  const raw = (inp) => (inp.type === 'checkbox' ? inp.checked : inp.value);
  function renumber() {
    clear(box);
    entries.forEach((entry, i) => {
      const kept = new Map((entry.controls ?? []).filter((c) => c.input?.matches?.('input, select'))
        .map((c) => [c.d.name, raw(c.input)]));
      entry.controls = d.fields.map((f) => ({ d: f, ...control(f, `${path}[${i}].${f.name}`) }));
      for (const c of entry.controls) {
        if (!kept.has(c.d.name)) continue;
        if (c.input.type === 'checkbox') c.input.checked = kept.get(c.d.name);
        else c.input.value = kept.get(c.d.name);
      }
      const rm = h('button', { type: 'button', class: 'secondary', disabled: entries.length <= d.min_items,
        onclick: () => { entries.splice(i, 1); renumber(); onchange(); } }, `Remove ${d.name}[${i}]`);
      clear(entry.el, h('legend', {}, `${d.name}[${i}]`), h('div', { class: 'fields' }, entry.controls.map((c) => c.el)), rm);
      box.append(entry.el);
    });
    addBtn.disabled = entries.length >= d.max_items;
  }
  function sync() { onchange(); }
  for (let i = 0; i < Math.max(1, d.min_items); i++) add();
  return {
    el: wrap,
    read() {
      return entries.map((e) => {
        const o = {};
        for (const c of e.controls) { const v = c.read(); if (v !== undefined) o[c.d.name] = v; }
        return o;
      });
    },
    set onchange(fn) { onchange = fn; },
    // fills the list with these entries (a job's submission)
    set(list) {
      if (!Array.isArray(list)) return;
      entries.length = 0;
      for (let i = 0; i < list.length; i++) add();
      if (list.length === 0) renumber();
      entries.forEach((e, i) => {
        for (const c of e.controls) if (list[i]?.[c.d.name] !== undefined) c.set(list[i][c.d.name]);
      });
    },
  };
}

// Watches job.finished from now on, so that a job ending before its id is
// known (a small one ends in milliseconds) is not missed: ended(id)
// resolves to the event's { state, result }.
function watchEnds() {
  const seen = new Map(), waiting = new Map();
  const stop = onEvent((e) => {
    if (e.type !== 'job.finished') return;
    const end = { state: e.state, result: e.result };
    if (waiting.has(e.job)) waiting.get(e.job)(end);
    else seen.set(e.job, end);
  });
  const ended = (id) => new Promise((resolve) => {
    if (seen.has(id)) resolve(seen.get(id));
    else waiting.set(id, resolve);
  });
  return { ended, stop };
}

// Single-quotes text for a POSIX shell.
const sq = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

export function submitView(root, query) {
  const status = h('div', { 'aria-live': 'polite' });
  root.append(h('h1', {}, 'Submit a job'), status);
  let kernels = [], strategies = ['single'];
  let params = []; // [{ d, read, el, input }]
  let form;
  let live = true;

  function jobField(name, label, attrs, help) {
    const id = `j-${name}`;
    const input = h('input', { id, name, 'aria-describedby': `${id}-help ${id}-error`, dataset: { field: name }, ...attrs });
    return {
      input,
      el: h('div', { class: 'field' }, h('label', { for: id }, label), input,
        help ? h('p', { class: 'help', id: `${id}-help` }, help) : null, fieldError(`${id}-error`)),
    };
  }

  function build(kernelName, from = null) {
    const k = kernels.find((x) => x.name === kernelName) ?? kernels[0];
    const kernelSel = h('select', { id: 'j-kernel', name: 'kernel', dataset: { field: 'kernel' },
      onchange: (e) => build(e.target.value) }, kernels.map((x) => h('option', { value: x.name }, x.name)));
    kernelSel.value = k.name;
    params = k.params.map((d) => ({ d, ...(d.type === 'list' ? listControl(d, d.name) : control(d, d.name)) }));
    const name = jobField('name', 'name', { type: 'text', maxlength: 128, autocomplete: 'off' }, 'optional label');
    const items = jobField('items', 'items (required)', { type: 'number', min: 1, step: 1, inputmode: 'numeric', value: '10000000' },
      'items to simulate, 1 to 2^50');
    const seed = jobField('seed', 'seed', { type: 'number', min: 0, step: 1, value: '1' }, 'the random numbers\' key');
    const priority = jobField('priority', 'priority', { type: 'number', min: -1000, max: 1000, step: 1, value: '0' },
      'higher runs first, -1000 to 1000');
    const target = jobField('target', 'precision target', { type: 'number', min: 0, step: 'any', inputmode: 'decimal' },
      `optional: the standard error wanted for the first output; a pilot job of ${PILOT_ITEMS.toLocaleString('en-US')} `
      + 'items measures its spread, then items is set to reach it');
    // A row of one checkbox per tier: boxes j-<box>-<tier> named `group`,
    // in the group j-<group> with its label, help and error.
    const tierChecks = (group, box, label, help) => {
      const boxes = TIERS.map((t) => h('input', { type: 'checkbox', id: `j-${box}-${t}`, name: group, value: t,
        dataset: { [box]: t } }));
      const el = h('div', { class: 'field wide' },
        h('span', { class: 'label', id: `j-${group}-label` }, label),
        h('div', { class: 'row', id: `j-${group}`, role: 'group', 'aria-labelledby': `j-${group}-label`,
          'aria-describedby': `j-${group}-help j-${group}-error` },
        boxes.map((b) => h('label', { class: 'check', for: b.id }, b, ' ', b.value))),
        h('p', { class: 'help', id: `j-${group}-help` }, help),
        fieldError(`j-${group}-error`));
      return { boxes, el };
    };
    // Who may run it: none ticked leaves it to the coordinator's default.
    const { boxes: tierBoxes, el: tiersEl } = tierChecks('tiers', 'tier', 'node tiers that may run it',
      'none ticked: the coordinator\'s default (own, team and community unless its operator changed it); public '
      + 'nodes, such as browser tabs on the contribute page, run only jobs that list public');
    // Whose results are taken without checks: none ticked leaves the
    // default, own.
    const { boxes: trustBoxes, el: trustEl } = tierChecks('trust', 'trust', 'tiers trusted without checks',
      'the results of these tiers\' nodes are taken as they come; the rest are spot-checked on another owner\'s '
      + 'node. Each must be one of the tiers that may run it. None ticked: the default, own');
    // A size that would keep the farm busy over a day is refused (docs/api.md,
    // "Large jobs") unless the submission confirms it.
    const largeBox = h('input', { type: 'checkbox', id: 'j-confirm_large', name: 'confirm_large',
      'aria-describedby': 'j-confirm_large-help' });
    const largeEl = h('div', { class: 'field field-check' }, largeBox, ' ',
      h('label', { for: 'j-confirm_large' }, 'take it even if it keeps the farm busy over a day'),
      h('p', { class: 'help', id: 'j-confirm_large-help' }, 'the coordinator refuses a job that would take over a day at '
        + 'the farm\'s speed now unless this is ticked (confirm_large)'));
    const checkRate = jobField('check_rate', 'check rate', { type: 'number', min: 0, max: 1, step: 'any',
      inputmode: 'decimal', value: '0' }, 'the least share, 0 to 1, of the results from untrusted tiers that the '
      + 'coordinator computes again on another owner\'s node to check them; 0: the coordinator decides');
    const strategySel = h('select', { id: 'j-strategy', name: 'strategy', dataset: { field: 'strategy' }, 'aria-describedby': 'j-strategy-help j-strategy-error' },
      ['single', 'tournament', 'stat_weights'].map((s) => h('option', { value: s, disabled: !strategies.includes(s) },
        strategies.includes(s) ? s : `${s} (not served yet)`)));
    // tournament and stat_weights: their variants, as the API takes them (docs/api.md).
    const VARIANT_HELP = {
      stat_weights: 'weights (JSON): [{"param": "S0", "step": 1, "name": "delta"}, ...]; each weight is the change '
        + 'of the first output per unit of step, with common random numbers',
      tournament: 'candidates (JSON): [{"name": "A", "params": {...changes...}}, ...], or {"candidates": [...], '
        + '"tournament": {"phase_items": 1000, "growth": 4, "keep": 0, "minimize": false, "z": 1.96}}',
    };
    const variantsIn = h('textarea', { id: 'j-variants', rows: 4, spellcheck: 'false',
      'aria-describedby': 'j-variants-help j-variants-error' });
    const variantsHelp = h('p', { class: 'help', id: 'j-variants-help' });
    const variantsEl = h('div', { class: 'field wide', hidden: true }, h('label', { for: 'j-variants' }, 'variants'),
      variantsIn, variantsHelp, fieldError('j-variants-error'));
    const curl = h('pre', { class: 'cmd', id: 'as-curl', tabindex: 0, 'aria-label': 'the submission as curl' });
    const cli = h('pre', { class: 'cmd', id: 'as-cli', tabindex: 0, 'aria-label': 'the submission as simfarm submit' });
    const copied = h('span', { role: 'status', class: 'muted' });
    const formErr = h('p', { class: 'form-error', id: 'form-error', role: 'alert', hidden: true });
    const submitBtn = h('button', { type: 'submit', id: 'submit' }, 'Submit job');

    const body = () => {
      const p = {};
      for (const c of params) {
        if (c.d.when && currentValue(c.d.when.field) !== c.d.when.equals) continue;
        const v = c.read();
        if (v !== undefined) p[c.d.name] = v;
      }
      const b = { kernel: k.name, params: p };
      const num = (inp) => (inp.value === '' ? undefined : Number(inp.value));
      b.items = num(items.input);
      if (name.input.value.trim()) b.name = name.input.value.trim();
      if (seed.input.value !== '' && Number(seed.input.value) !== 1) b.seed = num(seed.input);
      if (priority.input.value !== '' && Number(priority.input.value) !== 0) b.priority = num(priority.input);
      const tiers = tierBoxes.filter((x) => x.checked).map((x) => x.value);
      if (tiers.length) b.tiers = tiers;
      const verify = {};
      if (checkRate.input.value !== '' && Number(checkRate.input.value) !== 0) verify.check_rate = num(checkRate.input);
      const trust = trustBoxes.filter((x) => x.checked).map((x) => x.value);
      if (trust.length) verify.trust = trust;
      if (Object.keys(verify).length) b.verify = verify;
      if (largeBox.checked) b.confirm_large = true;
      if (strategySel.value !== 'single') {
        b.strategy = strategySel.value;
        let v;
        try { v = JSON.parse(variantsIn.value); } catch { v = variantsIn.value; } // the server names what is wrong
        if (b.strategy === 'stat_weights') b.weights = v;
        else if (v && typeof v === 'object' && !Array.isArray(v)) Object.assign(b, v);
        else b.candidates = v;
      }
      return b;
    };
    const currentValue = (pname) => params.find((c) => c.d.name === pname)?.input?.value;
    const applyWhen = () => {
      for (const c of params) {
        if (!c.d.when) continue;
        const on = currentValue(c.d.when.field) === c.d.when.equals;
        c.el.hidden = !on;
      }
    };
    const refresh = () => {
      applyWhen();
      variantsEl.hidden = strategySel.value === 'single';
      variantsHelp.textContent = VARIANT_HELP[strategySel.value] ?? '';
      const json = JSON.stringify(body());
      const url = `${coordinatorUrl()}/api/jobs`;
      curl.textContent = `curl -X POST ${url} -H 'Content-Type: application/json' -H "Authorization: Bearer $SIMFARM_TOKEN" -d ${sq(json)}`;
      cli.textContent = `echo ${sq(json)} | simfarm submit - --server ${coordinatorUrl()}`;
    };
    const copy = async (pre, what) => {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        copied.textContent = `${what} copied`;
      } catch {
        getSelection().selectAllChildren(pre);
        copied.textContent = `${what} selected: copy it with Ctrl+C`;
      }
    };

    // With a precision target, a pilot job first: its standard error over
    // its items gives the spread s of one item, and s^2 / target^2 items
    // reach the target.
    const withTarget = async () => {
      const t = Number(target.input.value);
      if (!(t > 0) || !Number.isFinite(t)) throw new ApiError(400, 'must be a number above 0', 'target');
      const b = body();
      const label = `pilot of ${b.name ?? `a ${b.kernel} job`}`.slice(0, 128);
      const ends = watchEnds();
      let end, pilot;
      try {
        pilot = await api('POST', 'api/jobs', { ...b, items: PILOT_ITEMS, name: label });
        clear(status, h('p', { class: 'msg', role: 'status' }, 'Measuring the spread with ',
          h('a', { href: `#/jobs/${pilot.id}` }, `pilot job ${pilot.id}`), '…'));
        end = await ends.ended(pilot.id);
      } finally {
        ends.stop();
      }
      const o = end.result?.outputs?.[0];
      if (end.state !== 'complete' || !(o?.stderr > 0))
        throw new ApiError(400, `the pilot job ${pilot.id} ended ${end.state} without a spread to go by`, 'target');
      const need = Math.max(1, Math.ceil((o.stderr * Math.sqrt(o.count) / t) ** 2));
      if (need > MAX_ITEMS) throw new ApiError(400, `needs ${need.toExponential(2)} items, more than 2^50`, 'target');
      items.input.value = String(need);
      refresh();
      clear(status, message(`Pilot job ${pilot.id}: ${o.name} spreads by ${o.stderr * Math.sqrt(o.count)} per item; `
        + `${need.toLocaleString('en-US')} items for a standard error of ${t}.`));
      return body();
    };
    // One submission at a time: the button is disabled while a pilot job
    // runs and while the job is sent, and a submission meanwhile (Enter in
    // a field, a script) is ignored.
    const submit = async () => {
      if (submitBtn.disabled) return;
      if (target.input.value === '') return send(body());
      clearErrors();
      submitBtn.disabled = true;
      let b;
      try {
        b = await withTarget();
      } catch (e) {
        submitBtn.disabled = false;
        if (e.status === 401) askToken();
        showError(e);
        return;
      }
      if (live) send(b);
    };

    form = h('form', { class: 'submit', novalidate: true, onsubmit: (e) => { e.preventDefault(); submit(); },
      oninput: refresh, onchange: refresh },
    h('fieldset', {}, h('legend', {}, 'Kernel'),
      h('div', { class: 'field' }, h('label', { for: 'j-kernel' }, 'kernel'), kernelSel,
        h('p', { class: 'help' }, k.help), fieldError('j-kernel-error'))),
    h('fieldset', { id: 'params' }, h('legend', {}, `Parameters of ${k.name}`),
      h('div', { class: 'fields' }, params.filter((c) => c.d.type !== 'list').map((c) => c.el)),
      params.filter((c) => c.d.type === 'list').map((c) => c.el)),
    h('fieldset', {}, h('legend', {}, 'Job'),
      h('div', { class: 'fields' }, items.el, target.el, name.el, seed.el, priority.el, checkRate.el,
        h('div', { class: 'field' }, h('label', { for: 'j-strategy' }, 'strategy'), strategySel,
          h('p', { class: 'help', id: 'j-strategy-help' }, 'single: one run over the items; tournament: candidates raced in phases; stat_weights: a baseline and moved parameters over the same items'),
          fieldError('j-strategy-error')), variantsEl, tiersEl, trustEl, largeEl)),
    formErr,
    h('div', { class: 'row' }, submitBtn),
    h('section', { 'aria-labelledby': 'h-same' }, h('h2', { id: 'h-same' }, 'The same submission elsewhere'),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'secondary', onclick: () => copy(curl, 'curl command') }, 'Copy as curl'),
        h('button', { type: 'button', class: 'secondary', onclick: () => copy(cli, 'CLI command') }, 'Copy as CLI'),
        copied),
      curl, cli));
    for (const c of params) if (c.d.type === 'list') c.onchange = refresh;
    // Another job's submission, field by field: what it left out stays at
    // the form's default, and so at the kernel's.
    const fill = (sub) => {
      const p = sub.params ?? {};
      for (const c of params) if (p[c.d.name] !== undefined) c.set?.(p[c.d.name]);
      items.input.value = sub.items === undefined ? '' : String(sub.items);
      name.input.value = sub.name ?? '';
      if (sub.seed !== undefined) seed.input.value = String(sub.seed);
      if (sub.priority !== undefined) priority.input.value = String(sub.priority);
      for (const b of tierBoxes) b.checked = (sub.tiers ?? []).includes(b.value);
      for (const b of trustBoxes) b.checked = (sub.verify?.trust ?? []).includes(b.value);
      if (sub.verify?.check_rate !== undefined) checkRate.input.value = String(sub.verify.check_rate);
      largeBox.checked = sub.confirm_large === true;
      if (sub.strategy && sub.strategy !== 'single') {
        strategySel.value = sub.strategy;
        variantsIn.value = sub.strategy === 'stat_weights' ? JSON.stringify(sub.weights ?? [], null, 1)
          : JSON.stringify(sub.tournament ? { candidates: sub.candidates ?? [], tournament: sub.tournament }
            : sub.candidates ?? [], null, 1);
      }
    };
    const heading = h('h1', {}, from ? `Submit a job like job ${from.id}` : 'Submit a job');
    clear(root, heading, status, form);
    if (from) {
      fill(from.sub);
      clear(status, message(`Filled with job ${from.id}'s submission: change what you want, then submit it as a new job.`));
    }
    refresh();
  }

  // Clears every error shown, the form's own included (a refusal for a
  // missing token, once a token is given, is no longer what is wrong).
  function clearErrors() {
    for (const p of form.querySelectorAll('.field-error, .form-error')) { p.hidden = true; p.textContent = ''; }
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  }

  // Puts the server's message at the field it names: "params.PATH" at the
  // parameter's control; one inside the variants' JSON
  // ("candidates[1].params.sigma", "weights[0].step", "tournament.growth")
  // under that box, path and all; a job field ("items") at its own control.
  function showError(e) {
    let path = null, msg = e.message;
    const inVariants = /^(candidates|weights|tournament)\b/.test(e.field ?? '');
    const inTiers = /^tiers\b/.test(e.field ?? '');
    const inTrust = /^verify\.trust\b/.test(e.field ?? '');
    if (e.field?.startsWith('params.')) path = e.field.slice(7);
    else if (inVariants || inTiers || inTrust) msg = `${e.field}: ${e.message}`;
    const target = path !== null ? form.querySelector(`#${CSS.escape(idOf(path))}`)
      : inVariants ? form.querySelector('#j-variants')
        : inTiers ? form.querySelector('#j-tiers')
          : inTrust ? form.querySelector('#j-trust')
            : e.field === 'verify.check_rate' ? form.querySelector('#j-check_rate')
              : e.field ? form.querySelector(`#j-${CSS.escape(e.field)}`) : null;
    const errEl = target ? form.querySelector(`#${CSS.escape(target.id)}-error`) : null;
    if (target && errEl) {
      errEl.textContent = msg;
      errEl.hidden = false;
      if (target.matches('fieldset.list')) {
        // the list as a whole (too few or too many entries): no entry is
        // marked, the focus goes to the list's first control
        target.querySelector('input, select, button')?.focus();
      } else {
        const focusable = target.matches('input, select, textarea') ? target : target.querySelector('input, select');
        focusable?.setAttribute('aria-invalid', 'true');
        focusable?.focus();
      }
    } else {
      const f = form.querySelector('#form-error');
      f.textContent = e.field ? `${e.field}: ${e.message}` : e.message;
      f.hidden = false;
    }
  }

  async function send(b) {
    clearErrors();
    const btn = form.querySelector('#submit');
    btn.disabled = true;
    try {
      const r = await api('POST', 'api/jobs', b);
      // the job's page shows the warning the job was taken with, if any
      if (r.warning) handWarning(r.id, r.warning);
      location.hash = `#/jobs/${r.id}`;
    } catch (e) {
      btn.disabled = false;
      if (e.status === 401) askToken();
      showError(e);
    }
  }

  const fromId = Number(query.get('from'));
  Promise.all([api('GET', 'api/kernels'),
    fromId > 0 ? api('GET', `api/jobs/${fromId}`).catch((e) => ({ error: e })) : null]).then(([r, job]) => {
    if (!live) return;
    kernels = r.kernels;
    strategies = r.strategies ?? strategies;
    if (job && !job.error) {
      const sub = submissionOf(job);
      build(sub.kernel, { id: fromId, sub });
      return;
    }
    build(query.get('kernel') ?? kernels[0]?.name);
    if (job?.error) clear(status, message(`Cannot read job ${fromId}: ${job.error.message}`, true));
  }).catch((e) => clear(status, message(`Cannot load the kernels: ${e.message}`, true)));
  return { stop() { live = false; } };
}
