// Helpers for the validators' own tests: write streams into a temporary
// directory and run a validator on it as tests/run.sh does.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** SSE body with one `data:` frame per item (objects are JSON-encoded). */
export const sse = (...items) => items.map((x) => `data: ${typeof x === 'string' ? x : JSON.stringify(x)}\n\n`).join('');

/** Runs `node <script> ...args` with `files` ({name: body}) in a fresh dir
 * (passed where an arg is '$DIR'); returns {status, lines}. */
export function runValidator(script, args, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'babelgate-validator-test-'));
  try {
    for (const [name, body] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), body);
    const r = spawnSync(process.execPath, [path.join(NODE_DIR, script), ...args.map((a) => (a === '$DIR' ? dir : a))], {
      encoding: 'utf8',
      env: { ...process.env, UPDATE_SNAPSHOTS: '' },
    });
    return { status: r.status, lines: r.stdout.trim().split('\n'), stderr: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The ok/FAIL line for `base`. */
export const lineFor = (lines, base) => lines.find((l) => l.startsWith(`ok ${base}`) || l.startsWith(`FAIL ${base}:`));
