// `resilient-llm/opentelemetry` in Node, with the OpenTelemetry JS SDK as an app registers it (a
// BasicTracerProvider with an in-memory exporter, the AsyncLocalStorage context manager) and
// the mock provider on 127.0.0.1 (free port): a call's span under the app's active span, one
// client span per attempt under it whose id is the `traceparent` the provider got, the GenAI
// attributes and events the client recorded, a stream's spans at its end or when its reader
// leaves, `client.fetch` through the official `openai` SDK; nothing without a registered tracer
// or for an unsampled trace; the bound on calls open at once.
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, beforeEach, test } from "node:test";

import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import OpenAI from "openai";

import { startMock } from "../e2e/mock-provider.mjs";
import m, { pkgDir } from "./pkg.mjs";

const { ConfigError, ResilientClient } = m;
const { openTelemetry } = await import(pathToFileURL(path.join(pkgDir, "opentelemetry.mjs")).href);

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
const app = trace.getTracer("app");

let mock, client;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: { down: { faults: [{ mode: "status", status: 503 }] }, p: {} } } });
  const upstream = (name) => ({ kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl(name) });
  client = new ResilientClient(
    {
      providers: { down: upstream("down"), p: upstream("p") },
      routes: { default: [{ provider: "down", model: "m" }, { provider: "p", model: "m" }] },
      retry: { maxAttempts: 1 },
    },
    { tracing: openTelemetry() },
  );
});
after(async () => {
  await mock.close();
  await provider.shutdown();
});
beforeEach(() => {
  mock.clearReceived();
  exporter.reset();
});

const ask = { model: "default", messages: [{ role: "user", content: "trace me" }] };
/** The span ids each provider request's `traceparent` named, in order. */
const sentIds = () =>
  [...mock.received("down"), ...mock.received("p")].map((r) => /^00-[0-9a-f]{32}-([0-9a-f]{16})-01$/.exec(r.headers.traceparent ?? "")?.[1]);
const finished = () => exporter.getFinishedSpans();
const byName = (name) => finished().filter((s) => s.name === name);
const parentOf = (s) => s.parentSpanContext?.spanId;

/** Runs `fn` inside an app span; the app span, once ended. */
async function inAppSpan(fn) {
  let appSpan;
  await app.startActiveSpan("app work", async (span) => {
    appSpan = span;
    try {
      await fn();
    } finally {
      span.end();
    }
  });
  return appSpan;
}

test("client.chat(): the call's span under the app's, an attempt span each, named in its traceparent", async () => {
  const appSpan = await inAppSpan(() => client.chat(ask));
  const [call] = byName("chat default");
  assert.ok(call, `spans: ${finished().map((s) => s.name)}`);
  assert.equal(call.kind, SpanKind.INTERNAL);
  assert.equal(call.spanContext().traceId, appSpan.spanContext().traceId);
  assert.equal(parentOf(call), appSpan.spanContext().spanId);
  assert.equal(call.attributes["gen_ai.operation.name"], "chat");

  const attempts = finished().filter((s) => parentOf(s) === call.spanContext().spanId);
  assert.equal(attempts.length, 2);
  assert.ok(attempts.every((s) => s.kind === SpanKind.CLIENT && s.name === "chat m"), attempts.map((s) => s.name).join());
  const ids = attempts.map((s) => s.spanContext().spanId);
  assert.deepEqual(sentIds().sort(), [...ids].sort(), "each provider got its attempt span's id");
  const [failed] = attempts.filter((s) => s.status.code === SpanStatusCode.ERROR);
  const [answered] = attempts.filter((s) => s.status.code !== SpanStatusCode.ERROR);
  assert.ok(failed && answered);
  assert.equal(failed.attributes["error.type"], "server");
  assert.equal(answered.attributes["gen_ai.response.model"], "m");
  assert.equal(typeof answered.attributes["gen_ai.usage.input_tokens"], "number");
  assert.ok(answered.startTime[0] * 1e3 + answered.startTime[1] / 1e6 >= failed.startTime[0] * 1e3 + failed.startTime[1] / 1e6);
  assert.ok(call.ended && attempts.every((s) => s.ended));
});

