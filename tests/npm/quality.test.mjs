// Quality escalation in the npm package: a JS function validator (sync, async, `{ ok, reason }`,
// throwing) on a route of JS providers, the configured validators beside it, the rejected
// attempts in the result, and the error when no answer passes. Real Node, the built package.
import assert from "node:assert/strict";
import { test } from "node:test";

import m, { scripted, user } from "./pkg.mjs";

const { ResilientClient, ConfigError, LLMError } = m;

const route = { extract: [{ provider: "cheap", model: "cheap-1" }, { provider: "strong", model: "strong-1" }] };

test("a JS validator's false escalates to the next entry; the rejection is in the attempts", async () => {
  const cheap = scripted("cheap", ["Sure! {name: Ada}"]);
  const strong = scripted("strong", ['{"name":"Ada"}']);
  const seen = [];
  const client = new ResilientClient({ routes: route }, {
    providers: [cheap, strong],
    validators: {
      extract: function parsesAsJson(answer) {
        seen.push([answer.provider, answer.model, answer.text]);
        try {
          JSON.parse(answer.text);
          return true;
        } catch {
          return false;
        }
      },
    },
  });
  const res = await client.chat({ ...user("who?"), model: "extract" });
  assert.equal(res.text, '{"name":"Ada"}');
  assert.equal(res.provider, "strong");
  assert.deepEqual(seen, [["cheap", "cheap-1", "Sure! {name: Ada}"], ["strong", "strong-1", '{"name":"Ada"}']]);
  assert.deepEqual(res.attempts.map((a) => [a.provider, a.ok, a.rejected]),
    [["cheap", false, "parsesAsJson: returned false"], ["strong", true, undefined]]);
  assert.equal(res.attempts[0].kind, undefined, "no failure kind: the provider answered");
  // Rejections are no provider failures.
  assert.deepEqual(client.health().map((h) => [h.provider, h.failures, h.state]), [["cheap", 0, "closed"], ["strong", 0, "closed"]]);
});

test("async validators, { ok, reason } and a throw each reject with their reason", async () => {
  const make = (validator) => new ResilientClient({ routes: route, quality: { extract: { validators: [], onExhausted: "error" } } }, {
    providers: [scripted("cheap", ["a"]), scripted("strong", ["b"])],
    validators: { extract: validator },
  }).chat({ ...user("x"), model: "extract" });
  const reasons = async (validator) => {
    const err = await make(validator).then(() => null, (e) => e);
    assert.ok(err instanceof LLMError, String(err));
    assert.equal(err.kind, "no_valid_answer");
    assert.equal(err.status, 502);
    return err.attempts.map((a) => a.rejected);
  };
  assert.deepEqual(await reasons(async (a) => ({ ok: false, reason: `too short: ${a.text}` })),
    ["function: too short: a", "function: too short: b"]);
  assert.deepEqual(await reasons(function strict() { throw new Error("boom"); }),
    ["strict: threw: boom", "strict: threw: boom"]);
  assert.deepEqual(await reasons(() => Promise.reject(new Error("later"))),
    ["function: rejected its promise: later", "function: rejected its promise: later"]);
  // An array of validators: the second judges what the first passed.
  assert.deepEqual(await reasons([() => true, () => ({ ok: false })]),
    ["function: returned { ok: false }", "function: returned { ok: false }"]);
});

test("configured validators run before JS ones; the first answer that passes both wins", async () => {
  const calls = [];
  const client = new ResilientClient({
    routes: { three: [...route.extract, { provider: "last", model: "last-1" }] },
    quality: { three: { validators: [{ kind: "json" }] } },
  }, {
    providers: [scripted("cheap", ["not json"]), scripted("strong", ['{"n":1}']), scripted("last", ['{"n":2}'])],
    validators: { three: [(a) => (calls.push(a.text), JSON.parse(a.text).n === 2)] },
  });
  const res = await client.chat({ ...user("x"), model: "three" });
  assert.equal(res.text, '{"n":2}');
  assert.deepEqual(calls, ['{"n":1}', '{"n":2}'], "the JS validator saw only JSON");
  assert.match(res.attempts[0].rejected, /^json: not JSON: /);
});

test("every answer rejected: the last answer by default, its attempt marked", async () => {
  const client = new ResilientClient({ routes: route }, {
    providers: [scripted("cheap", ["one"]), scripted("strong", ["two"])],
    validators: { extract: () => false },
  });
  const res = await client.chat({ ...user("x"), model: "extract" });
  assert.equal(res.text, "two");
  assert.deepEqual(res.attempts.map((a) => a.ok), [false, false]);
});

