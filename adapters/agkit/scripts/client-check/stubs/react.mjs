// Just enough React for useChat to run outside a renderer: every useState
// slot is recorded by call order so the harness can read the final state.
export const slots = [];
export function useRef(v) { return { current: v }; }
export function useState(v) {
  const i = slots.length;
  slots.push(v);
  return [v, (next) => { slots[i] = next; }];
}
export function useEffect() {}
export default { useRef, useState, useEffect };