test("client.stream(): the spans end at the stream's end, or when its reader leaves", async () => {
  await inAppSpan(async () => {
    for await (const _ of client.stream(ask)) { /* read to the end */ }
  });
  const [call] = byName("chat default");
  assert.ok(call.events.some((e) => e.name === "stream.commit"), call.events.map((e) => e.name).join());
  assert.equal(finished().filter((s) => parentOf(s) === call.spanContext().spanId).length, 2);

  exporter.reset();
  mock.clearReceived();
  await inAppSpan(async () => {
    for await (const e of client.stream(ask)) if (e.type === "text") break;
  });
  const [left] = finished().filter((s) => s.kind === SpanKind.INTERNAL && s.name.startsWith("chat"));
  assert.ok(left, `the call's span ended when its reader left: ${finished().map((s) => s.name)}`);
  assert.equal(left.status.code, SpanStatusCode.UNSET, "leaving is not an error");
  const attempts = finished().filter((s) => parentOf(s) === left.spanContext().spanId);
  assert.equal(attempts.length, 2, "its attempts' spans too, the one it was reading among them");
});

test("client.fetch through the official openai SDK: continued from its traceparent, or the active span", async () => {
  const openai = new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch: client.fetch, maxRetries: 0 });
  const appSpan = await inAppSpan(() => openai.chat.completions.create(ask));
  const [call] = byName("chat default");
  assert.equal(parentOf(call), appSpan.spanContext().spanId);
  assert.deepEqual(sentIds().sort(), finished().filter((s) => parentOf(s) === call.spanContext().spanId).map((s) => s.spanContext().spanId).sort());

  exporter.reset();
  const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const withHeader = new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch: client.fetch, maxRetries: 0,
    defaultHeaders: { traceparent: parent } });
  const { response } = await withHeader.chat.completions.create(ask).withResponse();
  assert.equal(response.headers.get("x-trace-id"), "4bf92f3577b34da6a3ce929d0e0e4736");
  const [continued] = byName("chat default");
  assert.equal(continued.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(parentOf(continued), "00f067aa0ba902b7");
});

test("options.traceparent is the call span's parent; an unsampled one is passed on, unrecorded", async () => {
  await client.chat(ask, { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "k=v" });
  const [call] = byName("chat default");
  assert.equal(call.spanContext().traceId, "0af7651916cd43dd8448eb211c80319c");
  assert.equal(parentOf(call), "b7ad6b7169203331");
  assert.equal(call.spanContext().traceState?.get("k"), "v");
  assert.ok(mock.received("p").every((r) => r.headers.tracestate === "k=v"));

  exporter.reset();
  mock.clearReceived();
  await client.chat(ask, { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" });
  assert.deepEqual(finished(), []);
  assert.ok(mock.received("p").every((r) => r.headers.traceparent?.endsWith("-00")));
});

test("maxOpenCalls bounds the calls whose spans are open: beyond it the oldest's end", async () => {
  const bounded = new ResilientClient(
    { providers: { p: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("p") } }, routes: { default: [{ provider: "p", model: "m" }] } },
    { tracing: openTelemetry({ maxOpenCalls: 1 }) },
  );
  const first = bounded.stream(ask); // opened, never read
  assert.deepEqual(finished(), []);
  const second = bounded.stream(ask);
  assert.equal(finished().length, 1, "the first call's span ended when the second opened");
  await first.return();
  await second.return();
  assert.throws(() => openTelemetry({ maxOpenCalls: 0 }), /maxOpenCalls must be a positive integer/);
});

test("a bad tracing option is a ConfigError; without a registered tracer nothing is opened", async () => {
  assert.throws(() => new ResilientClient({}, { providers: [{ name: "x", chat: async () => ({ text: "" }) }], tracing: {} }),
    (e) => e instanceof ConfigError && /options\.tracing: must be the value of openTelemetry\(\)/.test(e.message));
  assert.throws(() => openTelemetry({ tracer: {} }), /options\.tracer must be an OpenTelemetry Tracer/);

  trace.disable();
  try {
    await client.chat(ask);
    assert.deepEqual(finished(), []);
    assert.ok(sentIds().length > 0 && sentIds().every((id) => id === undefined), "no trace context without one");
  } finally {
    trace.setGlobalTracerProvider(provider);
  }
});
