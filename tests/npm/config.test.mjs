// Configuration as a new user writes it: a `baseUrl` copied from a provider's docs (with its
// `/v1`), and a configuration that could call nothing. The provider is the mock provider
// server (127.0.0.1, free port).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m, { user } from "./pkg.mjs";

const { ResilientClient, ConfigError } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

test("a baseUrl ending in /v1, as the OpenAI SDK and the providers' docs write it, is called", async () => {
  await mock.reset();
  const client = new ResilientClient({
    providers: {
      // The mock answers OpenAI at <url>/v1/chat/completions, Anthropic at <url>/v1/messages.
      vllm: { kind: "openai-compatible", preset: "vllm", baseUrl: `${mock.providerUrl("vllm")}/v1` },
      claude: { kind: "anthropic", baseUrl: `${mock.providerUrl("claude")}/v1/`, apiKey: "test-key" },
    },
    routes: { vllm: [{ provider: "vllm", model: "m" }], claude: [{ provider: "claude", model: "m" }] },
    retry: { maxAttempts: 1 },
  });
  for (const route of ["vllm", "claude"]) {
    const res = await client.chat(user("hi"), { route });
    assert.equal(res.text, `[${route}] echo: hi`);
    assert.equal(res.attempts.length, 1, "no 404, no failover");
  }
});

test("providers but no route: a ConfigError at routes that shows how to write one", () => {
  assert.throws(
    () => new ResilientClient({ providers: { openai: { kind: "openai", apiKey: "sk-test" } } }),
    (e) =>
      e instanceof ConfigError &&
      e.issues.length === 1 &&
      e.issues[0].path === "routes" &&
      e.issues[0].message.includes('"provider": "openai"'),
  );
  // A listed model is a route of its own; allowAnyModel reaches `provider/model`.
  new ResilientClient({ providers: { openai: { kind: "openai", apiKey: "sk-test", models: { "gpt-4o": {} } } } });
  new ResilientClient({ providers: { openai: { kind: "openai", apiKey: "sk-test" } }, allowAnyModel: true });
});
