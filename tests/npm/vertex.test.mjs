// The npm package with `kind: "vertex"`, the service account's key in the configuration
// itself, against the mock's Vertex AI (127.0.0.1, free port): Claude and Gemini models,
// whole and streamed, one access token for every call, failover when none can be had.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m, { user } from "./pkg.mjs";

const { ResilientClient, ConfigError } = m;

let mock;
let key;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
  const file = JSON.parse(readFileSync(new URL("../fixtures/vertex/service-account.json", import.meta.url), "utf8"));
  key = { ...file, token_uri: mock.vertex.tokenUri };
});
after(async () => {
  await mock.close();
});

function vertex(publisher, name, serviceAccountKey = key) {
  return { kind: "vertex", publisher, project: "test-project", region: "us-east5", baseUrl: mock.vertex.baseUrl(name), serviceAccountKey };
}

test("Claude and Gemini on Vertex AI, whole and streamed, on one token per provider", async () => {
  const before = mock.vertex.tokenStats().issued;
  const client = new ResilientClient({
    providers: { claude: vertex("anthropic", "npm-claude"), gemini: vertex("google", "npm-gemini", JSON.stringify(key)) },
    routes: { claude: [{ provider: "claude", model: "claude-sonnet-4-5@20250929" }],
      gemini: [{ provider: "gemini", model: "gemini-2.5-flash" }] },
    retry: { maxAttempts: 1 },
  });
  for (let i = 0; i < 3; i++) {
    const c = await client.chat({ ...user(`claude ${i}`), model: "claude" });
    assert.equal(c.text, `[npm-claude] echo: claude ${i}`);
    assert.equal(c.provider, "claude");
    const g = await client.chat({ ...user(`gemini ${i}`), model: "gemini" });
    assert.equal(g.text, `[npm-gemini] echo: gemini ${i}`);
    assert.ok(g.usage.inputTokens > 0 && g.usage.outputTokens > 0);
  }
  let text = "";
  for await (const e of client.stream({ ...user("streamed"), model: "gemini" })) if (e.type === "text") text += e.text;
  assert.equal(text, "[npm-gemini] echo: streamed");
  text = "";
  for await (const e of client.stream({ ...user("streamed"), model: "claude" })) if (e.type === "text") text += e.text;
  assert.equal(text, "[npm-claude] echo: streamed");
  assert.equal(mock.vertex.tokenStats().issued - before, 2, "one token for each provider entry");
  assert.equal(mock.received("npm-claude").at(-1).body.anthropic_version, "vertex-2023-10-16");
});

test("no token: the route fails over to the next entry", async () => {
  mock.vertex.setTokenFault({ status: 400, error: "invalid_grant" });
  try {
    const client = new ResilientClient({
      providers: { claude: vertex("anthropic", "npm-refused"),
        backup: { kind: "anthropic", baseUrl: mock.providerUrl("npm-backup"), apiKey: "k" } },
      routes: { default: [{ provider: "claude", model: "claude-sonnet-4-5@20250929" }, { provider: "backup", model: "claude-x" }] },
      retry: { maxAttempts: 1 },
    });
    const r = await client.chat(user("who answers"));
    assert.equal(r.provider, "backup");
    assert.equal(r.attempts[0].kind, "auth");
    assert.ok(!JSON.stringify(r.attempts).includes("PRIVATE KEY"));
    assert.equal(mock.stats("npm-refused").total, 0);
  } finally {
    mock.vertex.setTokenFault(null);
  }
});

test("a broken key is a ConfigError naming its field, without the key", () => {
  const broken = { ...key, private_key: "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n" };
  assert.throws(() => new ResilientClient({ providers: { v: vertex("google", "x", broken) }, routes: { default: [{ provider: "v", model: "g" }] } }),
    (e) => e instanceof ConfigError && e.issues.some((i) => i.path === "providers.v.serviceAccountKey") && !e.message.includes("not a key"));
});
