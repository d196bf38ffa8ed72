// Cost in the npm package: a JS provider's reported usage at `cost.prices`, exact in
// `result.cost` and `client.costs()`; no usage, no cost (null, never zero); a route's daily
// budget (counted per client here) rejecting once spent, and a request that may cost more than
// is left; `cheapest` ordering.
import assert from "node:assert/strict";
import { test } from "node:test";

import m, { scripted, user } from "./pkg.mjs";

const { ResilientClient, ClientRequestError } = m;

/** A JS provider that reports `usage` with every answer. */
const metered = (name, usage) => ({
  name,
  calls: 0,
  async chat(request) {
    this.calls++;
    return { text: `from ${name}`, model: request.model, usage };
  },
});

const llama = { inputPerMtok: 0.5, outputPerMtok: 1.5, cachedInputPerMtok: 0.05 };
// Prices name known providers only.
const prices = { "local/llama": llama };

test("result.cost is the reported usage at the configured prices, exactly", async () => {
  const local = metered("local", { inputTokens: 1000, outputTokens: 500, cachedInputTokens: 200 });
  const client = new ResilientClient(
    { routes: { default: [{ provider: "local", model: "llama" }] }, cost: { prices } },
    { providers: [local] },
  );
  // 800 × $0.50 + 200 × $0.05 + 500 × $1.50 per million: 400 + 10 + 750 µ$.
  const r = await client.chat(user("hi"));
  assert.deepEqual(r.cost, { totalUsd: 0.00116, answerUsd: 0.00116 });
  await client.chat(user("again"));
  assert.deepEqual(client.costs(), {
    costs: [{ provider: "local", model: "llama", usd: 0.00232, attempts: 2 }],
    spend: [],
  });
});

test("no reported usage is no cost: null, never zero", async () => {
  const client = new ResilientClient(
    { routes: { default: [{ provider: "local", model: "llama" }] }, cost: { prices } },
    { providers: [scripted("local", ["no usage here"])] },
  );
  const r = await client.chat(user("hi"));
  assert.equal(r.cost, null);
  assert.deepEqual(client.costs().costs, []);
});

test("a spent daily budget rejects with spend_cap_reached (429)", async () => {
  const local = metered("local", { inputTokens: 1000, outputTokens: 500 });
  const client = new ResilientClient(
    {
      routes: { default: [{ provider: "local", model: "llama" }] },
      cost: { prices, routes: { default: { dailyBudgetUsd: 0.001 } } },
    },
    { providers: [local] },
  );
  // Held before it goes at 1 input token and 500 output ($0.0007505): it fits; it reports
  // more input than estimated and costs $0.00125.
  const ask = { ...user("hi"), maxTokens: 500 };
  assert.equal((await client.chat(ask)).text, "from local");
  const [spend] = client.costs().spend;
  assert.equal(spend.route, "default");
  assert.equal(spend.exhausted, true);
  assert.equal(spend.spentUsd, 0.00125);
  await assert.rejects(client.chat(ask), (e) =>
    e instanceof ClientRequestError && e.kind === "spend_cap_reached" && e.status === 429 &&
    /route "default" has spent its daily budget of \$0\.001/.test(e.message));
  assert.equal(local.calls, 1, "no call once spent");
});

test("a request that may cost more than the budget has left is refused before it goes", async () => {
  const local = metered("local", { inputTokens: 1, outputTokens: 1 });
  const client = new ResilientClient(
    {
      routes: { default: [{ provider: "local", model: "llama" }] },
      cost: { prices, routes: { default: { dailyBudgetUsd: 0.001 } } },
    },
    { providers: [local] },
  );
  // Without maxTokens it may write 4096 tokens: $0.0061445 held, over the $0.001 budget.
  await assert.rejects(client.chat(user("hi")), (e) => e.kind === "spend_cap_reached" && e.status === 429);
  assert.equal(local.calls, 0);
  assert.equal((await client.chat({ ...user("hi"), maxTokens: 100 })).text, "from local");
});

test("cheapest asks the entry expected to cost least first", async () => {
  const big = metered("big", { inputTokens: 10, outputTokens: 10 });
  const local = metered("local", { inputTokens: 10, outputTokens: 10 });
  const client = new ResilientClient(
    {
      routes: { default: [{ provider: "big", model: "frontier" }, { provider: "local", model: "llama" }] },
      cost: {
        prices: { ...prices, "big/frontier": { inputPerMtok: 5, outputPerMtok: 25 } },
        routes: { default: { strategy: "cheapest" } },
      },
    },
    { providers: [big, local] },
  );
  const r = await client.chat(user("hi"));
  assert.equal(r.provider, "local");
  assert.equal(big.calls, 0);
});

test("cost settings are checked at construction, with their paths", () => {
  assert.throws(
    () => new ResilientClient({ cost: { routes: { nowhere: { strategy: "cheapest" } } } }, { providers: [scripted("a", ["x"])] }),
    (e) => e.issues.some((i) => i.path === "cost.routes.nowhere"),
  );
});
