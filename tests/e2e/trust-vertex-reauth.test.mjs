// End to end: a Vertex AI token revoked before it expires, through the built Worker in workerd
// (Miniflare) in front of the mock's Vertex AI (tests/e2e/mock-vertex.mjs, whose token endpoint
// checks the RS256 JWT and whose model endpoints answer 401 to a revoked token). The 401 drops
// the cached token, one new token is fetched and the call sent again: the client sees a 200,
// the breaker counts nothing, and later calls use the new token.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

function keyFile(mock) {
  const key = JSON.parse(readFileSync(new URL("../fixtures/vertex/service-account.json", import.meta.url), "utf8"));
  return JSON.stringify({ ...key, token_uri: mock.vertex.tokenUri });
}

describe("a revoked Vertex AI token", { timeout: 120000 }, () => {
  let mock, gw, openai;
  before(async () => {
    mock = await startMock({ config: { providers: { gemini: {} } } });
    const config = gatewayConfig(mock, {
      providers: {},
      routes: { gemini: [{ provider: "gemini", model: "gemini-2.5-flash" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 1, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.providers.gemini = { kind: "vertex", publisher: "google", project: "test-project", region: "us-east5",
      baseUrl: mock.vertex.baseUrl("gemini"), serviceAccountKeyEnv: "VERTEX_SA_KEY" };
    gw = await startGateway(config, { bindings: { VERTEX_SA_KEY: keyFile(mock) } });
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  const ask = () => openai.chat.completions.create({ model: "gemini", messages: [{ role: "user", content: "hi" }] });

  test("is renewed once on the model's 401 and the call answered", async () => {
    await ask();
    assert.equal(mock.vertex.tokenStats().issued, 1);
    mock.vertex.revokeTokens();
    // failureThreshold 1: had the 401 counted, the next call would find the breaker open.
    const r = await ask();
    assert.ok(r.choices[0].message.content.length > 0);
    assert.equal(mock.vertex.tokenStats().issued, 2, "one renewal");
    for (let i = 0; i < 3; i += 1) await ask();
    assert.equal(mock.vertex.tokenStats().issued, 2, "the new token serves what follows");
    const health = await (await gw.fetch(0, "http://gateway/health", { headers: { authorization: `Bearer ${GATEWAY_KEY}` } })).json();
    assert.ok(JSON.stringify(health).includes('"closed"'), JSON.stringify(health));
  });
});
