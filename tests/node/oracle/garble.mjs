// Proof that each allowance of tests/node/oracle/deliberate.mjs can fail:
// runs of the real comparison (native and through babelgate), garbled one way
// each, that the judge must report (or, `allowed`, must still allow). A
// garble edits `run.clients` (what the real clients assembled, before the
// test's `adjust`), `run.histories` (what the model received) or
// `run.status`; `as` judges the run as if it were another scenario, which
// must not share the first one's allowances.
//
// Every entry of DELIBERATE has at least one reported garble here
// (`entry(...)` names it by id, aspect and kind); the oracle tests check it.

const insertAfter = (types, after, ...add) => types.splice(types.indexOf(after) + 1, 0, ...add);
const GARBLED = 'garbled by the test';

// Garbling the content of every AG-UI message in a native capture was once
// allowed in full (tool-only-content then allowed any `content`).
function garbleAllContent(run) {
  for (const m of run.clients.caN.messages) if (typeof m.content === 'string') m.content = `${GARBLED}: ${m.content}`;
}

const PYDANTIC = [
  // Status codes and the order of events are compared, not only messages.
  { id: 'status', what: 'a 500 through the Vercel route', scenario: 'plain', turn: 'turn1', garble: (r) => { r.status.gV = 500; } },
  { id: 'status', what: 'a 404 through the AG-UI route', scenario: 'tool', turn: 'turn2', garble: (r) => { r.status.gA = 404; } },
  {
    id: 'order', what: 'two AG-UI events swapped', scenario: 'plain', turn: 'turn1',
    garble: (r) => { const t = r.clients.caG.eventTypes; const i = t.indexOf('TEXT_MESSAGE_START'); [t[i], t[i + 1]] = [t[i + 1], t[i]]; },
  },
  {
    id: 'order', what: 'a Vercel chunk lost', scenario: 'tool', turn: 'turn1',
    garble: (r) => { const t = r.clients.cvG.chunkTypes; t.splice(t.indexOf('tool-output-available'), 1); },
  },

  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a step more through babelgate is allowed', allowed: true, scenario: 'plain', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'RUN_STARTED', 'STEP_STARTED', 'STEP_FINISHED') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a step in the native stream', scenario: 'plain', turn: 'turn1', garble: (r) => insertAfter(r.clients.caN.eventTypes, 'RUN_STARTED', 'STEP_STARTED') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a step where the run fails before any', scenario: 'error_before', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'RUN_STARTED', 'STEP_STARTED') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a native reasoning phase outside `think`', scenario: 'plain', turn: 'turn1', garble: (r) => insertAfter(r.clients.caN.eventTypes, 'RUN_STARTED', 'REASONING_START', 'REASONING_END') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a reasoning phase through babelgate', scenario: 'think', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'STEP_STARTED', 'REASONING_START') },

  { id: 'message-metadata-chunk', aspect: 'vercel_client', kind: 'sequence', what: 'a native message-metadata chunk in a failed run', scenario: 'error_after', turn: 'turn1', garble: (r) => insertAfter(r.clients.cvN.chunkTypes, 'text-end', 'message-metadata') },
  { id: 'message-metadata-chunk', aspect: 'vercel_client', kind: 'sequence', what: 'a message-metadata chunk through babelgate', scenario: 'plain', turn: 'turn1', garble: (r) => insertAfter(r.clients.cvG.chunkTypes, 'text-end', 'message-metadata') },
  { id: 'message-metadata-chunk', aspect: 'agui_client', kind: 'sequence', what: 'a CUSTOM event in a failed run', scenario: 'error_after', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'TEXT_MESSAGE_END', 'CUSTOM') },
  { id: 'message-metadata-chunk', aspect: 'vercel_client', kind: 'path', what: 'native metadata other than the timestamp', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.cvN.message.metadata.extra = 1; } },
  { id: 'message-metadata-chunk', aspect: 'vercel_client', kind: 'path', what: 'metadata through babelgate', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.cvG.message.metadata = { other: 1 }; } },

  { id: 'minted-ids', aspect: 'history_via_a_from_vercel_vs_native_vercel', kind: 'path', what: 'a minted id of another form', scenario: 'tool', turn: 'turn2', garble: (r) => { r.histories.gA[0].messages[1].metadata.__pydantic_ai__.ui_message_id = GARBLED; } },
  { id: 'minted-ids', aspect: 'history_via_a_from_vercel_vs_native_vercel', kind: 'path', what: 'the user message\'s id minted', scenario: 'tool', turn: 'turn2', garble: (r) => { r.histories.gA[0].messages[0].metadata.__pydantic_ai__.ui_message_id = `msg_${'0'.repeat(32)}`; } },
  { id: 'minted-ids', aspect: 'history_via_a_from_vercel_vs_native_vercel', kind: 'path', what: 'in a scenario without it', scenario: 'tool', turn: 'turn2', as: 'retry', garble: () => {} },

  { id: 'history-message-ids', aspect: 'history_via_v_from_agui_vs_native_agui', kind: 'path', what: 'another call\'s result id', scenario: 'client_tool', turn: 'turn2', garble: (r) => { r.histories.gV[0].messages[2].metadata.__pydantic_ai__.ui_message_id = 'call_other-result'; } },
  { id: 'history-message-ids', aspect: 'history_via_v_from_agui_vs_native_agui', kind: 'path', what: 'in a scenario without it', scenario: 'client_tool', turn: 'turn2', as: 'tool', garble: () => {} },

  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'more than the message id', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[1].providerMetadata.babelgate.extra = 1; } },
  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'another provider\'s metadata', scenario: 'tool', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[3].providerMetadata = { other: { messageId: '<id4>' } }; } },
  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'the text next to it', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[1].text = GARBLED; } },
  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'where no answer is expected', scenario: 'plain', turn: 'turn1', as: 'error_before', garble: () => {} },

  ...['plain', 'unicode', 'tool', 'retry', 'think'].map((scenario) => ({
    id: 'tool-only-content', aspect: 'agui_client', kind: 'path', what: `every native message's content garbled (${scenario})`, scenario, turn: 'turn1', garble: garbleAllContent,
  })),
  { id: 'tool-only-content', aspect: 'agui_client', kind: 'path', what: 'content on the tool-calling message through babelgate', scenario: 'tool', turn: 'turn1', garble: (r) => { r.clients.caG.messages[0].content = GARBLED; } },
  { id: 'tool-only-content', aspect: 'agui_client', kind: 'path', what: 'native content on the tool-calling message', scenario: 'tool', turn: 'turn1', garble: (r) => { r.clients.caN.messages[0].content = GARBLED; } },
  { id: 'tool-only-content', aspect: 'agui_client', kind: 'path', what: 'in a scenario without tools', scenario: 'tool', turn: 'turn1', as: 'plain', garble: () => {} },
  { id: 'tool-only-content', aspect: 'agui_client', kind: 'sequence', what: 'an empty text message through babelgate', scenario: 'tool', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'STEP_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_END') },
  { id: 'tool-only-content', aspect: 'agui_client', kind: 'sequence', what: 'a native empty text message in a text-only run', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.caN.eventTypes = r.clients.caN.eventTypes.filter((t) => t !== 'TEXT_MESSAGE_CONTENT'); } },

  { id: 'tool-failure-agui', aspect: 'vercel_client', kind: 'path', what: 'the error text lost from the output', scenario: 'retry', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[1].output = GARBLED; } },
  { id: 'tool-failure-agui', aspect: 'vercel_client', kind: 'path', what: 'no output at all', scenario: 'error_during', turn: 'turn1', garble: (r) => { delete r.clients.cvG.message.parts[1].output; } },
  { id: 'tool-failure-agui', aspect: 'vercel_client', kind: 'path', what: 'in a scenario without a failure', scenario: 'retry', turn: 'turn1', as: 'tool', garble: () => {} },
  { id: 'tool-failure-agui', aspect: 'vercel_client', kind: 'sequence', what: 'a native tool-output-error where no call failed', scenario: 'tool', turn: 'turn1', garble: (r) => { const t = r.clients.cvN.chunkTypes; t[t.indexOf('tool-output-available')] = 'tool-output-error'; } },
  { id: 'tool-failure-agui', aspect: 'vercel_client', kind: 'sequence', what: 'an encrypted-value chunk after no result', scenario: 'retry', turn: 'turn1', garble: (r) => insertAfter(r.clients.cvG.chunkTypes, 'text-end', 'data-reasoning-encrypted') },
  { id: 'tool-failure-agui', aspect: 'agui_client', kind: 'path', what: 'the failure mark lost', scenario: 'retry', turn: 'turn1', garble: (r) => { delete r.clients.caG.messages[1].metadata; } },
  { id: 'tool-failure-agui', aspect: 'agui_client', kind: 'path', what: 'a mark that says no error', scenario: 'error_during', turn: 'turn1', garble: (r) => { r.clients.caG.messages[1].metadata = { error: false }; } },
  { id: 'tool-failure-agui', aspect: 'agui_client', kind: 'path', what: 'the error text garbled', scenario: 'retry', turn: 'turn1', garble: (r) => { r.clients.caG.messages[1].content = GARBLED; } },
  { id: 'tool-failure-agui', aspect: 'agui_client', kind: 'sequence', what: 'a native encrypted value after a successful call', scenario: 'tool', turn: 'turn1', garble: (r) => insertAfter(r.clients.caN.eventTypes, 'TOOL_CALL_RESULT', 'REASONING_ENCRYPTED_VALUE') },
  { id: 'tool-failure-agui', aspect: 'history_via_v_from_agui_vs_native_agui', kind: 'path', what: 'the model reads another text as the result', scenario: 'error_during', turn: 'turn2', garble: (r) => { r.histories.gV[0].messages[2].parts[0].content = GARBLED; } },
  { id: 'tool-failure-agui', aspect: 'history_via_v_from_agui_vs_native_agui', kind: 'path', what: 'another outcome', scenario: 'error_during', turn: 'turn2', garble: (r) => { r.histories.gV[0].messages[2].parts[0].outcome = 'denied'; } },
  { id: 'tool-failure-agui', aspect: 'history_via_v_from_agui_vs_native_agui', kind: 'path', what: 'in a follow-up without a failure', scenario: 'error_during', turn: 'turn2', as: 'tool', garble: () => {} },
];

