// End to end: keys stay out of answers and logs, and the limits answer in the client's
// format, through the built Worker in workerd (Miniflare) in front of the mock provider. Build
// first (scripts/test-worker.sh does): build/index.js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GATEWAY_KEY, MOCK_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";
import { maskedKey } from "./mock-echo.mjs";

async function post(gw, path, body, headers = {}) {
  const res = await gw.fetch(0, `http://gateway${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

const hi = [{ role: "user", content: "hi" }];

describe("keys and limits through the edge", { timeout: 120000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({
      config: { providers: { "echo-o": { faults: [{ mode: "echo-key" }] }, "echo-a": { faults: [{ mode: "echo-key", status: 500 }] } } },
    });
    gw = await startGateway(
      gatewayConfig(mock, {
        providers: { "echo-o": "openai", "echo-a": "anthropic" },
        routes: { default: [{ provider: "echo-o", model: "m" }], claude: [{ provider: "echo-a", model: "m" }] },
        retry: { maxAttempts: 1 },
      }),
    );
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("an upstream error quoting the key, whole or masked, reaches neither client nor log", async () => {
    const answers = [
      await post(gw, "/v1/chat/completions", { model: "default", messages: hi }),
      await post(gw, "/v1/messages", { model: "claude", max_tokens: 5, messages: hi }),
      await post(gw, "/v1/chat/completions", { model: "claude", stream: true, messages: hi }),
    ];
    // The mock did quote it: the key it was sent.
    assert.ok(mock.received("echo-o").length >= 1 && mock.received("echo-a").length >= 2);
    for (const a of answers) {
      assert.ok(a.status >= 500, a.text);
      assert.match(a.text, /Incorrect API key provided: \*\*\*/, a.text);
      assert.ok(!a.text.includes(MOCK_KEY) && !a.text.includes(maskedKey(MOCK_KEY)), a.text);
    }
    assert.ok(gw.logs.length > 0, "the gateway logged");
    for (const line of gw.logs) assert.ok(!line.includes(MOCK_KEY) && !line.includes(maskedKey(MOCK_KEY)), line);
  });

  test("limits answer 400/413 in the client's format, before any upstream call", async () => {
    const before = mock.received("echo-o").length;
    const deep = `{"model":"default","messages":${"[".repeat(200)}${"]".repeat(200)}}`;
    const cases = [
      ["/v1/chat/completions", deep, {}, 400],
      ["/v1/messages", JSON.stringify({ model: "x".repeat(300), max_tokens: 5, messages: hi }), {}, 400],
      ["/v1/messages", JSON.stringify({ model: "claude", max_tokens: 5, messages: hi }), { "anthropic-beta": "b".repeat(9000) }, 400],
      ["/v1/chat/completions", JSON.stringify({ model: "default", messages: hi, pad: "p".repeat(70 * 1024) }), {}, 413],
    ];
    for (const [path, body, headers, status] of cases) {
      const a = await post(gw, path, body, headers);
      assert.equal(a.status, status, a.text);
      const json = JSON.parse(a.text);
      if (path === "/v1/messages") assert.equal(json.type, "error", a.text);
      else assert.equal(typeof json.error.message, "string", a.text);
      assert.ok(!a.text.includes("bbbbbbbb"), "an oversized header is not echoed");
    }
    assert.equal(mock.received("echo-o").length, before);
  });
});
