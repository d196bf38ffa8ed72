// The set-up both feature suites share (Node SDKs: features.test.mjs; Python SDKs:
// python-features.mjs): the mock provider and the built Worker, with an OpenAI-format and an
// Anthropic-format provider behind routes of their own and a route mixing both kinds.
import { gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

/** Route name → [provider, model] of its one entry (the `mixed` route has two). */
export const ROUTES = {
  gpt: [["oai", "gpt-mock"]],
  claude: [["ant", "claude-mock"]],
  "gpt-nousage": [["oai-nousage", "gpt-nousage"]],
  "gpt-silent": [["oai-silent", "gpt-silent"]],
  "gpt-future": [["oai-fut", "gpt-future"]],
  "claude-future": [["ant-fut", "claude-future"]],
  "claude-redacted": [["ant-red", "claude-redacted"]],
  "claude-cut": [["ant-cut", "claude-cut"]],
  mixed: [["ant", "claude-mixed"], ["oai", "gpt-mixed"]],
};

/** Starts the mock and the gateway; `close()` stops both. */
export async function startFeatures({ log = false } = {}) {
  const mock = await startMock({
    config: { providers: { "oai-silent": { streamUsage: "never" }, "oai-fut": { future: true }, "ant-fut": { future: true },
      "ant-red": { redactThinking: true },
      // Its first stream is cut after two deltas (the gateway continues it).
      "ant-cut": { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] } } },
  });
  const config = gatewayConfig(mock, {
    providers: {
      oai: "openai",
      ant: "anthropic",
      // A preset that does not ask for stream usage by itself: the gateway asks when the client does.
      "oai-nousage": { kind: "openai", streamUsage: false },
      // The mock never sends this one's stream usage, even when asked.
      "oai-silent": "openai",
      "oai-fut": "openai",
      "ant-fut": "anthropic",
      // Its thinking comes as redacted_thinking blocks.
      "ant-red": "anthropic",
      "ant-cut": "anthropic",
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
    /**
     * The gateway's log line `msg` ("request"; a stream's last one: "stream end") for the
     * answer with this x-request-id, parsed.
     */
    logLine(requestId, msg = "request") {
      for (const line of gw.logs) {
        const start = line.indexOf("{");
        if (start < 0) continue;
        try {
          const entry = JSON.parse(line.slice(start));
          if (entry.requestId === requestId && entry.msg === msg) return entry;
        } catch {
          // not a JSON line (workerd's own output)
        }
      }
      return null;
    },
    close: async () => {
      await gw.close();
      await mock.close();
    },
  };
}

/** The signature the mock gives the thinking block of its request number `seq`. */
export function mockSignature(provider, seq) {
  return Buffer.from(`mock-signature:${provider}:${seq}`).toString("base64");
}

/** A 1×1 PNG, base64. */
export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
export const IMAGE_URL = "https://example.com/cat.png";
/** A first message long enough for the mock's automatic OpenAI prompt cache (60 words). */
export const LONG_SYSTEM = Array.from({ length: 60 }, (_, i) => `rule${i}`).join(" ");
