// The OpenTelemetry JS API and SDK as one ES module for page.html, bundled by run.sh (esbuild),
// as an app's bundler would: `@opentelemetry/api` in the page's import map is this module.
export * from "@opentelemetry/api";
export { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
