// The set-up both Responses API suites share (Node SDK: responses.test.mjs; Python SDK:
// python-responses.test.mjs): the mock provider and the built Worker, with routes to an OpenAI
// provider (which speaks Responses: passthrough), an Anthropic provider and an OpenAI-compatible
// one (vLLM's preset: Chat Completions only), both reached by translation, a route whose first
// entry is overloaded (529), and streams cut after the commit point.
import { gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

/** Route name → [provider, model] of its entries. */
export const ROUTES = {
  gpt: [["oai", "gpt-mock"]],
  claude: [["ant", "claude-mock"]],
  compat: [["vllm", "llama-mock"]],
  failover: [["ant-busy", "claude-busy"], ["oai", "gpt-mock"]],
  // Stored state: only the OpenAI entry can serve it.
  stateful: [["ant", "claude-mock"], ["oai", "gpt-mock"]],
  "gpt-cut": [["oai-cut", "gpt-cut"]],
  "claude-cut": [["ant-cut", "claude-cut"]],
  "claude-dead": [["ant-dead", "claude-dead"]],
};

/** Starts the mock and the gateway; `close()` stops both. */
export async function startResponses({ log = false } = {}) {
  const mock = await startMock({
    config: {
      providers: {
        "ant-busy": { faults: [{ mode: "status", status: 529, error: "overloaded" }] },
        // Its first stream is cut after two deltas: the gateway continues it.
        "ant-cut": { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] },
        // Every stream is cut: a continuation is cut too, and the stream ends failed.
        "ant-dead": { faults: [{ mode: "stream", cutAfterChunks: 2 }] },
        "oai-cut": { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] },
      },
    },
  });
  const config = gatewayConfig(mock, {
    providers: {
      oai: "openai", "oai-cut": "openai", vllm: { kind: "openai-compatible", preset: "vllm" },
      ant: "anthropic", "ant-busy": "anthropic", "ant-cut": "anthropic", "ant-dead": "anthropic",
    },
    routes: Object.fromEntries(Object.entries(ROUTES).map(([name, entries]) => [name, entries.map(([provider, model]) => ({ provider, model }))])),
    retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 200 },
    breaker: { failureThreshold: 1000, cooldownMs: 60000, maxCooldownMs: 60000 },
    timeoutMs: 5000,
    deadlineMs: 15000,
  });
  let gw;
  try {
    gw = await startGateway(config, { log });
  } catch (err) {
    await mock.close();
    throw err;
  }
  return {
    mock,
    gw,
    close: async () => {
      await gw.close();
      await mock.close();
    },
  };
}

/** A 1×1 PNG, base64. */
export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
