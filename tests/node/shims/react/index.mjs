// Just enough React for useChat outside a renderer (see ../README.md): each
// useState slot is kept by call order, so one useChat() call per `slots`
// reset gives the harness the hook's final state.
export const slots = [];
export function useRef(current) {
  return { current };
}
export function useState(initial) {
  const i = slots.length;
  slots.push(initial);
  return [initial, (next) => { slots[i] = next; }];
}
export function useEffect() {}
export default { useRef, useState, useEffect };
