// The chain the resellers exist for: one Claude model behind Anthropic, AWS Bedrock and Google
// Vertex AI, three rate-limit pools. Through the built Worker in workerd, the official Anthropic
// SDK asks the route `claude` = [anthropic, bedrock us-east-1, vertex us-east5] while each
// upstream is broken and healed in turn; every step is checked by who served it (x-served-by)
// and by the calls each counted at the mock, whole and streamed. Everything on 127.0.0.1.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const ON_BEDROCK = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const ON_VERTEX = "claude-sonnet-4-5@20250929";
const SERVED = { anthropic: "anthropic/claude-sonnet-4-5", bedrock: `bedrock/${ON_BEDROCK}`, vertex: `vertex/${ON_VERTEX}` };

function keyFile(mock) {
  const key = JSON.parse(readFileSync(new URL("../fixtures/vertex/service-account.json", import.meta.url), "utf8"));
  return JSON.stringify({ ...key, token_uri: mock.vertex.tokenUri });
}

async function whole(client, content) {
  const { data, response } = await client.messages
    .create({ model: "claude", max_tokens: 64, messages: [{ role: "user", content }] })
    .withResponse();
  return { text: data.content.map((b) => b.text ?? "").join(""), servedBy: response.headers.get("x-served-by"), usage: data.usage };
}

async function streamed(client, content) {
  const { data: stream, response } = await client.messages
    .create({ model: "claude", max_tokens: 64, stream: true, messages: [{ role: "user", content }] })
    .withResponse();
  let text = "";
  let stop = null;
  for await (const ev of stream) {
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type === "message_delta") stop = ev.delta.stop_reason;
  }
  return { text, stop, servedBy: response.headers.get("x-served-by") };
}

describe("one model behind three resellers", { timeout: 180000 }, () => {
  let mock, gw, client;
  const calls = () => ({ anthropic: mock.stats("anthropic").total, bedrock: mock.stats("bedrock").total, vertex: mock.stats("vertex").total });

  before(async () => {
    mock = await startMock({ config: { providers: { anthropic: {}, bedrock: {}, vertex: {} } } });
    const config = gatewayConfig(mock, {
      providers: { anthropic: "anthropic", bedrock: { kind: "bedrock", region: "us-east-1" } },
      routes: {
        claude: [
          { provider: "anthropic", model: "claude-sonnet-4-5" },
          { provider: "bedrock", model: ON_BEDROCK },
          { provider: "vertex", model: ON_VERTEX },
        ],
      },
      retry: { maxAttempts: 1 },
      // The breakers stay closed: each heal shows at the next request.
      breaker: { failureThreshold: 100, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.providers.vertex = { kind: "vertex", publisher: "anthropic", project: "test-project", region: "us-east5",
      baseUrl: mock.vertex.baseUrl("vertex"), serviceAccountKeyEnv: "VERTEX_SA_KEY" };
    gw = await startGateway(config, { bindings: { VERTEX_SA_KEY: keyFile(mock) } });
    client = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  // One step: a whole and a streamed answer, both from `who`, and the calls each upstream got.
  async function step(label, who, expected) {
    const w = await whole(client, `${label} whole`);
    assert.equal(w.servedBy, SERVED[who], `${label}: whole answer served by`);
    assert.equal(w.text, `[${who}] echo: ${label} whole`);
    assert.ok(w.usage.output_tokens > 0);
    const s = await streamed(client, `${label} streamed`);
    assert.equal(s.servedBy, SERVED[who], `${label}: stream served by`);
    assert.equal(s.text, `[${who}] echo: ${label} streamed`);
    assert.equal(s.stop, "end_turn");
    assert.deepEqual(calls(), expected, `${label}: calls at the mock`);
  }

  test("fails over anthropic → bedrock → vertex as each breaks, and back as each heals", async () => {
    await step("all healthy", "anthropic", { anthropic: 2, bedrock: 0, vertex: 0 });

    mock.setFault("anthropic", { mode: "status", status: 529 });
    await step("anthropic overloaded", "bedrock", { anthropic: 4, bedrock: 2, vertex: 0 });

    mock.setFault("bedrock", { mode: "status", status: 429 });
    await step("bedrock throttled too", "vertex", { anthropic: 6, bedrock: 4, vertex: 2 });

    mock.setFault("bedrock", { faults: [] });
    await step("bedrock healed", "bedrock", { anthropic: 8, bedrock: 6, vertex: 2 });

    mock.setFault("anthropic", { faults: [] });
    await step("anthropic healed", "anthropic", { anthropic: 10, bedrock: 6, vertex: 2 });

    // Vertex was asked twice and needed one access token for both.
    assert.equal(mock.vertex.tokenStats().calls, 1);
  });
});
