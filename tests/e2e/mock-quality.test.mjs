// The mock's answers of a set quality (mock-quality.mjs), whole and streamed, in both formats.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { startMock } from "./mock-provider.mjs";

let mock;
before(async () => {
  mock = await startMock({ config: { providers: { cheap: { quality: "invalid-json" }, strong: { quality: "json" }, plain: {} } } });
});
after(() => mock.close());

const ask = (name, path, body) => fetch(`${mock.url}/p/${name}${path}`, {
  method: "POST", headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify(body),
});
const openai = (stream = false) => ({ model: "m-1", stream, messages: [{ role: "user", content: "hello there" }] });

test("invalid-json answers prose around an object that is not JSON", async () => {
  const body = await (await ask("cheap", "/v1/chat/completions", openai())).json();
  const text = body.choices[0].message.content;
  assert.match(text, /^Sure! Here is the JSON you asked for: \{answer: /);
  assert.throws(() => JSON.parse(text), SyntaxError);
  assert.equal(body.usage.completion_tokens, Math.ceil(text.length / 6));
});

test("json answers JSON naming the model, whole and streamed, in both formats", async () => {
  const whole = await (await ask("strong", "/v1/messages", { ...openai(), max_tokens: 64 })).json();
  assert.equal(JSON.parse(whole.content[0].text).model, "m-1");
  const sse = await (await ask("strong", "/v1/chat/completions", openai(true))).text();
  const text = sse.split("\n\n").filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? "").join("");
  assert.deepEqual(Object.keys(JSON.parse(text)), ["answer", "model"]);
});

test("without the setting a provider answers as usual; a wrong setting is refused", async () => {
  const body = await (await ask("plain", "/v1/chat/completions", openai())).json();
  assert.doesNotMatch(body.choices[0].message.content, /^Sure!|^\{/);
  await assert.rejects(startMock({ config: { providers: { x: { quality: "great" } } } }), /x\.quality: one of "invalid-json", "json"/);
});
