// The installed tarball's types under `tsc --strict` with the default lib (no esnext.disposable).
import {
  AllProvidersFailedError,
  LLMError,
  ResilientClient,
  type ChatResult,
  type Provider,
  type ProviderHealth,
  type StreamAnswer,
} from "resilient-llm";
import { createResilient } from "resilient-llm/ai-sdk";

const up: Provider = {
  name: "up",
  chat: async (req) => ({ text: `up: ${String(req.messages[0]?.content)}` }),
};
const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [up], unwrapSingleProvider: false });

async function main(): Promise<void> {
  const res: ChatResult = await client.chat({ messages: [{ role: "user", content: "hi" }] });
  if (res.text !== "up: hi") throw new Error(`unexpected answer ${res.text}`);
  const stream = client.stream({ messages: [{ role: "user", content: "s" }] }, { onFinish: (a: StreamAnswer) => void a.text });
  const answer: StreamAnswer = await stream.finalResponse;
  if (answer.text !== "up: s") throw new Error(`unexpected stream answer ${answer.text}`);
  const health: ProviderHealth[] = client.health();
  if (health[0]?.requests !== 2) throw new Error(`unexpected health ${JSON.stringify(health)}`);
  const f: typeof fetch = client.fetch;
  const r = await f("https://resilient.invalid/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "f" }] }),
  });
  if (r.status !== 200) throw new Error(`status ${r.status}`);
  try {
    await new ResilientClient({}, { providers: [{ name: "x", chat: () => Promise.reject(new Error("no")) }] }).chat({
      messages: [{ role: "user", content: "x" }],
    });
  } catch (e) {
    if (!(e instanceof AllProvidersFailedError) || !(e instanceof LLMError)) throw e;
    const status: number | undefined = e.status;
    void status;
  }
  const model = createResilient({ client })("default");
  if (model.specificationVersion !== "v4") throw new Error("spec");
  // Typed under the default lib too (no esnext.disposable); after free(), a no-op.
  client.free();
  client[Symbol.dispose]();
  console.log("packed ts: ok");
}
// A rejection ends Node with an error and exit code 1 (no @types/node in a fresh project).
void main();
