// Error classes thrown by resilient-llm, re-exported from the package.
//
// Every error a call can reject with is an LLMError: `instanceof` tells the
// classes apart (names sit on the prototypes, so minifiers keep them), and
// each carries `kind`, `retryable`, `status`,
// `retryAfterMs`, `code` and `provider` as plain properties, so it reads
// well in a console and serializes with JSON.stringify (see toJSON).
//
// No imports: wasm-bindgen copies this file alone into the package, and the
// CommonJS entry bundles it (scripts/build-npm.sh).

// Kinds worth retrying on the same provider: ProviderError::is_retryable
// in src/error/provider.rs decides the same.
const RETRYABLE = ["rate_limited", "server", "stalled", "transport", "decode"];

export class LLMError extends Error {
  /**
   * @param {string} message
   * @param {{ kind?: string, retryable?: boolean, status?: number, retryAfterMs?: number,
   *           code?: string, provider?: string, cause?: unknown }} [init]
   */
  constructor(message, init) {
    const o = init || {};
    super(message, o.cause === undefined ? undefined : { cause: o.cause });
    this.kind = typeof o.kind === "string" ? o.kind : new.target.defaultKind;
    this.retryable =
      typeof o.retryable === "boolean" ? o.retryable : RETRYABLE.includes(this.kind);
    // Absent facts stay absent (no `status: undefined` in a console).
    for (const key of ["status", "retryAfterMs", "code", "provider", "attempts"]) {
      if (o[key] !== undefined && o[key] !== null) this[key] = o[key];
    }
  }

  toJSON() {
    const out = { name: this.name, message: this.message };
    for (const key of Object.keys(this)) {
      if (this[key] !== undefined) out[key] = this[key];
    }
    return out;
  }
}

LLMError.defaultKind = "server";
LLMError.prototype.name = "LLMError";

/** 429 or spent quota. */
export class RateLimitError extends LLMError {}
RateLimitError.defaultKind = "rate_limited";
RateLimitError.prototype.name = "RateLimitError";
/** 5xx, 529 overloaded, 408, or a response that could not be decoded. */
export class ServerError extends LLMError {}
ServerError.defaultKind = "server";
ServerError.prototype.name = "ServerError";
/** An attempt's deadline, a stalled body, or the request's deadline. */
export class TimeoutError extends LLMError {}
TimeoutError.defaultKind = "timeout";
TimeoutError.prototype.name = "TimeoutError";
/** Reset, refused, DNS or TLS failure: no (complete) response. */
export class NetworkError extends LLMError {}
NetworkError.defaultKind = "transport";
NetworkError.prototype.name = "NetworkError";
/** The request itself is unusable: 400, 401, 403, 404, 413, 422, an unknown route. */
export class ClientRequestError extends LLMError {}
ClientRequestError.defaultKind = "invalid_request";
ClientRequestError.prototype.name = "ClientRequestError";
/** The provider's breaker is open; it was not called. */
export class CircuitOpenError extends LLMError {}
CircuitOpenError.defaultKind = "circuit_open";
CircuitOpenError.prototype.name = "CircuitOpenError";

/** The caller's AbortSignal fired; `cause` is the signal's reason. */
export class AbortError extends LLMError {}
AbortError.defaultKind = "aborted";
AbortError.prototype.name = "AbortError";

/** Every provider failed or was skipped; `failures` lists each attempt. */
export class AllProvidersFailedError extends LLMError {
  constructor(message, init) {
    super(message, init);
    const o = init || {};
    this.failures = Array.isArray(o.failures) ? o.failures : [];
  }
}
AllProvidersFailedError.defaultKind = "all_providers_failed";
AllProvidersFailedError.prototype.name = "AllProvidersFailedError";

/**
 * The configuration or the client's options are invalid (thrown by the constructor, never by a
 * call); `issues` lists every problem with its path. Not retryable.
 */
export class ConfigError extends LLMError {
  constructor(message, init) {
    super(message, init);
    const o = init || {};
    this.issues = Array.isArray(o.issues) ? o.issues : [];
  }
}
ConfigError.defaultKind = "config";
ConfigError.prototype.name = "ConfigError";

const CLASSES = {
  LLMError,
  RateLimitError,
  ServerError,
  TimeoutError,
  NetworkError,
  ClientRequestError,
  CircuitOpenError,
  AbortError,
  AllProvidersFailedError,
  ConfigError,
};

/** Used from Rust (and tests): the classes by name. */
export function __classes() {
  return CLASSES;
}

/** Used from Rust: builds an error of the named class. */
export function __makeError(className, message, init) {
  const C = CLASSES[className] || LLMError;
  return new C(message, init);
}
