// The built package's endpoints besides chat, against the mock provider on 127.0.0.1:
// client.embeddings and client.countTokens with failover, and the official SDKs' embeddings,
// count_tokens and model lists over client.fetch.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

import m from "./pkg.mjs";
import { startMock } from "../e2e/mock-provider.mjs";

const { ResilientClient, ClientRequestError, AllProvidersFailedError, ConfigError } = m;
const SMALL = { family: "text-embedding-3-small", dimensions: 8 };
let mock, client;

before(async () => {
  mock = await startMock({ port: 0, config: { providers: {
    "emb-a": { faults: [{ mode: "status", status: 529 }] },
    "ant-a": { faults: [{ mode: "status", status: 529 }] },
  } } });
  const openai = (name) => ({ kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl(name) });
  const anthropic = (name) => ({ kind: "anthropic", baseUrl: mock.providerUrl(name), apiKey: "test-key" });
  client = new ResilientClient({
    providers: { "emb-a": openai("emb-a"), "emb-b": openai("emb-b"), "ant-a": anthropic("ant-a"), "ant-b": anthropic("ant-b") },
    routes: {
      embed: [{ provider: "emb-a", model: "small-a", embeddings: SMALL }, { provider: "emb-b", model: "small-b", embeddings: SMALL }],
      claude: [{ provider: "ant-a", model: "claude-a" }, { provider: "ant-b", model: "claude-b" }],
    },
    retry: { maxAttempts: 1 },
  });
});

after(async () => {
  client?.free();
  await mock?.close();
});

test("client.embeddings fails over on a 529 within the family; vectors in input order", async () => {
  const res = await client.embeddings({ model: "embed", input: ["one two", "three"], dimensions: 4 });
  assert.deepEqual(res.servedBy, { provider: "emb-b", model: "small-b", label: null });
  assert.deepEqual(res.attempts.map((a) => [a.provider, a.ok]), [["emb-a", false], ["emb-b", true]]);
  assert.equal(res.embeddings.length, 2);
  assert.equal(res.embeddings[0].length, 4);
  assert.deepEqual(res.usage, { prompt_tokens: 3, total_tokens: 3 });
  assert.equal(res.model, "small-b");
  assert.equal(res.raw.object, "list");
  const b64 = await client.embeddings({ model: "embed", input: "one", encoding_format: "base64" });
  assert.equal(typeof b64.embeddings[0], "string");
});

test("client.embeddings refuses bad input and chat routes", async () => {
  await assert.rejects(client.embeddings({ model: "embed", input: [] }),
    (e) => e instanceof ClientRequestError && /input/.test(e.message));
  await assert.rejects(client.embeddings({ model: "claude", input: "a" }),
    (e) => e instanceof ClientRequestError && /not an embeddings route/.test(e.message));
  assert.throws(() => new ResilientClient({
    providers: { a: { kind: "anthropic", apiKey: "k" } },
    routes: { e: [{ provider: "a", model: "m", embeddings: SMALL }] },
  }), (e) => e instanceof ConfigError && e.issues.some((i) => i.path === "routes.e[0].provider"));
});

test("client.countTokens fails over on a 529", async () => {
  const res = await client.countTokens({ model: "claude", system: "be brief", messages: [{ role: "user", content: "a b c" }] });
  assert.equal(res.inputTokens, 5);
  assert.equal(res.servedBy.provider, "ant-b");
  assert.deepEqual(res.raw, { input_tokens: 5 });
  const only = new ResilientClient({ providers: { "ant-a": { kind: "anthropic", baseUrl: mock.providerUrl("ant-a"), apiKey: "k" } },
    routes: { c: [{ provider: "ant-a", model: "c" }] }, retry: { maxAttempts: 1 } });
  await assert.rejects(only.countTokens({ model: "c", messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof AllProvidersFailedError && e.status === 529);
  only.free();
});

test("the official SDKs over client.fetch: embeddings, count_tokens, model lists", async () => {
  const openai = new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch: client.fetch, maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: "https://resilient.invalid", apiKey: "unused", fetch: client.fetch, maxRetries: 0 });
  const e = await openai.embeddings.create({ model: "embed", input: "hello" });
  assert.equal(e.data[0].embedding.length, 8);
  const c = await anthropic.messages.countTokens({ model: "claude", messages: [{ role: "user", content: "a b" }] });
  assert.equal(c.input_tokens, 2);
  const ids = [];
  for await (const model of openai.models.list()) ids.push(model.id);
  assert.deepEqual(ids, ["claude", "embed"]);
  const a = [];
  for await (const model of anthropic.models.list()) a.push(model.type);
  assert.deepEqual(a, ["model", "model"]);
});
