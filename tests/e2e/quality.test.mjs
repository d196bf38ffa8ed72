// End to end: quality escalation through the built Worker in workerd (Miniflare). A route
// wants JSON starting with an `answer`; its cheap model answers prose around something that is not JSON
// (mock-quality.mjs "invalid-json"), so the route escalates to its strong model, which answers
// JSON. The official `openai` SDK asks it whole and streamed; the mock counts what each model
// was asked, and the gateway's log line names the rejection.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

/** Picodollars as the gateway prints dollars: an exact decimal without trailing zeros. */
function usd(pico) {
  const whole = pico / 1_000_000_000_000n;
  const frac = (pico % 1_000_000_000_000n).toString().padStart(12, "0").replace(/0+$/, "");
  return frac ? `${whole}.${frac}` : `${whole}`;
}


describe("quality escalation through the edge", { timeout: 120000 }, () => {
  let mock, gw, openai;
  before(async () => {
    mock = await startMock({ config: { providers: { cheap: { quality: "invalid-json" }, strong: { quality: "json" } } } });
    const config = gatewayConfig(mock, {
      providers: {
        cheap: { kind: "openai", models: { "cheap-mini": { inputPricePerMtok: 1, outputPricePerMtok: 2 } } },
        strong: { kind: "anthropic", models: { "strong-large": { inputPricePerMtok: 3, outputPricePerMtok: 15 } } },
      },
      routes: {
        extract: [{ provider: "cheap", model: "cheap-mini" }, { provider: "strong", model: "strong-large" }],
        cheapOnly: [{ provider: "cheap", model: "cheap-mini" }],
      },
      // One failure would open a breaker: a rejected answer must not count as one.
      breaker: { failureThreshold: 1, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.quality = {
      // JSON, and its shape by regex (the `jsonSchema` validator's tests are below).
      extract: { validators: [{ kind: "json" }, { kind: "regex", pattern: '^\\{"answer":' }], maxEscalations: 1 },
      cheapOnly: { validators: [{ kind: "json" }], onExhausted: "error" },
    };
    gw = await startGateway(config);
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  const ask = (model, extra = {}) =>
    openai.chat.completions.create({ model, messages: [{ role: "user", content: "name one planet" }], ...extra }).withResponse();

  test("invalid JSON from the cheap model escalates to the strong one", async () => {
    mock.reset();
    const { data, response } = await ask("extract");
    assert.equal(response.headers.get("x-served-by"), "strong/strong-large");
    assert.equal(response.headers.get("x-attempts"), "2");
    const answer = JSON.parse(data.choices[0].message.content);
    assert.equal(answer.model, "strong-large");
    assert.equal(typeof answer.answer, "string");
    assert.deepEqual([mock.stats("cheap").total, mock.stats("strong").total], [1, 1]);
    // The cheap answer's tokens were spent for nothing, as the cheap model reported them.
    assert.match(response.headers.get("x-discarded-usage") ?? "", /^input_tokens=\d+, output_tokens=\d+$/);
    // Both answers cost, at the prices above, from the usage the mock reported: the rejected
    // cheap one (its tokens in x-discarded-usage) and the strong one, the answer's share.
    const [, spentIn, spentOut] = /^input_tokens=(\d+), output_tokens=(\d+)$/.exec(response.headers.get("x-discarded-usage"));
    const cheap = BigInt(spentIn) * 1_000_000n + BigInt(spentOut) * 2_000_000n;
    const strong = BigInt(data.usage.prompt_tokens) * 3_000_000n + BigInt(data.usage.completion_tokens) * 15_000_000n;
    assert.equal(response.headers.get("x-cost-usd-answer"), usd(strong));
    assert.equal(response.headers.get("x-cost-usd"), usd(cheap + strong));
  });

  test("a streaming client gets SSE after validation, from the strong model", async () => {
    mock.reset();
    const { data: stream, response } = await ask("extract", { stream: true });
    assert.equal(response.headers.get("x-served-by"), "strong/strong-large");
    let text = "";
    let finish = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(JSON.parse(text).model, "strong-large");
    assert.equal(finish, "stop");
    // Asked whole of both: an answer is judged complete.
    for (const name of ["cheap", "strong"]) {
      const [sent] = mock.received(name);
      assert.notEqual(sent.body.stream, true, name);
    }
  });

  test("rejections open no breaker and the log line names them", async () => {
    for (let i = 0; i < 3; i++) await ask("extract");
    const health = await (await fetch(`${gw.url}/health`, { headers: { authorization: `Bearer ${GATEWAY_KEY}` } })).json();
    const cheap = health.providers.find((p) => p.provider === "cheap");
    assert.equal(cheap.state, "closed");
    assert.equal(cheap.failures, 0);
    const lines = gw.logs.filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    const escalated = lines.filter((l) => l.route === "extract" && l.servedBy === "strong/strong-large");
    assert.ok(escalated.length >= 4, `${escalated.length} escalated lines`);
    assert.match(escalated[0].trail[0].outcome, /^rejected: json: not JSON: /);
    assert.equal(escalated[0].trail[1].outcome, "ok");
  });

  test("a route whose every answer fails answers 502 no_valid_answer in the OpenAI format", async () => {
    await assert.rejects(ask("cheapOnly"), (e) => {
      assert.equal(e.status, 502);
      assert.equal(e.code, "no_valid_answer");
      assert.match(e.message, /no answer passed the route's validators \(last: cheap\/cheap-mini: json: not JSON/);
      return true;
    });
  });
});

describe("jsonSchema through the edge", { timeout: 120000 }, () => {
  let mock, gw, openai;
  const schema = {
    type: "object",
    required: ["answer", "model"],
    properties: { answer: { type: "string" }, model: { type: "string" } },
  };
  before(async () => {
    // The cheap model answers JSON of the wrong shape: `json` would pass it, the schema does not.
    mock = await startMock({ config: { providers: { cheap: { quality: "json-no-answer" }, strong: { quality: "json" } } } });
    const config = gatewayConfig(mock, {
      providers: {
        cheap: { kind: "openai", models: { "cheap-mini": { inputPricePerMtok: 1, outputPricePerMtok: 2 } } },
        strong: { kind: "anthropic", models: { "strong-large": { inputPricePerMtok: 3, outputPricePerMtok: 15 } } },
      },
      routes: { extract: [{ provider: "cheap", model: "cheap-mini" }, { provider: "strong", model: "strong-large" }] },
    });
    config.quality = { extract: { validators: [{ kind: "jsonSchema", schema }] } };
    gw = await startGateway(config);
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("an answer that breaks the schema escalates; the trail and the cost headers say so", async () => {
    const { data, response } = await openai.chat.completions
      .create({ model: "extract", messages: [{ role: "user", content: "name one planet" }] })
      .withResponse();
    assert.equal(response.headers.get("x-served-by"), "strong/strong-large");
    assert.equal(response.headers.get("x-attempts"), "2");
    const answer = JSON.parse(data.choices[0].message.content);
    assert.equal(answer.model, "strong-large");
    assert.deepEqual([mock.stats("cheap").total, mock.stats("strong").total], [1, 1]);
    const [, spentIn, spentOut] = /^input_tokens=(\d+), output_tokens=(\d+)$/.exec(response.headers.get("x-discarded-usage") ?? "");
    const cheap = BigInt(spentIn) * 1_000_000n + BigInt(spentOut) * 2_000_000n;
    const strong = BigInt(data.usage.prompt_tokens) * 3_000_000n + BigInt(data.usage.completion_tokens) * 15_000_000n;
    assert.equal(response.headers.get("x-cost-usd-answer"), usd(strong));
    assert.equal(response.headers.get("x-cost-usd"), usd(cheap + strong));
    const lines = gw.logs.filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    const line = lines.find((l) => l.route === "extract");
    assert.ok(line, gw.logs.join("\n"));
    assert.equal(line.trail[0].outcome, "rejected: jsonSchema: at /: missing properties 'answer'");
    assert.equal(line.trail[1].outcome, "ok");
  });

  test("a schema that does not compile is a configuration error naming its place", async () => {
    const bad = gatewayConfig(mock, { providers: { cheap: "openai" }, routes: { extract: [{ provider: "cheap", model: "cheap-mini" }] } });
    bad.quality = { extract: { validators: [{ kind: "jsonSchema", schema: { properties: { answer: { type: "text" } } } }] } };
    const broken = await startGateway(bad);
    try {
      const res = await fetch(`${broken.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${GATEWAY_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "extract", messages: [{ role: "user", content: "x" }] }),
      });
      assert.equal(res.status, 500);
      const body = await res.json();
      assert.equal(body.error.code, "invalid_configuration");
      assert.match(body.error.message, /quality\.extract\.validators\[0\]\.schema\.properties\.answer\.type: not a valid JSON Schema \(draft 2020-12\)/);
    } finally {
      await broken.close();
    }
  });
});
