// Shared plumbing for the validate-*.mjs scripts: finding the
// files, the --fixtures copies, id normalisation, snapshots and the summary.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = path.resolve(NODE_DIR, '..', '..');

// Scenarios whose run may legitimately end in an error: run_error and
// rejected (an A2A task the agent refused) must, and a gateway may report a
// cut upstream as an error too.
export const ERROR_REQUIRED = new Set(['run_error', 'rejected']);
export const ERROR_ALLOWED = new Set(['run_error', 'rejected', 'cut_mid_message']);

/**
 * Parse `<scenario>.<from>-<to>.sse`. The scenario has no dot; `from` may
 * contain dashes (ag-ui), so the target suffix is matched from the end.
 */
export function parseName(file, to) {
  const base = path.basename(file, '.sse');
  const dot = base.indexOf('.');
  const suffix = `-${to}`;
  if (dot <= 0 || !base.endsWith(suffix)) return null;
  const from = base.slice(dot + 1, -suffix.length);
  if (!from) return null;
  return { base, scenario: base.slice(0, dot), from };
}

/**
 * Resolve the command line into the list of files to check.
 * --fixtures copies tests/fixtures/<fixtureDir>/<s>.sse to a temp dir as
 * <s>.<selfName>-<to>.sse, so the real producers' bytes go through exactly the
 * same path as the gateway's output. The temp dir is removed by cleanup().
 */
export function collectFiles(argv, { to, fixtureDir, selfName, usage }) {
  const args = argv.slice(2);
  // --dump DIR: every DIR/*.sse, as an adapter's test wrote it (any name).
  if (args.length === 2 && args[0] === '--dump') {
    if (!fs.existsSync(args[1]) || !fs.statSync(args[1]).isDirectory()) {
      console.error(`not a directory: ${args[1]}`);
      process.exit(2);
    }
    return { dir: args[1], fixtures: false, dump: true, cleanup: () => {} };
  }
  if (args.length !== 1) {
    console.error(usage);
    process.exit(2);
  }
  if (args[0] === '--fixtures') {
    const src = path.join(REPO_ROOT, 'tests', 'fixtures', fixtureDir);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `babelgate-${to}-`));
    for (const f of fs.readdirSync(src).filter((f) => f.endsWith('.sse')).sort()) {
      fs.copyFileSync(path.join(src, f), path.join(tmp, `${path.basename(f, '.sse')}.${selfName}-${to}.sse`));
    }
    return { dir: tmp, fixtures: true, cleanup: () => fs.rmSync(tmp, { recursive: true, force: true }) };
  }
  const dir = args[0];
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
    console.error(`not a directory: ${dir}`);
    process.exit(2);
  }
  return { dir, fixtures: false, cleanup: () => {} };
}

export function listFiles(dir, to, { dump = false } = {}) {
  const dumpName = (f) => {
    const base = path.basename(f, '.sse');
    return { base, scenario: base, from: 'dump' };
  };
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sse'))
    .sort()
    .map((f) => ({ file: path.join(dir, f), name: dump ? dumpName(f) : parseName(f, to) }))
    .filter((x) => x.name !== null);
}

const isIdKey = (key) => key === 'id' || /[a-z]Id$/.test(key);
const isIdListKey = (key) => /[a-z]Ids$/.test(key);

/**
 * Replace id values with <id:N>, numbered in order of first appearance, so a
 * snapshot does not depend on the ids a translator generates while still
 * showing which ids are the same (a tool call and its result, say).
 * Also turns the value into plain JSON (drops undefined, copies everything).
 */
export function normalizeIds(value) {
  const table = new Map();
  const placeholder = (id) => {
    if (!table.has(id)) table.set(id, `<id:${table.size + 1}>`);
    return table.get(id);
  };
  const walk = (v) => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      if (isIdKey(k) && typeof x === 'string') out[k] = placeholder(x);
      else if (isIdListKey(k) && Array.isArray(x)) out[k] = x.map((e) => (typeof e === 'string' ? placeholder(e) : walk(e)));
      else out[k] = walk(x);
    }
    return out;
  };
  return walk(JSON.parse(JSON.stringify(value)));
}

/**
 * Compare against tests/node/snapshots/<kind>/<base>.json (kind may be a subdir). A missing snapshot
 * fails unless UPDATE_SNAPSHOTS=1, which (re)writes it. Returns null when the
 * snapshot matches (or was written), else a one-line reason.
 */
export function checkSnapshot(kind, base, value) {
  const file = path.join(NODE_DIR, 'snapshots', kind, `${base}.json`);
  const text = JSON.stringify(value, null, 2) + '\n';
  const update = process.env.UPDATE_SNAPSHOTS === '1';
  if (update) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text) fs.writeFileSync(file, text);
    return null;
  }
  if (!fs.existsSync(file)) return `no snapshot ${path.relative(REPO_ROOT, file)} (run with UPDATE_SNAPSHOTS=1 to create it)`;
  const want = fs.readFileSync(file, 'utf8');
  if (want === text) return null;
  const a = want.split('\n');
  const b = text.split('\n');
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return `differs from ${path.relative(REPO_ROOT, file)} at line ${i + 1}: expected ${JSON.stringify(a[i] ?? '<end>')}, got ${JSON.stringify(b[i] ?? '<end>')}`;
}

/** Run `check` on every file, print ok/FAIL lines and the summary, exit. */
export async function runAll(files, check, cleanup) {
  let passed = 0;
  let failed = 0;
  try {
    // A validator that saw nothing proved nothing: that is a failure.
    if (files.length === 0) {
      failed++;
      console.log('FAIL no matching files');
    }
    for (const entry of files) {
      let reason;
      let note;
      try {
        ({ reason, note } = (await check(entry)) ?? {});
      } catch (e) {
        reason = `validator crashed: ${e?.stack ?? e}`;
      }
      if (reason) {
        failed++;
        console.log(`FAIL ${entry.name.base}: ${oneLine(reason)}`);
      } else {
        passed++;
        console.log(`ok ${entry.name.base}${note ? ` (${oneLine(note)})` : ''}`);
      }
    }
  } finally {
    cleanup();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
}

export const oneLine = (s) => String(s).replace(/\s+/g, ' ').trim().slice(0, 600);

export const describeError = (e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));
