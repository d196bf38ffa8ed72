// A Cloudflare Worker using the installed package's workerd entry (the wasm imported as a
// compiled module, as wrangler bundles it): a chat over JS providers with a failover, and
// client.fetch answering an OpenAI request.
import { ResilientClient } from "./node_modules/resilient-llm/workerd.mjs";

export default {
  async fetch() {
    const down = { name: "down", chat: () => Promise.reject(Object.assign(new Error("busy"), { status: 503 })) };
    const up = { name: "up", chat: (req) => Promise.resolve({ text: `up: ${req.messages[0].content}` }) };
    const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [down, up] });
    const res = await client.chat({ messages: [{ role: "user", content: "worker" }] });
    const viaFetch = await client.fetch("https://resilient.invalid/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "fetch" }] }),
    });
    const body = await viaFetch.json();
    return Response.json({ text: res.text, servedBy: res.servedBy.provider, fetched: body.choices[0].message.content });
  },
};
