// resilient-llm/opentelemetry: a client's spans in the app's own OpenTelemetry tracer.
//
//   import { openTelemetry } from "resilient-llm/opentelemetry";
//   const client = new ResilientClient(config, { tracing: openTelemetry() });
//
// Each `client.chat()`, `client.stream()` and `client.fetch` request opens a span (`chat {route}`,
// internal) under the app's active span (or `options.traceparent`, or the `traceparent` an SDK
// sent), and one client span per attempt under it, opened when the attempt starts so that the
// `traceparent` the provider gets names it. At the call's end the client gives them the
// attributes, events and status it recorded (the GenAI conventions, docs/tracing.md) and they
// end. Nothing is opened while the tracer does not record (no TracerProvider registered, or the
// trace not sampled): the call is then untraced.
//
// The object returned is the bridge the client calls; its methods are not an API of their own.
import { context, createTraceState, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";

const KINDS = {
  internal: SpanKind.INTERNAL,
  client: SpanKind.CLIENT,
  server: SpanKind.SERVER,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};
const STATUS = { unset: SpanStatusCode.UNSET, ok: SpanStatusCode.OK, error: SpanStatusCode.ERROR };

/**
 * The `tracing` option of a `ResilientClient`: its calls' spans in `options.tracer` (by
 * default the global tracer provider's `resilient-llm` tracer, looked up at each call, so a
 * provider registered after the client is created is used). `options.maxOpenCalls` (default
 * 1000) bounds the calls whose spans are open at once: beyond it the oldest call's spans end.
 */
export function openTelemetry(options = {}) {
  if (options === null || typeof options !== "object") throw new TypeError("openTelemetry(options): options must be an object");
  const { tracer, maxOpenCalls = 1000 } = options;
  if (tracer !== undefined && (tracer === null || typeof tracer.startSpan !== "function")) {
    throw new TypeError("openTelemetry(options): options.tracer must be an OpenTelemetry Tracer");
  }
  if (!Number.isInteger(maxOpenCalls) || maxOpenCalls < 1) {
    throw new TypeError("openTelemetry(options): options.maxOpenCalls must be a positive integer");
  }
  const tracerOf = () => tracer ?? trace.getTracer("resilient-llm");
  // Open calls by their span's id: { span, tracer, attempts: Map<id, Span>, holds }. Insertion
  // order is age, for the bound.
  const calls = new Map();

  const endAll = (id, call) => {
    calls.delete(id);
    for (const span of call.attempts.values()) span.end();
    call.span.end();
  };

  return {
    /** A call starts: its span under `parent` (a SpanContext) or the active span; its W3C context. */
    begin(parent) {
      const t = tracerOf();
      const ctx = parent ? trace.setSpanContext(context.active(), remote(parent)) : context.active();
      const span = t.startSpan("chat", { kind: SpanKind.INTERNAL }, ctx);
      if (!span.isRecording()) {
        span.end();
        return undefined;
      }
      const sc = span.spanContext();
      calls.set(sc.spanId, { span, tracer: t, attempts: new Map(), holds: 1 });
      while (calls.size > maxOpenCalls) {
        const [oldest, call] = calls.entries().next().value;
        endAll(oldest, call);
      }
      const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
      return { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, tracestate: sc.traceState?.serialize() || undefined };
    },
    /** The engine holds the call while it runs. */
    hold(_traceId, spanId) {
      const call = calls.get(spanId);
      if (call) call.holds += 1;
    },
    /** An attempt of the call `parentId` starts: its span's id. */
    open(_traceId, parentId, startTime) {
      const call = calls.get(parentId);
      if (!call) return undefined;
      const span = call.tracer.startSpan("chat", { kind: SpanKind.CLIENT, startTime }, trace.setSpan(ROOT_CONTEXT, call.span));
      const id = span.spanContext().spanId;
      call.attempts.set(id, span);
      return id;
    },
    /** A call ended: its spans as recorded, its own first. */
    close(spans) {
      const [own, ...attempts] = spans;
      const call = own && calls.get(own.spanId);
      if (!call) return;
      calls.delete(own.spanId);
      const parent = trace.setSpan(ROOT_CONTEXT, call.span);
      for (const s of attempts) {
        let span = call.attempts.get(s.spanId);
        call.attempts.delete(s.spanId);
        // An attempt the engine recorded that this bridge did not open (none is expected).
        span ??= call.tracer.startSpan(s.name, { kind: KINDS[s.kind], startTime: s.startTime }, parent);
        finish(span, s);
      }
      for (const span of call.attempts.values()) span.end();
      finish(call.span, own);
    },
    /** A hold on the call is released: the last, without a close, ends its spans as they are. */
    release(_traceId, spanId) {
      const call = calls.get(spanId);
      if (call && --call.holds <= 0) endAll(spanId, call);
    },
  };
}

/** The caller's explicit context (`options.traceparent`, an SDK's header) as a SpanContext. */
function remote({ traceId, spanId, traceFlags, traceState }) {
  const sc = { traceId, spanId, traceFlags, isRemote: true };
  if (traceState) sc.traceState = createTraceState(traceState);
  return sc;
}

/** Gives `span` what the client recorded of it (`s`) and ends it when `s` ended. */
function finish(span, s) {
  span.updateName(s.name);
  span.setAttributes(s.attributes);
  for (const e of s.events) span.addEvent(e.name, e.attributes, e.time);
  const code = STATUS[s.status.code] ?? SpanStatusCode.UNSET;
  if (code !== SpanStatusCode.UNSET) span.setStatus(s.status.message ? { code, message: s.status.message } : { code });
  span.end(s.endTime);
}
