// The event schema @cloudbase/agent-ui-web checks each frame against (see
// ../README.md): the server's declared shapes, unknown keys refused.
const str = (v) => typeof v === 'string';
const optStr = (v) => v === undefined || str(v);
const SHAPES = {
  text: { content: str },
  'tool-call-start': { toolCallId: str, toolCallName: str },
  'tool-call-args': { toolCallId: str, delta: str },
  'tool-call-end': { toolCallId: str },
  'tool-result': { toolCallId: str, result: str },
  interrupt: { id: str, reason: (v) => v === null || str(v), payload: () => true },
  // `code` is the gateway's addition (docs/errors.md).
  error: { error: str, code: optStr },
};

const listeners = new Set();
/** Calls `fn(value, why)` for every frame the schema refuses. */
export function onRejected(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function problem(x) {
  if (x === null || typeof x !== 'object' || Array.isArray(x)) return 'not a JSON object';
  const shape = SHAPES[x.type];
  if (!shape) return `unknown type ${JSON.stringify(x.type)}`;
  for (const [k, ok] of Object.entries(shape)) if (!ok(x[k])) return `${x.type}: missing or invalid ${k}`;
  for (const k of Object.keys(x)) if (k !== 'type' && !(k in shape)) return `${x.type}: unknown key ${k}`;
  return null;
}

export const sendMessageEventSchema = {
  safeParse(x) {
    const why = problem(x);
    if (why === null) return { success: true, data: x };
    for (const fn of listeners) fn(x, why);
    return { success: false, error: new Error(why) };
  },
};

/** zod 4 schemas carry `_zod`; the client picks its JSON Schema converter by this. */
export function isV4Schema(schema) {
  return schema !== null && typeof schema === 'object' && '_zod' in schema;
}
