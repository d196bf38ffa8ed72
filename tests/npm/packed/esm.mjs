// The installed tarball as an ES module on Node: the client, an error class, a stream helper,
// client.fetch and the AI SDK provider's entry.
import assert from "node:assert/strict";

import { AllProvidersFailedError, ResilientClient, TimeoutError } from "resilient-llm";
import { createResilient } from "resilient-llm/ai-sdk";

const down = { name: "down", chat: () => Promise.reject(Object.assign(new Error("overloaded"), { status: 529 })) };
const up = { name: "up", chat: (req) => Promise.resolve({ text: `up: ${req.messages[0].content}` }) };
const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [down, up] });

const res = await client.chat({ messages: [{ role: "user", content: "hi" }] });
assert.equal(res.text, "up: hi");
assert.equal(res.servedBy.provider, "up");

const slow = { name: "slow", chat: (_req, signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))) };
const lone = new ResilientClient({ timeoutMs: 20, retry: { maxAttempts: 1 } }, { providers: [slow] });
const err = await lone.chat({ messages: [{ role: "user", content: "x" }] }).catch((e) => e);
assert.ok(err instanceof AllProvidersFailedError, String(err));
assert.ok(err.cause instanceof TimeoutError, String(err.cause));

const stream = client.stream({ messages: [{ role: "user", content: "streamed" }] });
let text = "";
for await (const piece of stream.textStream) text += piece;
assert.equal(text, "up: streamed");

const r = await client.fetch("https://resilient.invalid/v1/chat/completions", {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "via fetch" }] }),
});
assert.equal(r.status, 200);
assert.equal((await r.json()).choices[0].message.content, "up: via fetch");

assert.equal(createResilient({ client })("default").specificationVersion, "v4");
client.free();
client.free();
console.log("packed esm: ok");
