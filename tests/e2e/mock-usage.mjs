// An OpenAI-format upstream on 127.0.0.1 for the spend caps' tests: every request is answered
// "ok" after `delayMs`, reporting `tokens` prompt and `tokens` completion tokens, and counted.
import { createServer } from "node:http";

/** Starts it: `url`, `providerUrl()` (the same for every provider), `calls`, `close()`. */
export async function startUsageUpstream({ delayMs, tokens }) {
  let calls = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      calls += 1;
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id: `c${calls}`, object: "chat.completion", created: 1, model: "big",
          choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
          usage: { prompt_tokens: tokens, completion_tokens: tokens, total_tokens: 2 * tokens },
        }));
      }, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    providerUrl: () => url,
    get calls() { return calls; },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
