// What every entry of the package exports, whichever way it loaded the wasm: the client, the
// fetch factory, the outage simulator and the error classes (the wasm-bindgen module's
// internals stay inside). The client's lifetime is made safe to misuse here, where the
// generated class is: `free()` twice is a no-op, and a freed client says so instead of "null
// pointer passed to rust".
import {
  AbortError,
  AllProvidersFailedError,
  CircuitOpenError,
  ClientRequestError,
  ConfigError,
  createFetch,
  LLMError,
  NetworkError,
  RateLimitError,
  ResilientClient,
  ServerError,
  simulate,
  TimeoutError,
} from "./wasm/resilient_llm.js";

export {
  AbortError,
  AllProvidersFailedError,
  CircuitOpenError,
  ClientRequestError,
  ConfigError,
  createFetch,
  LLMError,
  NetworkError,
  RateLimitError,
  ResilientClient,
  ServerError,
  simulate,
  TimeoutError,
};

const proto = ResilientClient.prototype;
// wasm-bindgen zeroes `__wbg_ptr` when an object is freed (wasm-bindgen is pinned in Cargo.toml).
const disposed = (client) => client.__wbg_ptr === 0;
const disposedError = () =>
  new ClientRequestError("client is disposed: free() was called on this ResilientClient", {
    kind: "disposed",
    retryable: false,
  });

const free = proto.free;
proto.free = function () {
  if (!disposed(this)) free.call(this);
};
if (typeof Symbol.dispose === "symbol") proto[Symbol.dispose] = proto.free;

// A call's rejection is created inside the wasm, on a later turn of the event loop: its stack
// names no frame of the caller. The stack where the call was made is captured when it is made
// and appended to the rejection's, as V8's async frames would be.
const callStack = (fn) => {
  const site = {};
  if (typeof Error.captureStackTrace === "function") Error.captureStackTrace(site, fn);
  else site.stack = new Error().stack;
  const stack = typeof site.stack === "string" ? site.stack : "";
  // V8 starts with an "Error" line; other engines list frames only.
  return stack.startsWith("Error") ? stack.slice(stack.indexOf("\n") + 1) : stack;
};
const extended = new WeakSet();
const withCaller = (frames) => (e) => {
  if (frames && e instanceof Error && !extended.has(e)) {
    extended.add(e);
    try {
      e.stack = `${e.stack}\n${frames}`;
    } catch {
      // a frozen error keeps its own stack
    }
  }
  throw e;
};

for (const name of ["chat", "embeddings", "countTokens"]) {
  const method = proto[name];
  proto[name] = function withCallerStack(request, options) {
    if (disposed(this)) return Promise.reject(disposedError());
    return method.call(this, request, options).catch(withCaller(callStack(withCallerStack)));
  };
}
const stream = proto.stream;
proto.stream = function streamWithCaller(...args) {
  if (disposed(this)) throw disposedError();
  const result = stream.apply(this, args);
  const rethrow = withCaller(callStack(streamWithCaller));
  // Every way of reading (for await, textStream, the ReadableStream, the Response) calls next().
  const next = result.next;
  result.next = function (...a) {
    return next.apply(this, a).catch(rethrow);
  };
  const final = Object.getOwnPropertyDescriptor(result, "finalResponse");
  if (final && final.get) {
    Object.defineProperty(result, "finalResponse", {
      configurable: true,
      enumerable: final.enumerable,
      get() {
        const answer = final.get.call(this).catch(rethrow);
        answer.catch(() => {}); // as the original: never an unhandled rejection by itself
        return answer;
      },
    });
  }
  return result;
};
for (const name of ["health", "costs"]) {
  const method = proto[name];
  proto[name] = function (...args) {
    if (disposed(this)) throw disposedError();
    return method.apply(this, args);
  };
}
const fetchGetter = Object.getOwnPropertyDescriptor(proto, "fetch").get;
Object.defineProperty(proto, "fetch", {
  configurable: true,
  enumerable: false,
  get() {
    if (disposed(this)) throw disposedError();
    return fetchGetter.call(this);
  },
});
