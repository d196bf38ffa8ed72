// What `client.stream()` returns: an async iterator of stream events, with the helpers users of
// the Vercel AI SDK reach for (`textStream`, `toReadableStream()`, `toResponse()`,
// `finalResponse`, `onFinish`).
//
// One reader at a time: iterating, `textStream`, `toReadableStream()` and `toResponse()` all
// read the same events once. `finalResponse` settles when the stream ends, however it was read;
// asked for before any reading starts, it reads the stream itself.
//
// Kept to `export function` declarations at the top level and no imports: wasm-bindgen copies
// this file alone into the package.

const encoder = new TextEncoder();

/** Server-sent events of the stream's events: `event: <type>` and the event as JSON. */
function sse(type, data) {
  return encoder.encode(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** An error as plain JSON (LLMError has toJSON; anything else its name and message). */
function errorJson(e) {
  if (e && typeof e.toJSON === "function") return e.toJSON();
  return { name: (e && e.name) || "Error", message: String((e && e.message) || e) };
}

/**
 * Used from Rust: wraps a stream handle whose `next()` resolves to the next event, or
 * `undefined` at the end. Breaking out of a `for await` loop (or `return()`, or cancelling a
 * ReadableStream) frees the handle, which aborts the upstream request.
 */
export function __streamResult(handle, options) {
  const onFinish = options && typeof options.onFinish === "function" ? options.onFinish : null;
  let open = true;
  let started = false;
  const answer = { text: "", thinking: "", toolCalls: [], finishReason: null, usage: null, model: null };
  let settle = null;
  const final = new Promise((resolve, reject) => {
    settle = { resolve, reject };
  });
  // Observed by whoever awaits `finalResponse`; never an unhandled rejection otherwise.
  final.catch(() => {});

  const close = () => {
    if (open) {
      open = false;
      handle.free();
    }
  };
  const note = (ev) => {
    switch (ev.type) {
      case "start":
        answer.model = ev.model;
        break;
      case "text":
        answer.text += ev.text;
        break;
      case "thinking":
        answer.thinking += ev.text || "";
        break;
      case "tool_call": {
        const call = answer.toolCalls.find((c) => c.index === ev.index);
        if (call) {
          call.arguments += ev.arguments;
          if (ev.id) call.id = ev.id;
          if (ev.name) call.name = ev.name;
        } else {
          answer.toolCalls.push({ index: ev.index, id: ev.id, name: ev.name, arguments: ev.arguments });
        }
        break;
      }
      case "finish":
        answer.finishReason = ev.reason;
        break;
      case "usage":
        answer.usage = ev.usage;
        break;
    }
  };
  const finished = () => {
    settle.resolve(answer);
    if (onFinish) {
      try {
        onFinish(answer);
      } catch (e) {
        console.error("resilient-llm: onFinish threw:", e);
      }
    }
  };

  const iterator = {
    async next() {
      started = true;
      if (!open) return { value: undefined, done: true };
      let value;
      try {
        value = await handle.next();
      } catch (e) {
        close();
        settle.reject(e);
        throw e;
      }
      if (value === undefined) {
        close();
        finished();
        return { value: undefined, done: true };
      }
      note(value);
      return { value, done: false };
    },
    async return(value) {
      started = true;
      if (open) {
        close();
        settle.reject(Object.assign(new Error("the stream was closed before its end"), { name: "AbortError" }));
      }
      return { value, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
    /** The answer's text, piece by piece, as strings. */
    get textStream() {
      return (async function* () {
        for await (const ev of iterator) if (ev.type === "text") yield ev.text;
      })();
    },
    /** The whole answer once the stream ends: text, thinking, toolCalls, finishReason, usage, model. */
    get finalResponse() {
      // Asked for with nobody reading (checked once the caller's synchronous code ran): read.
      Promise.resolve().then(async () => {
        if (started) return;
        try {
          for await (const _ of iterator);
        } catch {
          // settled through `final`
        }
      });
      return final;
    },
    /** The events as a ReadableStream; cancelling it aborts the upstream request. */
    toReadableStream() {
      return new ReadableStream({
        async pull(controller) {
          const r = await iterator.next();
          if (r.done) controller.close();
          else controller.enqueue(r.value);
        },
        async cancel() {
          await iterator.return();
        },
      });
    },
    /**
     * A `Response` of server-sent events for a route handler: one `event: <type>` with the
     * event as JSON per event, an `event: error` with the error's JSON if the stream fails.
     */
    toResponse(init) {
      const body = new ReadableStream({
        async pull(controller) {
          try {
            const r = await iterator.next();
            if (r.done) controller.close();
            else controller.enqueue(sse(r.value.type, r.value));
          } catch (e) {
            controller.enqueue(sse("error", errorJson(e)));
            controller.close();
          }
        },
        async cancel() {
          await iterator.return();
        },
      });
      const headers = new Headers((init && init.headers) || {});
      if (!headers.has("content-type")) headers.set("content-type", "text/event-stream; charset=utf-8");
      if (!headers.has("cache-control")) headers.set("cache-control", "no-cache");
      return new Response(body, { status: (init && init.status) || 200, headers });
    },
  };
  return iterator;
}
