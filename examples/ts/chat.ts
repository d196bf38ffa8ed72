// A typed client over JS providers. Type-checks with `tsc --noEmit -p examples/ts`
// against the built package (installed as `resilient-llm`).
import {
  AbortError,
  AllProvidersFailedError,
  ResilientClient,
  ServerError,
  type AttemptRecord,
  type ChatResult,
  type ClientEvent,
  type Config,
  type Provider,
  type ProviderRequest,
  type ProviderResponse,
} from "resilient-llm";

class EchoProvider implements Provider {
  constructor(readonly name: string, private failuresLeft = 0) {}

  async chat(request: ProviderRequest, signal: AbortSignal): Promise<ProviderResponse> {
    if (signal.aborted) throw signal.reason;
    if (this.failuresLeft-- > 0) throw new ServerError("upstream 503", { status: 503 });
    const last = request.messages[request.messages.length - 1];
    const text = typeof last.content === "string" ? last.content : "(parts)";
    return { text: `${this.name}: ${text}`, model: request.model, finishReason: "stop" };
  }
}

const config: Config = {
  routes: {
    default: [
      { provider: "primary", model: "big", timeoutMs: 1000 },
      { provider: "backup", model: "small" },
    ],
  },
  retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 50 },
  breaker: { failureThreshold: 3, cooldownMs: 5000 },
};

const events: ClientEvent["type"][] = [];
const client = new ResilientClient(config, {
  providers: [new EchoProvider("primary", 5), new EchoProvider("backup")],
  onEvent: (e) => {
    events.push(e.type);
    if (e.type === "failover") console.log(`failover ${e.from} → ${e.to}: ${e.error.kind}`);
  },
});

async function ask(content: string, signal?: AbortSignal): Promise<ChatResult | undefined> {
  try {
    return await client.chat({ messages: [{ role: "user", content }] }, { signal });
  } catch (e) {
    if (e instanceof AbortError) return undefined;
    if (e instanceof AllProvidersFailedError) {
      const lines = e.failures.map((f: AttemptRecord) => `${f.provider}#${f.attempt} ${f.kind}`);
      throw new Error(`all failed: ${lines.join(", ")}`);
    }
    throw e;
  }
}

const res = await ask("typed hello");
if (!res || res.servedBy.provider !== "backup") throw new Error("expected the backup to answer");
console.log(`${res.text} (${res.finishReason}, ${res.attempts.length} attempts, events: ${events.join(",")})`);
const aborted = await ask("never mind", AbortSignal.abort());
console.log(`aborted: ${aborted === undefined}`);

// The call options are optional; health() is typed too.
const plain = new ResilientClient({ timeoutMs: 500 }, { providers: [new EchoProvider("solo")] });
const again: ChatResult = await plain.chat({ messages: [{ role: "user", content: "no options" }] });
const open = plain.health().filter((h) => h.state === "open").length;
console.log(`${again.text}; open breakers: ${open}`);
