// A module web worker importing the package's browser entry (initialised on import there too).
import { ResilientClient } from "/node_modules/resilient-llm/browser.mjs";

const up = { name: "up", chat: (req) => Promise.resolve({ text: `worker: ${req.messages[0].content}` }) };
const client = new ResilientClient({}, { providers: [up] });
client.chat({ messages: [{ role: "user", content: "hi" }] }).then(
  (res) => postMessage(res.text),
  (e) => postMessage(`error: ${e}`),
);
