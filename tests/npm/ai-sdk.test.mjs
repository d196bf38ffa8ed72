// `resilient-llm/ai-sdk` under the `ai` package (Node 22: ai 7 needs it): generateText and
// streamText over a ResilientClient, with a failover, tool calls, usage and an error.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { generateText, jsonSchema, streamText, tool } from "ai";

import m, { pkgDir, scripted } from "./pkg.mjs";

const { ResilientClient, AllProvidersFailedError } = m;
const { createResilient } = await import(pathToFileURL(path.join(pkgDir, "ai-sdk.mjs")).href);

const usage = { inputTokens: 12, outputTokens: 5 };

test("generateText fails over and reports the provider's usage", async () => {
  const down = scripted("down", [{ status: 503, message: "busy" }]);
  const seen = [];
  const up = {
    name: "up",
    chat: async (req) => {
      seen.push(req);
      return { text: `up: ${req.messages.at(-1).content}`, usage, finishReason: "stop" };
    },
  };
  const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [down, up] });
  const resilient = createResilient({ client });
  const res = await generateText({
    model: resilient("default"),
    system: "be brief",
    prompt: "hello",
    temperature: 0.2,
    maxOutputTokens: 64,
  });
  assert.equal(res.text, "up: hello");
  assert.equal(res.finishReason, "stop");
  assert.equal(res.usage.inputTokens, 12);
  assert.equal(res.usage.outputTokens, 5);
  assert.equal(down.calls, 1);
  assert.equal(seen[0].messages[0].role, "system");
  assert.equal(seen[0].temperature, 0.2);
  assert.equal(seen[0].maxTokens, 64);
});

test("generateText runs a tool call and sends its result back", async () => {
  let turn = 0;
  const requests = [];
  const p = {
    name: "p",
    chat: async (req) => {
      requests.push(req);
      turn++;
      if (turn === 1) {
        return { text: "", toolCalls: [{ id: "c1", name: "weather", arguments: '{"city":"Oslo"}' }], finishReason: "tool_calls" };
      }
      return { text: "It is cold.", finishReason: "stop" };
    },
  };
  const client = new ResilientClient({}, { providers: [p] });
  const res = await generateText({
    model: createResilient({ client })("default"),
    prompt: "weather in Oslo?",
    tools: {
      weather: tool({
        description: "the weather",
        inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
        execute: async ({ city }) => `${city}: -5 C`,
      }),
    },
    stopWhen: ({ steps }) => steps.length >= 2,
  });
  assert.equal(res.text, "It is cold.");
  assert.equal(requests[0].tools[0].name, "weather");
  const back = requests[1].messages.flatMap((msg) => (Array.isArray(msg.content) ? msg.content : []));
  const result = back.find((part) => part.type === "tool_result");
  assert.ok(result, JSON.stringify(requests[1].messages));
  assert.equal(result.toolCallId, "c1");
  assert.match(result.content, /Oslo: -5 C/);
});

test("streamText streams the text and finishes with usage", async () => {
  const p = { name: "p", chat: async () => ({ text: "streamed answer", usage, finishReason: "stop" }) };
  const client = new ResilientClient({}, { providers: [p] });
  const result = streamText({ model: createResilient({ client })("default"), prompt: "go" });
  let text = "";
  for await (const piece of result.textStream) text += piece;
  assert.equal(text, "streamed answer");
  assert.equal(await result.finishReason, "stop");
  assert.equal((await result.usage).outputTokens, 5);
});

test("a call every provider fails surfaces the client's error", async () => {
  const p = scripted("p", [{ status: 401, message: "bad key" }]);
  const client = new ResilientClient({}, { providers: [p] });
  const err = await generateText({ model: createResilient({ client })("default"), prompt: "x", maxRetries: 0 }).catch((e) => e);
  const cause = err instanceof AllProvidersFailedError ? err : err.cause ?? err.lastError;
  assert.ok(cause instanceof AllProvidersFailedError, String(err));
  assert.equal(cause.status, 401);
  assert.equal(cause.retryable, false);
});
