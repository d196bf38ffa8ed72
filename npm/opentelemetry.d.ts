// `resilient-llm/opentelemetry`: a ResilientClient's spans in the app's own OpenTelemetry tracer.
// It imports `@opentelemetry/api` (an optional peer dependency: install it to use this entry).
import type { Tracer } from "@opentelemetry/api";
import type { TracingBridge } from "./index.js";

export type { TracingBridge };

export interface OpenTelemetryOptions {
  /** The tracer the spans go to (default: the global provider's `resilient-llm` tracer). */
  tracer?: Tracer;
  /** The most calls whose spans are open at once (default 1000): beyond, the oldest end. */
  maxOpenCalls?: number;
}

/** `new ResilientClient(config, { tracing: openTelemetry() })`. */
export declare function openTelemetry(options?: OpenTelemetryOptions): TracingBridge;
