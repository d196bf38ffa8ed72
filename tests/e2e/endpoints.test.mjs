// The endpoints besides chat through the built Worker in workerd, with the official clients:
// embeddings failed over on a 529 to a second entry of the same model family, count_tokens
// sent past a provider that does not serve it and failed over the same way, model lists in
// both formats. Node's `openai` and `@anthropic-ai/sdk` here; then the Python `openai` and
// `anthropic` packages run tests/e2e/python/test_endpoints.py against the same set-up.
// Build first (scripts/test-worker.sh does): build/index.js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, MOCK_KEY, startGateway, startMock } from "./gateway-harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PY_TIMEOUT_MS = 120_000;
const tools = process.env.RESILIENT_LLM_TOOLS
  ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "resilient-llm/tools");
const python = process.env.RESILIENT_LLM_PYTHON ?? path.join(tools, "venv-py/bin/python");
const SMALL = { family: "text-embedding-3-small", dimensions: 8 };
const OVERLOADED = [{ mode: "status", status: 529 }];

let mock, gw, openai, anthropic;

before(async () => {
  // emb-a and ant-a are always overloaded: every call there fails over.
  mock = await startMock({ config: { providers: { "emb-a": { faults: OVERLOADED }, "ant-a": { faults: OVERLOADED } } } });
  const config = gatewayConfig(mock, {
    providers: { "emb-a": "openai", "emb-b": "openai", oai: "openai", "ant-a": "anthropic", "ant-b": "anthropic" },
    routes: {
      embed: [
        { provider: "emb-a", model: "text-embedding-3-small", embeddings: SMALL },
        { provider: "emb-b", model: "small-b", embeddings: SMALL },
      ],
      // OpenAI counts no tokens: count_tokens skips oai, fails over from ant-a to ant-b.
      claude: [
        { provider: "oai", model: "gpt-mock" },
        { provider: "ant-a", model: "claude-a" },
        { provider: "ant-b", model: "claude-b" },
      ],
      gpt: [{ provider: "oai", model: "gpt-mock" }],
    },
    retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 200 },
    // Never opens: each request meets the 529 itself.
    breaker: { failureThreshold: 1000, cooldownMs: 60000, maxCooldownMs: 60000 },
  });
  try {
    gw = await startGateway(config);
  } catch (err) {
    await mock.close();
    throw err;
  }
  openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
});

after(async () => {
  await gw?.close();
  await mock?.close();
});

const received = (name) => mock.received(name);
const statusCount = (name, status) => mock.stats(name).byStatus?.[String(status)] ?? 0;

