// Assumption A: the schema accepts any object with a string `type`.
export const sendMessageEventSchema = {
  safeParse(x) {
    return x && typeof x === "object" && typeof x.type === "string"
      ? { success: true, data: x } : { success: false };
  },
};
export function isV4Schema() { return true; }