const MASTRA = [
  { id: 'status', what: 'a 502 through the AG-UI route', scenario: 'plain', turn: 'turn1', garble: (r) => { r.status.gA = 502; } },
  { id: 'order', what: 'two Vercel chunks swapped', scenario: 'think', turn: 'turn1', garble: (r) => { const t = r.clients.cvG.chunkTypes; const i = t.indexOf('reasoning-end'); [t[i], t[i + 1]] = [t[i + 1], t[i]]; } },

  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a step in the native stream', scenario: 'plain', turn: 'turn1', garble: (r) => insertAfter(r.clients.caN.eventTypes, 'RUN_STARTED', 'STEP_STARTED') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'a reasoning phase through babelgate', scenario: 'think', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'STEP_STARTED', 'REASONING_START') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'arguments cut in two where both sides cut the same', scenario: 'client_tool', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'TOOL_CALL_START', 'TOOL_CALL_ARGS') },
  { id: 'wire-sequence', aspect: 'agui_client', kind: 'sequence', what: 'arguments cut once more is allowed in `tool`', allowed: true, scenario: 'tool', turn: 'turn1', garble: (r) => insertAfter(r.clients.caG.eventTypes, 'TOOL_CALL_START', 'TOOL_CALL_ARGS') },
  { id: 'wire-sequence', aspect: 'vercel_client', kind: 'sequence', what: 'a tool-input delta more where both sides cut the same', scenario: 'client_tool', turn: 'turn1', garble: (r) => insertAfter(r.clients.cvG.chunkTypes, 'tool-input-start', 'tool-input-delta') },

  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'more than the message id', scenario: 'plain', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[1].providerMetadata.babelgate.extra = 1; } },
  { id: 'upstream-ids', aspect: 'vercel_client', kind: 'path', what: 'the text next to it', scenario: 'unicode', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts[1].text = GARBLED; } },

  { id: 'error-before-step', aspect: 'vercel_client', kind: 'sequence', what: 'a step opened through babelgate', scenario: 'error_before', turn: 'turn1', garble: (r) => insertAfter(r.clients.cvG.chunkTypes, 'start', 'start-step') },
  { id: 'error-before-step', aspect: 'vercel_client', kind: 'sequence', what: 'a native step after a tool result in a run that goes on', scenario: 'error_after', turn: 'turn1', as: 'tool', garble: () => {} },
  { id: 'error-before-step', what: 'an assistant message through babelgate', scenario: 'error_before', turn: 'turn1', garble: (r) => { r.clients.cvG.message = { id: 'x', role: 'assistant', parts: [] }; } },

  { id: 'unsaid-tool-failure', aspect: 'vercel_client', kind: 'sequence', what: 'a native failed call where none failed', scenario: 'retry', turn: 'turn1', as: 'tool', garble: () => {} },
  { id: 'unsaid-tool-failure', aspect: 'agui_client', kind: 'sequence', what: 'a result for the failed call in `tool`', scenario: 'retry', turn: 'turn1', as: 'client_tool', garble: () => {} },
  { id: 'unsaid-tool-failure', aspect: 'agui_client', kind: 'sequence', what: 'a result for the failed call in `error_after`', scenario: 'error_during', turn: 'turn1', as: 'error_after', garble: () => {} },
  { id: 'unsaid-tool-failure', what: 'the failed call\'s error text lost through babelgate', scenario: 'retry', turn: 'turn1', garble: (r) => { r.clients.caG.messages.find((m) => m.metadata?.error).content = ''; } },
  { id: 'unsaid-tool-failure', what: 'the failed call not pending natively', scenario: 'retry', turn: 'turn1', garble: (r) => { r.clients.caN.finished.pendingToolCallIds = []; } },
  { id: 'unsaid-tool-failure', what: 'a native failure shown as a text part', scenario: 'retry', turn: 'turn1', garble: (r) => { const p = r.clients.cvN.message.parts.find((x) => x.state === 'output-error'); p.errorText = GARBLED; p.state = 'output-available'; } },

  { id: 'json-string-result', what: 'a tool output garbled inside its quotes', scenario: 'retry', turn: 'turn1', garble: (r) => { r.clients.cvG.message.parts.find((p) => typeof p.output === 'string').output = JSON.stringify(GARBLED); } },
  { id: 'json-string-result', what: 'a text part quoted', scenario: 'plain', turn: 'turn1', garble: (r) => { const p = r.clients.cvG.message.parts[1]; p.text = JSON.stringify(p.text); } },
  { id: 'upstream-error-text', what: 'another scripted error', scenario: 'error_during', turn: 'turn1', garble: (r) => { r.clients.cvG.error = 'oracle: something else'; } },
  { id: 'upstream-error-text', what: 'another run error for the AG-UI client', scenario: 'error_after', turn: 'turn1', garble: (r) => { r.clients.caG.runError.message = 'oracle: something else'; } },
];

/** The garbles for oracle test `test` ('pydantic-ai' or 'mastra'). */
export function garbles(test) {
  return { 'pydantic-ai': PYDANTIC, mastra: MASTRA }[test];
}
