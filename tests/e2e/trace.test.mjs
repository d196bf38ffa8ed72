// W3C trace context through the built Worker in workerd, with the official Node SDKs as
// clients: a `traceparent` (and `tracestate`) sent by the SDK is continued to every attempt the
// mock provider receives, each with a span of its own, through a failover and in a stream; a
// request without one starts a trace; `x-trace-id` names it. With `tracing.export`, the spans of a
// failed-over stream reach a local OTLP/HTTP receiver (tests/e2e/python/otlp_receiver.py, which
// decodes them with the official `opentelemetry-proto` definitions): the server span under the
// SDK's, an attempt span per attempt under it whose id its traceparent named, their events.
// Build first (scripts/test-worker.sh does): build/index.js; scripts/setup-python.sh for the venv.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;
const STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
const user = (content) => [{ role: "user", content }];

describe("trace context through the Worker, official SDKs", { timeout: 60000 }, () => {
  let mock, gw;
  // What each provider request carried, oldest first.
  const sent = (name) => mock.received(name).map((r) => [r.headers.traceparent, r.headers.tracestate]);
  before(async () => {
    mock = await startMock({ config: { providers: { down: { faults: [{ mode: "status", status: 503 }] }, p: {}, a: {} } } });
    const config = gatewayConfig(mock, {
      providers: { down: "openai", p: "openai", a: "anthropic" },
      routes: { default: [{ provider: "down", model: "gpt" }, { provider: "p", model: "gpt" }], claude: [{ provider: "a", model: "claude" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 100 },
    });
    gw = await startGateway(config);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });
  beforeEach(() => mock.clearReceived());

  test("the SDK's traceparent is continued to each attempt of a failover, each its own span", async () => {
    const openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0,
      defaultHeaders: { traceparent: PARENT, tracestate: STATE } });
    const { data, response } = await openai.chat.completions.create({ model: "default", messages: user("trace me") }).withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(response.headers.get("x-trace-id"), TRACE);
    const attempts = [...sent("down"), ...sent("p")];
    assert.equal(attempts.length, 2, "the dead provider's attempt, then the one that answered");
    const spans = attempts.map(([parent, state]) => {
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(parent ?? "");
      assert.ok(m, `a traceparent: ${parent}`);
      assert.equal(m[1], TRACE);
      assert.notEqual(m[2], "00f067aa0ba902b7", "a span of the attempt's own");
      assert.equal(state, STATE);
      return m[2];
    });
    assert.notEqual(spans[0], spans[1]);
  });

  test("a stream carries it too, and a request without one starts a trace", async () => {
    const anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0,
      defaultHeaders: { traceparent: PARENT } });
    const { data: stream, response } = await anthropic.messages
      .create({ model: "claude", max_tokens: 64, stream: true, messages: user("stream me") })
      .withResponse();
    for await (const _ of stream) { /* read to the end */ }
    assert.equal(response.headers.get("x-trace-id"), TRACE);
    const [[parent, state]] = sent("a");
    assert.match(parent, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    assert.equal(state, undefined, "no tracestate sent, none passed on");

    const plain = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { response: r } = await plain.chat.completions.create({ model: "default", messages: user("no trace") }).withResponse();
    const id = r.headers.get("x-trace-id");
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.notEqual(id, TRACE);
    assert.ok(sent("p").some(([p]) => p?.startsWith(`00-${id}-`)), "the started trace reached the provider");
  });
});

const here = path.dirname(fileURLToPath(import.meta.url));
const tools = process.env.RESILIENT_LLM_TOOLS ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "resilient-llm/tools");
const python = process.env.RESILIENT_LLM_PYTHON ?? path.join(tools, "venv-py/bin/python");

