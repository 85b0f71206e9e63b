// node run.mjs <permissive|strict> file.sse...: feeds each stream to the real
// useChat sendMessage loop and prints what the client ends up holding.
import { readFileSync } from "node:fs";
const [mode, ...files] = process.argv.slice(2);
const react = await import("./stubs/react.mjs");
const { useChat } = await import(`./client-${mode}.mjs`);
const names = ["messages", "delta", "loading", "streaming", "pendingInterrupt", "resolveInterrupt", "uiToolCalls", "currentRound", "error"];
let failures = 0;
for (const file of files) {
  react.slots.length = 0;
  const bytes = readFileSync(file);
  const fetch = async () => new Response(new ReadableStream({
    start(c) { for (let i = 0; i < bytes.length; i += 7) c.enqueue(bytes.subarray(i, i + 7)); c.close(); },
  }), { status: 200, headers: { "content-type": "text/event-stream" } });
  const chat = useChat({ fetch, clientTools: [{ name: "change_background", description: "d", parameters: {}, handler: () => "ok" }] });
  const log = console.log; console.log = () => {};
  await chat.sendMessage("hi");
  console.log = log;
  const state = Object.fromEntries(names.map((n, i) => [n, react.slots[i]]));
  const bad = state.error ? `ERROR ${state.error}` : "ok";
  if (state.error) failures++;
  console.log(`${file}: ${bad}`);
  console.log(JSON.stringify({ messages: state.messages, uiToolCalls: state.uiToolCalls, pendingInterrupt: state.pendingInterrupt, currentRound: state.currentRound }));
}
process.exit(failures ? 1 : 0);
