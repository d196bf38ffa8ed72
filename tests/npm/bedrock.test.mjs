// `kind: "bedrock"` in the npm package, credentials given in the config: requests signed with
// SigV4 by the same Rust code as the Worker's, checked by the mock's Bedrock runtime (127.0.0.1,
// free port), InvokeModel and Converse, whole and streamed, and a wrong key classified.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import { TEST_CREDENTIALS } from "../e2e/mock-bedrock.mjs";
import m, { user } from "./pkg.mjs";

const { ResilientClient } = m;
const CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA = "amazon.nova-lite-v1:0";

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

function client(model, secretAccessKey = TEST_CREDENTIALS.secretAccessKey) {
  return new ResilientClient({
    providers: {
      aws: { kind: "bedrock", region: "us-west-2", baseUrl: `${mock.url}/bedrock/aws`,
        accessKeyId: TEST_CREDENTIALS.accessKeyId, secretAccessKey },
    },
    routes: { default: [{ provider: "aws", model }] },
    retry: { maxAttempts: 1 },
  });
}

async function collect(iterable) {
  const events = [];
  for await (const e of iterable) events.push(e);
  return { events, text: events.filter((e) => e.type === "text").map((e) => e.text).join("") };
}

test("an Anthropic model on Bedrock, whole and streamed, signed in the package", async () => {
  await mock.reset();
  const c = client(CLAUDE);
  const res = await c.chat(user("hello bedrock"));
  assert.equal(res.text, "[aws] echo: hello bedrock");
  assert.equal(res.provider, "aws");
  const { events, text } = await collect(c.stream(user("hello stream")));
  assert.equal(text, "[aws] echo: hello stream");
  assert.equal(events.find((e) => e.type === "finish").reason, "stop");
  assert.ok(events.find((e) => e.type === "usage").usage.outputTokens > 0);
  const received = mock.received("aws");
  assert.deepEqual(received.map((r) => r.path.split("/").at(-1)), ["invoke", "invoke-with-response-stream"]);
  assert.equal(received[0].body.anthropic_version, "bedrock-2023-05-31");
  assert.equal(mock.stats("aws").byStatus["200"], 2);
});

test("another model through Converse, whole and streamed", async () => {
  await mock.reset();
  const c = client(NOVA);
  const res = await c.chat(user("hello converse"));
  assert.equal(res.text, "[aws] echo: hello converse");
  assert.ok(res.usage.inputTokens > 0 && res.usage.outputTokens > 0);
  const { text } = await collect(c.stream(user("hello converse stream")));
  assert.equal(text, "[aws] echo: hello converse stream");
  assert.deepEqual(mock.received("aws").map((r) => r.path.split("/").at(-1)), ["converse", "converse-stream"]);
});

test("a wrong secret key is an auth failure of the provider, and never in the error", async () => {
  await mock.reset();
  const wrong = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYWRONGKEY";
  await assert.rejects(client(CLAUDE, wrong).chat(user("hi")), (e) => {
    // One provider: its own failure, or the last of the failures listed.
    const failure = e.failures?.at(-1) ?? e;
    assert.equal(failure.kind, "auth");
    assert.equal(failure.status, 403);
    assert.match(failure.message, /signature we calculated does not match/);
    assert.ok(!JSON.stringify(e).includes(wrong) && !String(e).includes(wrong) && !e.stack.includes(wrong));
    return true;
  });
});
