// The mock provider's rate-limit pool (mock-pool.mjs): counts down in each format's headers,
// refuses with a 429 and retry-after when empty, fills again after its window; over HTTP too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { duration, newPool, poolProblem, take } from "./mock-pool.mjs";
import { startMock } from "./mock-provider.mjs";

const ask = (maxTokens) => ({ model: "m", max_tokens: maxTokens, messages: [{ role: "user", content: "hi" }] });

test("a pool counts requests and tokens down in OpenAI's headers and fills after its window", () => {
  const pool = newPool({ requests: 2, tokens: 1000, windowMs: 1500 });
  const first = take(pool, ask(100), "openai", 0);
  assert.equal(first.ok, true);
  assert.equal(first.headers["x-ratelimit-limit-requests"], "2");
  assert.equal(first.headers["x-ratelimit-remaining-requests"], "1");
  assert.equal(first.headers["x-ratelimit-reset-requests"], "1.5s");
  const spent = 1000 - Number(first.headers["x-ratelimit-remaining-tokens"]);
  assert.ok(spent > 100 && spent < 120, `max_tokens plus a small input: ${spent}`);
  assert.equal(take(pool, ask(100), "openai", 500).headers["x-ratelimit-reset-tokens"], "1s");
  const refused = take(pool, ask(100), "openai", 1000);
  assert.equal(refused.ok, false);
  assert.equal(refused.headers["x-ratelimit-remaining-requests"], "0");
  assert.equal(refused.headers["retry-after"], "1");
  assert.equal(take(pool, ask(100), "openai", 1500).ok, true, "full again");
});

test("a pool speaks Anthropic's headers to the Messages format and refuses on tokens", () => {
  const pool = newPool({ tokens: 300 });
  const t0 = Date.UTC(2026, 11, 3, 10, 0, 0);
  const first = take(pool, ask(200), "anthropic", t0);
  assert.equal(first.ok, true);
  assert.equal(first.headers["anthropic-ratelimit-tokens-limit"], "300");
  assert.equal(first.headers["anthropic-ratelimit-tokens-reset"], "2026-12-03T10:01:00.000Z");
  assert.equal(first.headers["anthropic-ratelimit-requests-limit"], undefined, "no requests pool");
  const refused = take(pool, ask(200), "anthropic", t0 + 1000);
  assert.equal(refused.ok, false);
  assert.equal(refused.headers["retry-after"], "59");
});

test("durations read as OpenAI writes them, and bad settings are named", () => {
  assert.deepEqual([duration(250), duration(1500), duration(360000), duration(61250)], ["250ms", "1.5s", "6m0s", "1m1.25s"]);
  assert.equal(poolProblem(undefined), null);
  assert.match(poolProblem({}), /requests, tokens or both/);
  assert.match(poolProblem({ requests: 0 }), /requests: must be/);
  assert.match(poolProblem({ requests: 1, perDay: 2 }), /perDay: unknown/);
});

test("over HTTP: headers on every answer, a 429 when empty, counted", async () => {
  const mock = await startMock({ config: { providers: { p: { pool: { requests: 1 } } } } });
  try {
    const post = () => fetch(`${mock.providerUrl("p")}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(ask(5)),
    });
    const ok = await post();
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("x-ratelimit-remaining-requests"), "0");
    await ok.arrayBuffer();
    const no = await post();
    assert.equal(no.status, 429);
    assert.ok(Number(no.headers.get("retry-after")) >= 59);
    assert.equal((await no.json()).error.code, "rate_limit_exceeded");
    assert.equal(mock.stats("p").poolRefused, 1);
  } finally {
    await mock.close();
  }
});
