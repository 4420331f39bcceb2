// What the contribute page's tests run on: PostgreSQL, `simfarm serve
// --allow-public-nodes` serving web/ (with the bundle `make` builds into
// web/node/), and Debian's Chromium. close() ends what was started.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve } from '../lib/coord.mjs';
import { launch } from './chromium.mjs';

export async function contributeFarm() {
  for (const f of ['web/node/simfarm-node.js', 'web/node/simfarm-node.wasm', 'web/node/node-worker.js']) {
    assert.ok(fs.existsSync(path.join(top, f)), `${f} missing: run make`);
  }
  const farm = {
    pg: null, srv: null, browser: null,
    async close() {
      await farm.browser?.close();
      await farm.srv?.stop();
      await farm.pg?.stop();
    },
  };
  try {
    farm.pg = await startPostgres();
    farm.srv = await serve(farm.pg.url, { extra: ['--allow-public-nodes', '--web', path.join(top, 'web')] });
    farm.browser = await launch();
  } catch (e) {
    await farm.close();
    throw e;
  }
  return farm;
}
