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

const chat = proto.chat;
proto.chat = function (request, options) {
  if (disposed(this)) return Promise.reject(disposedError());
  return chat.call(this, request, options);
};
for (const name of ["stream", "health", "costs"]) {
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
