// The differences from a framework's native output that babelgate makes on
// purpose, as the oracle tests allow them. Each entry's `id` is a row of
// docs/mapping.md, "Deliberate differences from the frameworks' own
// adapters", which says why; crates/gateway/tests/mapping_doc.rs holds the
// two to each other (it reads the ids of the entries below).
//
// An entry allows a difference at a JSON path of the compared values, in
// one oracle test (`test`), optionally only in some scenarios and aspects.

// Where a Vercel part carries the upstream's message id (`upstream-ids`).
const UPSTREAM_IDS = /^\$\.message\.parts\[\d+\]\.(providerMetadata|callProviderMetadata|resultProviderMetadata)$/;

export const DELIBERATE = [
  { id: 'wire-sequence', test: 'pydantic-ai', path: /^\$\.(eventTypes|chunkTypes)\b/ },
  { id: 'wire-sequence', test: 'mastra', path: /^\$\.(eventTypes|chunkTypes)\b/ },
  { id: 'message-metadata-chunk', test: 'pydantic-ai', path: /^\$\.message\.metadata$/ },
  { id: 'minted-ids', test: 'pydantic-ai', path: /\.metadata\.__pydantic_ai__\.ui_message_id$/ },
  { id: 'minted-ids', test: 'pydantic-ai', path: /\.run_id$/ },
  { id: 'upstream-ids', test: 'pydantic-ai', aspects: ['vercel_client'], path: UPSTREAM_IDS },
  { id: 'upstream-ids', test: 'mastra', aspects: ['vercel_client'], path: UPSTREAM_IDS },
  { id: 'tool-only-content', test: 'pydantic-ai', path: /^\$\.messages\[\d+\]\.content$/ },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', scenarios: ['retry', 'error_during'],
    aspects: ['vercel_client'], path: /^\$\.message\.parts\[\d+\]\.(state|errorText|output)$/,
  },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', scenarios: ['retry', 'error_during'],
    aspects: ['agui_client'], path: /^\$\.messages\[\d+\]\.(encryptedValue|metadata)$/,
  },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', scenarios: ['retry', 'error_during'],
    aspects: ['history_via_v_from_agui_vs_native_agui'], path: /^\$\[\d+\]\.messages\[\d+\]\.parts\[\d+\]\.outcome$/,
  },
  {
    id: 'history-message-ids', test: 'pydantic-ai-history',
    path: /^\$\[\d+\]\.messages\[\d+\]\.metadata(\.__pydantic_ai__\.ui_message_id)?$/,
  },
  // Checked, not just allowed: the test parses both sides and requires the
  // same arguments (oracle-history.test.mjs, sameArguments).
  { id: 'tool-args-form', test: 'pydantic-ai-history', path: /^\$\[\d+\]\.messages\[\d+\]\.parts\[\d+\]\.args$/ },
];

/** Whether a difference found by oracle test `test` is deliberate. */
export function isDeliberate(test, { path, scenario, aspect }) {
  return DELIBERATE.some((d) => d.test === test
    && (!d.scenarios || d.scenarios.includes(scenario))
    && (!d.aspects || d.aspects.includes(aspect))
    && d.path.test(path));
}