test("bad validators and schemas are ConfigErrors with their paths", () => {
  const issues = (config, options) => {
    try {
      new ResilientClient(config, options);
    } catch (e) {
      assert.ok(e instanceof ConfigError, String(e));
      return e.issues.map((i) => i.path);
    }
    assert.fail("no ConfigError");
  };
  const providers = [scripted("cheap", ["a"]), scripted("strong", ["b"])];
  assert.deepEqual(issues({ routes: route }, { providers, validators: { extract: "yes" } }), ["options.validators.extract"]);
  assert.deepEqual(issues({ routes: route }, { providers, validators: { nowhere: () => true } }), ["options.validators.nowhere"]);
  // A schema that does not compile is refused where its fault is.
  assert.deepEqual(issues({ routes: route, quality: { extract: { validators: [
    { kind: "json" }, { kind: "jsonSchema", schema: { type: "object", properties: { n: { type: "nope" } } } },
    { kind: "regex", pattern: "(x" }] } } }, { providers }),
  ["quality.extract.validators[1].schema.properties.n.type", "quality.extract.validators[2].pattern"]);
});

test("a jsonSchema validator: an answer that breaks the schema escalates; the one that meets it wins", async () => {
  const schema = { type: "object", required: ["name", "age"], properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 } } };
  const client = new ResilientClient({ routes: route, quality: { extract: { validators: [{ kind: "jsonSchema", schema }] } } }, {
    providers: [scripted("cheap", ['{"name":"Ada","age":"old"}']), scripted("strong", ['{"name":"Ada","age":36}'])],
  });
  const res = await client.chat({ ...user("who?"), model: "extract" });
  assert.equal(res.text, '{"name":"Ada","age":36}');
  assert.equal(res.provider, "strong");
  assert.deepEqual(res.attempts.map((a) => a.ok), [false, true]);
  assert.match(res.attempts[0].rejected, /^jsonSchema: at \/age: /);
  // The schema's verdict is no provider failure.
  assert.deepEqual(client.health().map((h) => [h.provider, h.failures]), [["cheap", 0], ["strong", 0]]);
});

test("client.fetch streams a validated route buffered, after validation", async () => {
  const client = new ResilientClient({ routes: route }, {
    providers: [scripted("cheap", ["prose"]), scripted("strong", ['{"ok":1}'])],
    validators: { extract: (a) => a.text.startsWith("{") },
  });
  const res = await client.fetch("http://local/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "extract", stream: true, messages: [{ role: "user", content: "x" }] }),
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-served-by"), "strong/strong-1");
  assert.match(res.headers.get("content-type"), /^text\/event-stream/);
  const text = await res.text();
  const content = text.split("\n\n").filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? "").join("");
  assert.equal(content, '{"ok":1}');
});

test("client.stream() on a validated route: the answer judged whole, only the accepted one streamed", async () => {
  const make = () => {
    const cheap = scripted("cheap", ["prose"]);
    const strong = scripted("strong", ['{"ok":1}']);
    const judged = [];
    const client = new ResilientClient({ routes: route }, {
      providers: [cheap, strong],
      validators: { extract: (a) => (judged.push(a.text), a.text.startsWith("{")) },
    });
    return { client, cheap, strong, judged };
  };
  // textStream: the accepted text only; the rejected answer never reaches the reader.
  const a = make();
  const stream = a.client.stream({ ...user("x"), model: "extract" });
  const pieces = [];
  for await (const t of stream.textStream) pieces.push(t);
  assert.deepEqual(pieces, ['{"ok":1}']);
  assert.deepEqual(a.judged, ["prose", '{"ok":1}'], "both answers judged, in order");
  assert.deepEqual([a.cheap.calls, a.strong.calls], [1, 1]);
  const answer = await stream.finalResponse;
  assert.equal(answer.text, '{"ok":1}');
  assert.equal(answer.model, "strong-1");
  // The events, as any stream's: start first, the text, no event of the rejected answer.
  const b = make();
  const events = [];
  for await (const ev of b.client.stream({ ...user("x"), model: "extract" })) events.push(ev);
  assert.equal(events[0].type, "start");
  assert.equal(events[0].model, "strong-1");
  assert.deepEqual(events.filter((e) => e.type === "text").map((e) => e.text), ['{"ok":1}']);
  // toReadableStream() and finalResponse alike.
  const c = make();
  const read = [];
  const reader = c.client.stream({ ...user("x"), model: "extract" }).toReadableStream().getReader();
  for (let i = 0; i < 20; i++) {
    const { value, done } = await reader.read();
    if (done) break;
    read.push(value);
  }
  assert.deepEqual(read.filter((e) => e.type === "text").map((e) => e.text), ['{"ok":1}']);
});

test("client.stream() on a validated route with no acceptable answer rejects as chat() does", async () => {
  const client = new ResilientClient({ routes: route, quality: { extract: { validators: [], onExhausted: "error" } } }, {
    providers: [scripted("cheap", ["a"]), scripted("strong", ["b"])],
    validators: { extract: () => false },
  });
  const stream = client.stream({ ...user("x"), model: "extract" });
  const err = await (async () => {
    for await (const t of stream.textStream) assert.fail(`no text expected, got ${t}`);
  })().then(() => null, (e) => e);
  assert.ok(err instanceof LLMError, String(err));
  assert.equal(err.kind, "no_valid_answer");
  assert.deepEqual(err.attempts.map((x) => x.rejected), ["extract: returned false", "extract: returned false"], "the arrow function takes its key's name");
  await assert.rejects(stream.finalResponse, (e) => e.kind === "no_valid_answer");
});
