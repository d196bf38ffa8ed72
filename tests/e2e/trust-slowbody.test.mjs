// End to end: a request body sent one byte every 3 s is answered 408 in the client's format
// once 60 s have passed (src/gateway/request.rs, BODY_DEADLINE), through the built Worker in
// workerd (Miniflare), over a real socket. Build first (scripts/test-worker.sh does). Takes
// about a minute of wall time: the deadline is real time here.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

/** POSTs `body` to `url` one byte every `everyMs`; the answer's status, text and elapsed ms. */
function trickle(url, body, everyMs) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const req = http.request(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
    });
    let i = 0;
    const timer = setInterval(() => {
      if (i < body.length) req.write(body.subarray(i, i + 1));
      i += 1;
      // Bounded: never more than the body, never past two minutes.
      if (i > body.length || Date.now() - started > 120000) {
        clearInterval(timer);
        req.end();
      }
    }, everyMs);
    req.on("response", (res) => {
      clearInterval(timer);
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode, text, ms: Date.now() - started });
      });
    });
    req.on("error", (e) => {
      clearInterval(timer);
      reject(e);
    });
  });
}

describe("a slow request body", { timeout: 150000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: { a: {} } } });
    gw = await startGateway(
      gatewayConfig(mock, { providers: { a: "anthropic" }, routes: { default: [{ provider: "a", model: "m" }] } }),
    );
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("one byte every 3 s is a 408 in Anthropic's shape after 60 s, with nothing sent upstream", async () => {
    const body = Buffer.from(
      JSON.stringify({ model: "default", max_tokens: 5, messages: [{ role: "user", content: "x".repeat(200) }] }),
    );
    const a = await trickle(`${gw.url}/v1/messages`, body, 3000);
    assert.equal(a.status, 408, a.text);
    const err = JSON.parse(a.text);
    assert.equal(err.type, "error");
    assert.match(err.error.message, /did not arrive within 60 s/);
    assert.ok(a.ms >= 59000 && a.ms < 70000, `answered after ${a.ms} ms`);
    assert.equal(mock.received("a").length, 0);
  });
});
