// Type-checked only (scripts/test-npm.sh): `resilient-llm/opentelemetry` as a caller writes it,
// against the app's own `@opentelemetry/api` types.
import { trace } from "@opentelemetry/api";
import { ResilientClient } from "resilient-llm";
import { openTelemetry, type TracingBridge } from "resilient-llm/opentelemetry";

const bridge: TracingBridge = openTelemetry({ tracer: trace.getTracer("my-app"), maxOpenCalls: 100 });
export const client = new ResilientClient({ routes: {} }, { tracing: bridge });
export const byDefault = new ResilientClient({ routes: {} }, { tracing: openTelemetry() });

// @ts-expect-error a tracer is an OpenTelemetry Tracer
openTelemetry({ tracer: 42 });
// @ts-expect-error the bridge is openTelemetry()'s
new ResilientClient({ routes: {} }, { tracing: {} });
