// The response cache through the built Worker in workerd (Miniflare: its Cache API is the
// data centre's `caches.default`), with the official Node SDKs as clients and the mock
// provider counting the calls that reach it: a miss then a hit (one call), `no-cache`, a
// stream replayed from a whole answer and from a stream, the stale answer served with its
// header when every entry fails, and under scope `client` a second client never served the
// first one's answer; a second isolate is served what the first stored. Build first (scripts/test-worker.sh does): build/index.js.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const SECOND_KEY = "e2e-client-key-two";
const TTL_S = 2;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Writes to the cache go out in the background (`waitUntil`), after the answer.
const settle = () => sleep(300);
const user = (content) => [{ role: "user", content }];

async function readStream(stream) {
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  return text;
}

describe("the response cache through the Worker, official SDKs", { timeout: 120000 }, () => {
  let mock, gw, openai, other, anthropic;
  const calls = () => mock.received("p").length;
  before(async () => {
    mock = await startMock({ config: { providers: { p: {} } } });
    const config = gatewayConfig(mock, {
      providers: { p: "openai" },
      routes: { mine: [{ provider: "p", model: "gpt" }], ours: [{ provider: "p", model: "gpt" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 100, cooldownMs: 1000, maxCooldownMs: 1000 },
    });
    config.gateway = { clientKeysEnv: ["GATEWAY_KEY", "SECOND_KEY"] };
    config.cache = {
      mine: { ttlSeconds: TTL_S, staleIfErrorSeconds: 600 },
      ours: { ttlSeconds: 600, scope: "shared" },
    };
    gw = await startGateway(config, { bindings: { SECOND_KEY }, isolates: 2 });
    const client = (apiKey) => new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    openai = client(GATEWAY_KEY);
    other = client(SECOND_KEY);
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });
  beforeEach(() => {
    mock.clearReceived();
    mock.setFault("p", { faults: [] });
  });

  test("a miss, then a hit: the provider is called once", async () => {
    const ask = { model: "ours", messages: user("miss then hit"), temperature: 0 };
    const first = await openai.chat.completions.create(ask).withResponse();
    assert.equal(first.response.headers.get("x-cache"), "miss");
    await settle();
    const second = await openai.chat.completions.create(ask).withResponse();
    assert.equal(second.response.headers.get("x-cache"), "hit");
    assert.match(second.response.headers.get("age"), /^\d+$/);
    assert.equal(second.response.headers.get("x-attempts"), "0");
    assert.equal(calls(), 1, "one call reached the provider");
    assert.deepEqual(second.data, first.data, "the answer as it came");

    // The data centre's cache, not the isolate's memory: another isolate is served it too.
    const res = await gw.fetch(1, "http://gateway/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
      body: JSON.stringify(ask),
    });
    assert.equal(res.headers.get("x-cache"), "hit", "served from caches.default");
    assert.deepEqual(await res.json(), first.data);
    assert.equal(calls(), 1);

    // The same question in another client format is another entry.
    const m = await anthropic.messages.create({ model: "ours", max_tokens: 64, messages: user("miss then hit"), temperature: 0 }).withResponse();
    assert.equal(m.response.headers.get("x-cache"), "miss");
    assert.equal(calls(), 2);
  });

  test("no-cache asks the provider again; no-store keeps nothing", async () => {
    const ask = { model: "ours", messages: user("controls") };
    await openai.chat.completions.create(ask, { headers: { "cache-control": "no-store" } });
    await settle();
    const again = await openai.chat.completions.create(ask).withResponse();
    assert.equal(again.response.headers.get("x-cache"), "miss", "no-store kept nothing");
    await settle();
    const skipped = await openai.chat.completions.create(ask, { headers: { "cache-control": "no-cache" } }).withResponse();
    assert.equal(skipped.response.headers.get("x-cache"), "bypass");
    assert.equal(calls(), 3);
    const hit = await openai.chat.completions.create(ask).withResponse();
    assert.equal(hit.response.headers.get("x-cache"), "hit");
    assert.equal(calls(), 3);
  });

  test("a stream replayed from a whole answer and from a stream", async () => {
    const whole = { model: "ours", messages: user("whole first") };
    const answer = await openai.chat.completions.create(whole);
    await settle();
    const replay = await openai.chat.completions.create({ ...whole, stream: true }).withResponse();
    assert.equal(replay.response.headers.get("x-cache"), "hit");
    assert.equal(await readStream(replay.data), answer.choices[0].message.content);
    assert.equal(calls(), 1);

    const streamed = { model: "ours", messages: user("stream first"), stream: true, stream_options: { include_usage: true } };
    const said = await readStream(await openai.chat.completions.create(streamed));
    await settle();
    const again = await openai.chat.completions.create(streamed).withResponse();
    assert.equal(again.response.headers.get("x-cache"), "hit");
    assert.equal(await readStream(again.data), said);
    const asWhole = await openai.chat.completions.create({ model: "ours", messages: user("stream first") });
    assert.equal(asWhole.choices[0].message.content, said);
    assert.equal(calls(), 2, "one call for each question");
  });

  test("every entry failing: the stale answer with its header, and never after no-cache", async () => {
    const ask = { model: "mine", messages: user("stale if error") };
    const fresh = await openai.chat.completions.create(ask);
    await sleep(TTL_S * 1000 + 300);
    mock.setFault("p", { faults: [{ mode: "status", status: 503 }] });
    const stale = await openai.chat.completions.create(ask).withResponse();
    assert.equal(stale.response.headers.get("x-cache"), "stale");
    assert.ok(Number(stale.response.headers.get("age")) >= TTL_S);
    assert.equal(stale.data.choices[0].message.content, fresh.choices[0].message.content);
    assert.equal(calls(), 2, "asked, and failed, before serving stale");

    const streamed = await openai.chat.completions.create({ ...ask, stream: true }).withResponse();
    assert.equal(streamed.response.headers.get("x-cache"), "stale");
    assert.equal(await readStream(streamed.data), fresh.choices[0].message.content);

    await assert.rejects(
      openai.chat.completions.create(ask, { headers: { "cache-control": "no-cache" } }),
      (e) => e.status === 503,
    );
  });

  test("scope client: a second client is not served the first one's answer", async () => {
    const ask = { model: "mine", messages: user("whose answer?") };
    await openai.chat.completions.create(ask);
    await settle();
    const mineAgain = await openai.chat.completions.create(ask).withResponse();
    assert.equal(mineAgain.response.headers.get("x-cache"), "hit");
    const theirs = await other.chat.completions.create(ask).withResponse();
    assert.equal(theirs.response.headers.get("x-cache"), "miss");
    assert.equal(calls(), 2);
  });
});
