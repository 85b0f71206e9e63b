// gateway.schema.json, the JSON Schema editors validate gateway.toml with,
// read by a real JSON Schema validator (Ajv, draft 2020-12) the way an
// editor's TOML language server reads it: every configuration the project
// ships or documents is valid, and a key or a type `babelgate check` refuses
// the schema refuses too. (That the schema is the one the config code makes
// is crates/app/babelgate/tests/config_reference.rs.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'smol-toml';
import { BABELGATE, REPO_ROOT } from './lib/stack.mjs';

const schema = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'gateway.schema.json'), 'utf8'));
// The integer formats schemars writes (uint64, uint32...) are Rust's, not
// JSON Schema's: Ajv is told to leave formats alone rather than fail on them.
const validate = new Ajv2020({ allErrors: true, validateFormats: false }).compile(schema);

const read = (rel) => fs.readFileSync(path.join(REPO_ROOT, rel), 'utf8');

function markdownPages() {
  const pages = ['README.md'];
  for (const dir of ['docs', 'docs/mapping']) {
    for (const f of fs.readdirSync(path.join(REPO_ROOT, dir)).sort()) {
      if (f.endsWith('.md')) pages.push(`${dir}/${f}`);
    }
  }
  return pages;
}

/** Every configuration of the repository: the shipped file, each example's, each documented block. */
function configurations() {
  const out = [{ name: 'gateway.toml', text: read('gateway.toml') }];
  for (const ex of fs.readdirSync(path.join(REPO_ROOT, 'examples')).sort()) {
    const rel = `examples/${ex}/gateway.toml`;
    if (fs.existsSync(path.join(REPO_ROOT, rel))) out.push({ name: rel, text: read(rel) });
  }
  for (const page of markdownPages()) {
    const blocks = [...read(page).matchAll(/^\s*```toml\n([\s\S]*?)^\s*```/gm)];
    blocks.forEach((m, i) => out.push({ name: `${page} toml block ${i + 1}`, text: m[1] }));
  }
  return out;
}

const errors = () => (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);

function check(text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'babelgate-schema-'));
  const file = path.join(dir, 'gateway.toml');
  fs.writeFileSync(file, text);
  const r = spawnSync(BABELGATE, ['check', '--config', file], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test('every shipped, example and documented configuration is valid against gateway.schema.json', () => {
  const all = configurations();
  // The shipped file, the configuration page and the README's route at least.
  assert.ok(all.length >= 5, `only ${all.length} configurations found`);
  const bad = [];
  for (const { name, text } of all) {
    if (!validate(parse(text))) bad.push(`${name}:\n  ${errors().join('\n  ')}`);
  }
  assert.deepEqual(bad, []);
});

test('the shipped gateway.toml names the schema for editors', () => {
  assert.equal(read('gateway.toml').split('\n')[0], '#:schema ./gateway.schema.json');
});

// The shipped file with one mistake in its first route, as a person would make it.
const shipped = read('gateway.toml');
const mistakes = [
  ['an unknown key', 'upstream_protcol = "ag-ui"', 'upstream_protcol'],
  ['a string where a number goes', 'max_body_bytes = "1MB"', 'max_body_bytes'],
];

for (const [what, line, key] of mistakes) {
  test(`${what} is refused by the schema and by babelgate check`, () => {
    const text = shipped.replace('path = "/api/chat"\n', `path = "/api/chat"\n${line}\n`);
    assert.notEqual(text, shipped, 'the mistake went in');

    assert.equal(validate(parse(text)), false, `the schema accepted ${line}`);
    assert.match(errors().join('\n'), new RegExp(`/routes/0|${key}`));

    // check names the mistake's own line (and column).
    const at = text.split('\n').indexOf(line) + 1;
    const { status, out } = check(text);
    assert.notEqual(status, 0, `babelgate check accepted ${line}:\n${out}`);
    assert.match(out, new RegExp(`gateway\\.toml:${at}:\\d+:`), out);
  });
}

test('the file unchanged passes both (the mistakes above are the only difference)', () => {
  assert.equal(validate(parse(shipped)), true, errors().join('\n'));
  const { status, out } = check(shipped);
  assert.equal(status, 0, out);
});