/** The mock's own answer to `body`, asked of it directly (its vectors depend on the input only). */
async function direct(body) {
  const res = await fetch(`${mock.providerUrl("direct")}/v1/embeddings`, {
    method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${MOCK_KEY}` }, body: JSON.stringify(body),
  });
  return res.json();
}

describe("POST /v1/embeddings", () => {
  test("openai embeddings.create fails over on a 529 to the second entry of the family", async () => {
    const before529 = statusCount("emb-a", 529);
    const { data, response } = await openai.embeddings.create({ model: "embed", input: ["hello world", "x"] }).withResponse();
    assert.equal(response.headers.get("x-served-by"), "emb-b/small-b");
    assert.equal(response.headers.get("x-attempts"), "3", "two at emb-a (a retry), one at emb-b");
    assert.equal(statusCount("emb-a", 529) - before529, 2);
    assert.equal(data.data.length, 2);
    assert.equal(data.data[0].embedding.length, 8);
    assert.deepEqual(data.usage, { prompt_tokens: 3, total_tokens: 3 }, "the provider's usage, as reported");
    // The SDK asked for base64 and decoded it: the same floats the mock gives as float32.
    const want = await direct({ model: "m", input: ["hello world", "x"] });
    for (const [i, d] of data.data.entries()) {
      want.data[i].embedding.forEach((x, j) => assert.ok(Math.abs(d.embedding[j] - x) < 1e-6, `vector ${i}[${j}]`));
    }
    const sent = received("emb-b").at(-1);
    assert.equal(sent.path, "/p/emb-b/v1/embeddings");
    assert.equal(sent.body.model, "small-b");
    assert.equal(sent.body.encoding_format, "base64", "passed through as the SDK sent it");
    assert.deepEqual(sent.body.input, ["hello world", "x"]);
  });

  test("float vectors, token input and dimensions pass through", async () => {
    const res = await openai.embeddings.create({ model: "embed", input: [[1, 2, 3], [4]], encoding_format: "float", dimensions: 4 });
    assert.equal(res.data.length, 2);
    assert.equal(res.data[1].embedding.length, 4);
    assert.deepEqual(received("emb-b").at(-1).body.input, [[1, 2, 3], [4]]);
    assert.equal(res.usage.prompt_tokens, 4);
  });

  test("a chat route, bad input and an unknown model: errors in OpenAI's format, nothing sent", async () => {
    const before = mock.stats("oai").total;
    await assert.rejects(openai.embeddings.create({ model: "gpt", input: "a" }),
      (e) => e instanceof OpenAI.BadRequestError && /not an embeddings route/.test(e.message));
    await assert.rejects(openai.embeddings.create({ model: "embed", input: [] }),
      (e) => e instanceof OpenAI.BadRequestError && /input/.test(e.message));
    await assert.rejects(openai.embeddings.create({ model: "nope", input: "a" }), (e) => e instanceof OpenAI.NotFoundError);
    assert.equal(mock.stats("oai").total, before);
  });
});

describe("POST /v1/messages/count_tokens", () => {
  test("anthropic messages.countTokens skips a provider without it and fails over on a 529", async () => {
    const beforeOai = mock.stats("oai").total;
    const before529 = statusCount("ant-a", 529);
    const { data, response } = await anthropic.messages.countTokens({
      model: "claude", system: "be brief", messages: [{ role: "user", content: "hello there world" }],
    }).withResponse();
    assert.deepEqual(data, { input_tokens: 5 });
    assert.equal(response.headers.get("x-served-by"), "ant-b/claude-b");
    assert.equal(mock.stats("oai").total, beforeOai, "OpenAI was not asked");
    assert.equal(statusCount("ant-a", 529) - before529, 2);
    const sent = received("ant-b").at(-1);
    assert.equal(sent.path, "/p/ant-b/v1/messages/count_tokens");
    assert.equal(sent.body.model, "claude-b");
    assert.equal(sent.headers["anthropic-version"], "2023-06-01");
  });

  test("a route without a provider that counts: an Anthropic error", async () => {
    await assert.rejects(anthropic.messages.countTokens({ model: "gpt", messages: [{ role: "user", content: "hi" }] }),
      (e) => e instanceof Anthropic.BadRequestError && e.error?.type === "error" && /count_tokens/.test(e.message));
  });
});

describe("GET /v1/models", () => {
  test("openai models.list and retrieve", async () => {
    const ids = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ["claude", "embed", "gpt"]);
    const m = await openai.models.retrieve("embed");
    assert.equal(m.object, "model");
    assert.deepEqual(m.entries, ["emb-a/text-embedding-3-small", "emb-b/small-b"]);
    assert.deepEqual(m.embeddings, SMALL);
    await assert.rejects(openai.models.retrieve("nope"), (e) => e instanceof OpenAI.NotFoundError);
  });

  test("anthropic models.list and retrieve, in Anthropic's shape", async () => {
    const ids = [];
    for await (const m of anthropic.models.list()) {
      assert.equal(m.type, "model");
      ids.push(m.id);
    }
    assert.deepEqual(ids, ["claude", "embed", "gpt"]);
    const m = await anthropic.models.retrieve("claude");
    assert.equal(m.display_name, "claude");
    assert.equal(m.type, "model");
    const text = JSON.stringify(await (await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${GATEWAY_KEY}` } })).json());
    assert.ok(!text.includes(MOCK_KEY) && !text.includes("127.0.0.1"), "no key, no upstream URL");
  });
});

test("the official Python openai and anthropic SDKs (tests/e2e/python/test_endpoints.py)", { timeout: PY_TIMEOUT_MS + 10_000 }, async () => {
  assert.ok(existsSync(python), `${python} is missing: run scripts/setup-python.sh`);
  const child = spawn(python, ["-m", "unittest", "-v", "test_endpoints"], {
    cwd: path.join(HERE, "python"),
    env: { ...process.env, GATEWAY_URL: gw.url, GATEWAY_KEY, MOCK_URL: mock.url, PYTHONDONTWRITEBYTECODE: "1" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), PY_TIMEOUT_MS);
  const [code, signal] = await new Promise((resolve) => child.once("exit", (c, s) => resolve([c, s])));
  clearTimeout(timer);
  assert.equal(signal, null, `python was stopped after ${PY_TIMEOUT_MS} ms`);
  assert.equal(code, 0, "a Python test failed (its report is above)");
});
