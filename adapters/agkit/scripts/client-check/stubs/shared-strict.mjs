// Assumption B: a strict union of the server's declared event shapes
// (cloudbase-agent-server 0.1.1 SendMessageEvent), unknown keys rejected.
const str = (v) => typeof v === "string";
const shapes = {
  text: { content: str },
  "tool-call-start": { toolCallId: str, toolCallName: str },
  "tool-call-args": { toolCallId: str, delta: str },
  "tool-call-end": { toolCallId: str },
  "tool-result": { toolCallId: str, result: str },
  interrupt: { id: str, reason: (v) => v === null || str(v), payload: () => true },
  error: { error: str },
};
export const sendMessageEventSchema = {
  safeParse(x) {
    if (!x || typeof x !== "object") return { success: false };
    const shape = shapes[x.type];
    if (!shape) return { success: false };
    for (const [k, ok] of Object.entries(shape)) if (!ok(x[k])) return { success: false };
    for (const k of Object.keys(x)) if (k !== "type" && !(k in shape)) return { success: false };
    return { success: true, data: x };
  },
};
export function isV4Schema() { return true; }
