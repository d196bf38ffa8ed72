// Failover across two JS providers with resilient-llm, no network.
// Run: node examples/node/failover.mjs   (with the package installed as `resilient-llm`)
import { AllProvidersFailedError, ResilientClient, RateLimitError } from "resilient-llm";

// A provider written in JS: { name, chat(request, signal) }.
let calls = 0;
const flaky = {
  name: "flaky",
  async chat(request, signal) {
    calls++;
    // A real provider would `fetch(url, { signal })`; this one is rate limited.
    throw new RateLimitError("429 from flaky", { retryAfterMs: 20 });
  },
};
const steady = {
  name: "steady",
  async chat(request) {
    const last = request.messages.at(-1);
    return { text: `echo: ${last.content}`, model: request.model, usage: { inputTokens: 3, outputTokens: 2 } };
  },
};

const client = new ResilientClient(
  {
    routes: {
      default: [
        { provider: "flaky", model: "flaky-large", timeoutMs: 2000 },
        { provider: "steady", model: "steady-small" },
      ],
    },
    retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 100 },
    breaker: { failureThreshold: 2, cooldownMs: 10000 },
    deadlineMs: 5000,
  },
  {
    providers: [flaky, steady],
    onRetry: (e) => console.log(`retry ${e.provider} in ${e.delayMs} ms (${e.error.message})`),
    onFailover: (e) => console.log(`failover ${e.from} → ${e.to}`),
  },
);

const res = await client.chat({ messages: [{ role: "user", content: "hello" }] });
console.log(`${res.text} [served by ${res.servedBy.provider}/${res.servedBy.model}, ${res.attempts.length} attempts]`);

// A second call at once: flaky's 429 asked for 20 ms, so its pool is taken as empty until
// then and steady answers without flaky being asked.
const second = await client.chat({ messages: [{ role: "user", content: "again" }] });
console.log(`second call asked flaky: ${second.attempts.some((a) => a.provider === "flaky")}`);

// Past its Retry-After flaky is asked again (a retry, then the failover) and fails again: its
// breaker opens (threshold 2), and calls skip it until its cooldown ends.
await new Promise((resolve) => setTimeout(resolve, 30));
await client.chat({ messages: [{ role: "user", content: "third" }] });
console.log(client.health().map((h) => `${h.provider}: ${h.state}`).join(", "));

// When everything fails: one error listing every attempt.
const broken = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [flaky] });
try {
  await broken.chat({ messages: [{ role: "user", content: "x" }] });
} catch (e) {
  if (!(e instanceof AllProvidersFailedError)) throw e;
  console.log(`${e.name}: ${e.failures.map((f) => `${f.provider} ${f.kind}`).join("; ")}`);
}
if (calls !== 5) throw new Error(`expected 5 calls to flaky, got ${calls}`);
