// The installed tarball as CommonJS on Node (require, no require(esm)).
"use strict";
const assert = require("node:assert/strict");
const { ResilientClient, ConfigError, LLMError, createFetch } = require("resilient-llm");
const { createResilient } = require("resilient-llm/ai-sdk");

async function main() {
  const up = { name: "up", chat: (req) => Promise.resolve({ text: `up: ${req.messages[0].content}` }) };
  const client = new ResilientClient({}, { providers: [up] });
  assert.equal((await client.chat({ messages: [{ role: "user", content: "hi" }] })).text, "up: hi");
  assert.throws(
    () => new ResilientClient({ retry: { maxAttempts: 0 } }, { providers: [up] }),
    (e) => e instanceof ConfigError && e instanceof LLMError && e.issues.length > 0,
  );
  const fetch = createFetch({}, { providers: [up] });
  const r = await fetch("https://resilient.invalid/v1/messages", {
    method: "POST",
    headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ model: "default", max_tokens: 16, messages: [{ role: "user", content: "via fetch" }] }),
  });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).content[0].text, "up: via fetch");
  assert.equal(typeof createResilient({ client }), "function");
  console.log("packed cjs: ok");
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
