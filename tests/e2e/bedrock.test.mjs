// The Worker in front of the mock's Anthropic API and its Bedrock runtime, with the official
// Anthropic SDK as the client: the route `claude` = [anthropic, bedrock] fails over to Bedrock
// (a signed InvokeModel with the Messages body) while Anthropic is broken and comes back when
// it heals, whole and streamed, counted at the mock; a Converse model answers Messages clients
// through translation. Everything on 127.0.0.1.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const PROMPT = "tell me about the three resellers";
const answer = (name) => `[${name}] echo: ${PROMPT}`;
const CLAUDE_ON_BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA = "us.amazon.nova-pro-v1:0";

async function whole(client, model) {
  const msg = await client.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: PROMPT }] });
  return { text: msg.content.filter((b) => b.type === "text").map((b) => b.text).join(""), msg };
}

async function streamed(client, model) {
  const out = { text: "", finish: null, usage: null };
  const stream = await client.messages.create({ model, max_tokens: 256, stream: true, messages: [{ role: "user", content: PROMPT }] });
  for await (const ev of stream) {
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") out.text += ev.delta.text;
    if (ev.type === "message_delta") {
      out.finish = ev.delta.stop_reason;
      out.usage = ev.usage;
    }
  }
  return out;
}

describe("AWS Bedrock behind the Worker", () => {
  let mock;
  let gw;
  let client;
  const total = (name) => mock.stats(name).total;

  before(async () => {
    mock = await startMock({ config: { providers: { anthropic: {}, bedrock: {} } } });
    const config = gatewayConfig(mock, {
      providers: { anthropic: "anthropic", bedrock: { kind: "bedrock" } },
      routes: {
        claude: [{ provider: "anthropic", model: "claude-sonnet-4-5" }, { provider: "bedrock", model: CLAUDE_ON_BEDROCK }],
        nova: [{ provider: "bedrock", model: NOVA }],
      },
      retry: { maxAttempts: 1 },
      // The breaker stays closed here: healing shows at the next request.
      breaker: { failureThreshold: 100, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    gw = await startGateway(config);
    client = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("claude fails over anthropic → bedrock while anthropic is broken, and back when healed", async () => {
    let r = await whole(client, "claude");
    assert.equal(r.text, answer("anthropic"));
    assert.deepEqual([total("anthropic"), total("bedrock")], [1, 0]);

    mock.setFault("anthropic", { faults: [{ mode: "status", status: 529 }] });
    r = await whole(client, "claude");
    assert.equal(r.text, answer("bedrock"));
    assert.deepEqual([total("anthropic"), total("bedrock")], [2, 1]);
    const s = await streamed(client, "claude");
    assert.equal(s.text, answer("bedrock"));
    assert.equal(s.finish, "end_turn");
    assert.ok(s.usage?.output_tokens > 0);
    assert.deepEqual([total("anthropic"), total("bedrock")], [3, 2]);

    // What Bedrock got: a signed InvokeModel (the mock checks the signature and answers 403
    // otherwise), the model id in the path, the Messages body without model or stream.
    const [sentWhole, sentStream] = mock.received("bedrock").slice(-2);
    assert.equal(sentWhole.path, "/bedrock/bedrock/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke");
    assert.equal(sentStream.path, "/bedrock/bedrock/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream");
    assert.equal(sentWhole.body.anthropic_version, "bedrock-2023-05-31");
    assert.equal(sentWhole.body.model, undefined);
    assert.equal(sentStream.body.stream, undefined);
    assert.deepEqual(sentWhole.body.messages, [{ role: "user", content: PROMPT }]);
    assert.equal(mock.stats("bedrock").byStatus["200"], 2);

    mock.setFault("anthropic", { faults: [] });
    r = await whole(client, "claude");
    assert.equal(r.text, answer("anthropic"));
    const healed = await streamed(client, "claude");
    assert.equal(healed.text, answer("anthropic"));
    assert.deepEqual([total("anthropic"), total("bedrock")], [5, 2]);
  });

  test("a Bedrock ThrottlingException is classified a rate limit, and the next call is served", async () => {
    mock.setFault("anthropic", { faults: [{ mode: "status", status: 503 }] });
    mock.setFault("bedrock", { faults: [{ mode: "status", status: 429, firstN: 1 }] });
    const before = total("bedrock");
    await assert.rejects(whole(client, "claude"), (e) => {
      const [first, second] = e.error.error.attempts;
      assert.equal(first.outcome.error.kind, "server");
      assert.equal(second.provider, "bedrock");
      assert.deepEqual([second.outcome.error.kind, second.outcome.error.code, second.outcome.error.status],
        ["rate_limited", "ThrottlingException", 429]);
      return e.status === 503;
    });
    assert.equal(total("bedrock"), before + 1);
    const r = await whole(client, "claude");
    assert.equal(r.text, answer("bedrock"));
    mock.setFault("anthropic", { faults: [] });
    mock.setFault("bedrock", { faults: [] });
  });

  test("the mock refuses a request not signed by the test credentials", async () => {
    const url = `${mock.url}/bedrock/bedrock/model/${encodeURIComponent(CLAUDE_ON_BEDROCK)}/invoke`;
    const body = JSON.stringify({ anthropic_version: "bedrock-2023-05-31", max_tokens: 10, messages: [{ role: "user", content: "hi" }] });
    const unsigned = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
    assert.equal(unsigned.status, 403);
    assert.match(unsigned.headers.get("x-amzn-errortype"), /^InvalidSignatureException/);
    assert.match((await unsigned.json()).message, /SigV4/);
    const forged = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json",
      "x-amz-date": new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, ""),
      authorization: `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/${new Date().toISOString().slice(0, 10).replace(/-/g, "")}/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=${"0".repeat(64)}` } });
    assert.equal(forged.status, 403);
    assert.match((await forged.json()).message, /signature we calculated does not match/);
  });

  test("a Converse model answers a Messages client, whole and streamed", async () => {
    const before = total("bedrock");
    const r = await whole(client, "nova");
    assert.equal(r.text, answer("bedrock"));
    assert.equal(r.msg.stop_reason, "end_turn");
    assert.ok(r.msg.usage.input_tokens > 0 && r.msg.usage.output_tokens > 0);
    const s = await streamed(client, "nova");
    assert.equal(s.text, answer("bedrock"));
    assert.equal(s.finish, "end_turn");
    assert.ok(s.usage?.output_tokens > 0);
    assert.equal(total("bedrock"), before + 2);
    const [sentWhole, sentStream] = mock.received("bedrock").slice(-2);
    assert.match(sentWhole.path, /\/model\/us\.amazon\.nova-pro-v1%3A0\/converse$/);
    assert.match(sentStream.path, /\/converse-stream$/);
    assert.deepEqual(sentWhole.body.messages, [{ role: "user", content: [{ text: PROMPT }] }]);
  });
});