/** The OTLP receiver, on a free 127.0.0.1 port. */
async function startReceiver() {
  assert.ok(existsSync(python), `${python} is missing: run scripts/setup-python.sh`);
  const child = spawn(python, [path.join(here, "python/otlp_receiver.py")], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("the receiver did not start in 10 s")), 10_000);
    child.stdout.on("data", (d) => {
      out += d;
      const m = /PORT (\d+)/.exec(out);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on("exit", (code) => reject(new Error(`the receiver exited: ${code}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    /** The spans of trace `id`, once `n` arrived (5 s at most). */
    async spans(id, n) {
      for (let i = 0; i < 100; i++) {
        const all = await (await fetch(`${url}/spans`)).json();
        const mine = all.filter((s) => s.traceId === id);
        if (mine.length >= n) return mine;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.fail(`fewer than ${n} spans of ${id} arrived`);
    },
    close: () => child.kill(),
  };
}

describe("spans exported over OTLP from the Worker", { timeout: 60000 }, () => {
  let mock, gw, receiver;
  before(async () => {
    receiver = await startReceiver();
    mock = await startMock({ config: { providers: { down: { faults: [{ mode: "status", status: 503 }] }, p: {} } } });
    const config = gatewayConfig(mock, {
      providers: { down: "openai", p: "openai" },
      routes: { default: [{ provider: "down", model: "gpt" }, { provider: "p", model: "gpt" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 100 },
    });
    config.tracing = { export: { endpoint: `${receiver.url}/v1/traces`, serviceName: "e2e-edge" } };
    gw = await startGateway(config);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
    receiver?.close();
  });

  test("a failed-over stream's trace: the server span under the SDK's, two attempt spans under it", async () => {
    const openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0,
      defaultHeaders: { traceparent: PARENT } });
    const stream = await openai.chat.completions.create({ model: "default", stream: true, messages: user("trace my stream") });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    assert.ok(text.length > 0);
    const spans = await receiver.spans(TRACE, 3);
    assert.equal(spans.length, 3, JSON.stringify(spans));
    // For the picture in docs/tracing.md (scripts/trace-picture.py draws it).
    if (process.env.TRACE_SPANS_OUT) writeFileSync(process.env.TRACE_SPANS_OUT, JSON.stringify(spans, null, 1));
    const server = spans.find((s) => s.kind === 2);
    assert.ok(server, "a server span");
    assert.equal(server.service, "e2e-edge");
    assert.equal(server.scope, "resilient-llm");
    assert.equal(server.parentSpanId, "00f067aa0ba902b7", "under the SDK's span");
    assert.equal(server.name, "POST /v1/chat/completions");
    assert.equal(server.attributes["gen_ai.operation.name"], "chat");
    assert.equal(server.attributes["gen_ai.request.model"], "default");
    assert.equal(server.attributes["http.response.status_code"], 200);
    const events = server.events.map((e) => e.name);
    assert.deepEqual(events, ["failover", "stream.commit"]);
    assert.equal(server.events[0].attributes["error.type"], "server");

    const attempts = spans.filter((s) => s.kind === 3).sort((a, b) => a.startNs - b.startNs);
    assert.equal(attempts.length, 2);
    const sentIds = [...mock.received("down"), ...mock.received("p")].map((r) => r.headers.traceparent.split("-")[2]);
    assert.deepEqual(attempts.map((s) => s.spanId), sentIds, "each attempt's span is the one its traceparent named");
    for (const a of attempts) {
      assert.equal(a.parentSpanId, server.spanId);
      assert.equal(a.attributes["gen_ai.provider.name"], "openai");
      assert.equal(a.attributes["server.address"], "127.0.0.1");
      assert.equal(typeof a.attributes["server.port"], "number");
      assert.ok(a.startNs >= server.startNs && a.endNs <= server.endNs);
    }
    assert.equal(attempts[0].attributes["error.type"], "server");
    assert.equal(attempts[0].status.code, 2);
    assert.equal(attempts[1].attributes["resilient_llm.outcome"], "ok");
    assert.ok(!JSON.stringify(spans).includes("trace my stream"), "no message contents");
  });
});
