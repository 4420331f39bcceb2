// A job's submission, as POST api/jobs takes it again (docs/api.md): the
// body it was submitted with (the row's `spec`), without what the row adds
// (id, state, result, times) and without `owner`, so that whoever sends it
// again owns the copy. A row without its body is rebuilt from its fields.
const FIELDS = ['kernel', 'name', 'strategy', 'params', 'items', 'seed', 'priority', 'tiers', 'verify',
  'weights', 'candidates', 'tournament', 'confirm_large'];

export function submissionOf(job) {
  let spec = job?.spec;
  if (typeof spec === 'string') {
    try { spec = JSON.parse(spec); } catch { spec = null; }
  }
  const src = spec && typeof spec === 'object' && !Array.isArray(spec) ? spec : job ?? {};
  const out = {};
  for (const k of FIELDS) if (src[k] !== undefined && src[k] !== null) out[k] = src[k];
  if (out.strategy === 'single') delete out.strategy;
  return out;
}

// How far a job has come, as a share from 0 to 100: a job that ended
// complete is at 100 whatever its items done (a tournament's candidates
// dropped before its last phase do not run all the items, stat_weights'
// variants run them once more each); otherwise the items done of its
// items, at most 100.
export function progressOf(job, prog) {
  const p = prog ?? job?.progress ?? null;
  const items = p?.items ?? job?.items ?? 0;
  const done = p?.items_done ?? job?.result?.items_done ?? 0;
  if (job?.state === 'complete') return { done, items, pct: 100 };
  return { done, items, pct: items > 0 ? Math.min(100, (100 * done) / items) : 0 };
}

// Why no online node can run the job (progress.blocked), or null.
export function blockedOf(prog) {
  const b = prog?.blocked;
  return typeof b === 'string' && b !== '' ? b : null;
}

// The warning POST api/jobs answered a submission with ("warning": the farm
// knows no speed for its kernel yet), handed from the form to the page of
// the job it made, which shows it once.
let handed = null;

export function handWarning(id, warning) {
  handed = { id, warning };
}

// The warning handed for job id, or null; taken: asked again, null.
export function takeWarning(id) {
  if (handed?.id !== id) return null;
  const { warning } = handed;
  handed = null;
  return warning;
}
