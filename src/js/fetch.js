// The `fetch` function of `client.fetch` / `createFetch(config)`: builds a `Request` from fetch's
// arguments, has the package's gateway serve it in process, and returns the `Response`.
//
// Kept to `export function` declarations at the top level and no imports: wasm-bindgen copies
// this file alone into the package.

/** Used from Rust: a fetch-compatible function over a server with `serve(request)`. */
export function __makeFetch(server) {
  return async function fetch(input, init) {
    const request = new Request(input, init);
    const out = await server.serve(request);
    const headers = new Headers(out.headers);
    if (!out.stream) return new Response(out.body, { status: out.status, headers });
    const body = out.stream;
    let open = true;
    const close = () => {
      if (open) {
        open = false;
        request.signal.removeEventListener("abort", onAbort);
        body.free();
      }
    };
    let controller;
    const onAbort = () => {
      if (controller) controller.error(request.signal.reason);
      close();
    };
    request.signal.addEventListener("abort", onAbort);
    const stream = new ReadableStream({
      start(c) {
        controller = c;
      },
      async pull(c) {
        if (!open) return;
        const chunk = await body.next();
        if (!open) return;
        if (chunk === undefined) {
          close();
          c.close();
        } else {
          c.enqueue(chunk);
        }
      },
      cancel() {
        close();
      },
    });
    return new Response(stream, { status: out.status, headers });
  };
}
