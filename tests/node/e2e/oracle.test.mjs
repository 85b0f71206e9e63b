// Oracle test: one pydantic-ai agent (tests/python/oracle_agent.py, a
// scripted offline model) served natively in AG-UI and in Vercel by
// pydantic-ai's own adapters, and through babelgate in the other dialect.
// What the real clients assemble (`ai`'s readUIMessageStream, @ag-ui/client)
// and the history the model receives must be the same both ways, up to the
// differences listed below, each with its reason (docs/oracle-findings.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BABELGATE, PYTHON, freePort } from './lib/stack.mjs';

// Differences that are not faults of the translation, by path.
const DELIBERATE = [
  // Event and chunk sequences differ by construction (babelgate adds steps,
  // pydantic-ai's Vercel adapter sends message metadata): compared is what
  // the clients assemble from them.
  [/^\$\.(eventTypes|chunkTypes)\b/, 'the wire sequence, not what the client assembles'],
  [/^\$\.message\.metadata$/, "pydantic-ai's own message-metadata chunk (a timestamp)"],
  // Ids the gateway mints where the client sent none (docs/mapping.md).
  [/\.metadata\.__pydantic_ai__\.ui_message_id$/, 'message ids minted by the gateway'],
  [/\.run_id$/, 'run ids minted by the gateway'],
  // An assistant message that only calls a tool: the AG-UI adapter opens an
  // empty text message as the calls' parent, a Vercel upstream has none to
  // send, so @ag-ui/client has no `content` to set.
  [/^\$\.messages\[\d+\]\.content$/, 'no empty text message to carry an empty content'],
];

// A failed tool call, per scenario where one happens. AG-UI 1.0 has no
// field on TOOL_CALL_RESULT that says a call failed (`error` exists only on a
// tool message in a history or a snapshot). pydantic-ai puts the failure in
// its own REASONING_ENCRYPTED_VALUE, an opaque value for pydantic-ai alone
// that a gateway must neither read nor forge. So AG-UI -> Vercel shows the
// call as succeeded (and a follow-up sent from that client says so), and
// Vercel -> AG-UI marks it in the result's `metadata.error`, which the
// gateway reads back as the failure when the client sends the history again
// (the turn-2 history through /a-from-vercel holds the test to that).
// docs/mapping.md, "Deliberate differences".
// [path, the one aspect it is allowed in (all when absent)]
const TOOL_FAILURE = [
  [/^\$\.message\.parts\[\d+\]\.(state|errorText|output)$/, 'vercel_client'],
  [/^\$\.messages\[\d+\]\.(encryptedValue|metadata)$/, 'agui_client'],
  [/^\$\[\d+\]\.messages\[\d+\]\.parts\[\d+\]\.outcome$/, 'history_via_v_from_agui_vs_native_agui'],
];
const PER_SCENARIO = { retry: TOOL_FAILURE, error_during: TOOL_FAILURE };

const ASPECTS = ['vercel_client', 'agui_client', 'history_via_v_from_agui_vs_native_agui', 'history_via_a_from_vercel_vs_native_vercel'];

let report;
let stopAll = () => {};
before(async () => {
  process.env.ORACLE_PY = PYTHON;
  process.env.BABELGATE = BABELGATE;
  process.env.ORACLE_PORT = String(await freePort());
  process.env.GATEWAY_PORT = String(await freePort());
  const m = await import('../oracle/capture.mjs');
  stopAll = m.stopAll;
  report = await m.compareAll({ writeFixtures: false });
}, { timeout: 240_000 });
after(() => stopAll());

describe('pydantic-ai natively vs through babelgate: what the real clients and the model see', () => {
  test('every scenario ran, both turns where there are two', () => {
    assert.deepEqual(Object.keys(report).sort(), ['client_tool', 'error_after', 'error_before', 'error_during', 'plain', 'retry', 'think', 'tool', 'unicode']);
    assert.ok(report.tool.turn2 && report.client_tool.turn2 && report.error_during.turn2, 'follow-up turns');
    assert.deepEqual(report.error_during.turn2.missing, []);
    assert.deepEqual(report.tool.turn2.missing, []);
    assert.deepEqual(report.client_tool.turn2.missing, []);
  });
  for (const scenario of ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think']) {
    test(scenario, () => {
      for (const [turn, r] of Object.entries(report[scenario])) {
        for (const aspect of ASPECTS) {
          const left = (r[aspect] ?? []).filter((d) => !DELIBERATE.some(([re]) => re.test(d.path)) && !(PER_SCENARIO[scenario] ?? []).some(([re, only]) => (!only || only === aspect) && re.test(d.path)));
          assert.deepEqual(left, [], `${scenario} ${turn} ${aspect}: ${JSON.stringify(left).slice(0, 1500)}`);
        }
      }
    });
  }
});
