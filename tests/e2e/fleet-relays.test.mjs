// End to end, through the built Worker in workerd (Miniflare) with real Durable Objects: the
// fleet's relays (docs/design.md §7a). Isolates in two data centres (`request.cf.colo`) reach
// a model's owner through their own data centre's relay: a transition one isolate sees
// reaches the isolates of the other data centre, one probe is granted fleet-wide, and an
// owner or a relay failing in the middle of a breaker storm leaves every request served.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { eventually, GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const COLOS = ["AMS", "AMS", "SJC", "SJC"];
const DEAD = "dead/dead-model";

async function chat(gw, isolate) {
  const res = await gw.fetch(isolate, "http://gateway/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
    body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "x" }] }),
  });
  const text = await res.text();
  return { status: res.status, servedBy: res.headers.get("x-served-by"), text };
}

async function health(gw, isolate) {
  const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  const body = await res.json();
  return Object.fromEntries(body.providers.map((p) => [p.provider, p]));
}

const outageLines = (gw) => gw.logs.filter((l) => l.includes("fleet breaker unreachable"));

describe("the fleet's relays, one per data centre", { timeout: 120000 }, () => {
  let mock;
  const routes = { default: [{ provider: "dead", model: "dead-model" }, { provider: "backup", model: "backup-model" }] };
  const total = (name) => mock.stats(name).total;
  before(async () => {
    mock = await startMock({ config: { providers: { dead: { faults: [{ mode: "status", status: 503 }] } } } });
  });
  after(async () => mock?.close());

  test("isolates in two data centres share one breaker through their relays: one probe fleet-wide", async () => {
    mock.reset("dead");
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "openai" }, routes, retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 2000, maxCooldownMs: 4000 },
    });
    const gw = await startGateway(config, { isolates: 4, colos: COLOS });
    const failing = { faults: [{ mode: "status", status: 503 }] };
    try {
      // Every isolate has been served by the model once, so every relay serves it.
      mock.setFault("dead", { faults: [] });
      for (let i = 0; i < 4; i++) assert.equal((await chat(gw, i)).servedBy, "dead/dead-model");
      mock.setFault("dead", failing);
      // An isolate of AMS sees the failures that open the breaker ...
      const start = total("dead");
      for (let i = 0; i < 2; i++) assert.equal((await chat(gw, 0)).status, 200);
      // ... and the isolates of SJC, which never saw them, learn it through their relay.
      const opened = Date.now();
      for (const i of [2, 3, 1]) await eventually(async () => (await health(gw, i)).dead.state === "open", 3000);
      const learned = Date.now() - opened;
      const owner = JSON.parse((await gw.fleet(DEAD, "view")).text);
      assert.equal(owner.state.state, "open", "the owner holds the transition");
      const before = total("dead");
      for (let i = 0; i < 4; i++) assert.equal((await chat(gw, i)).servedBy, "backup/backup-model");
      assert.equal(total("dead"), before, "no isolate called the provider the fleet found dead");
      // The isolates' calls reached the relays named by their data centre: each already
      // serves the model and refuses another.
      for (const colo of ["AMS", "SJC"]) {
        const other = await gw.relay(colo, DEAD, "view", { key: "other/model" });
        assert.equal(other.status, 400, `${colo}: ${other.text}`);
      }
      // Cooldown over: a burst through every isolate of both data centres, one probe fleet-wide.
      await sleep(2300);
      const burst = [];
      for (let round = 0; round < 3; round++) for (let i = 0; i < 4; i++) burst.push(chat(gw, i));
      const answers = await Promise.all(burst);
      assert.ok(answers.every((r) => r.status === 200), JSON.stringify(answers.map((a) => a.status)));
      assert.equal(total("dead") - start, 3, "two failures, then exactly one probe across four isolates in two data centres");
      console.log(`# SJC isolates learned the AMS transition in ${learned} ms`);
    } finally {
      mock.setFault("dead", failing);
      await gw.close();
    }
  });

  for (const [who, mode] of [["owner", "throw"], ["owner", "hang"], ["relay", "throw"], ["relay", "fail"]]) {
    test(`the ${who} set to ${mode} in the middle of a breaker storm: every request served, the outage logged once`, async () => {
      mock.reset("dead");
      const config = gatewayConfig(mock, {
        providers: { dead: "openai", backup: "openai" }, routes, retry: { maxAttempts: 1 },
        breaker: { failureThreshold: 2, cooldownMs: 60000, maxCooldownMs: 60000 },
      });
      const gw = await startGateway(config, { isolates: 4, colos: COLOS, vars: { FLEET_FAULTS: "on" } });
      const fault = (m) => who === "owner"
        ? Promise.all([DEAD, "backup/backup-model"].map((k) => gw.fleet(k, "fault", { mode: m })))
        : Promise.all(["AMS", "SJC"].flatMap((c) => [DEAD, "backup/backup-model"].map((k) => gw.relay(c, k, "fault", { mode: m }))));
      try {
        // The storm: waves through all four isolates while the provider fails.
        const wave = async () => {
          const answers = await Promise.all([0, 1, 2, 3].map((i) => chat(gw, i)));
          for (const a of answers) assert.equal(a.status, 200, a.text);
        };
        await wave();
        await fault(mode);
        const deadline = Date.now() + 4000;
        while (Date.now() < deadline) await wave();
        await sleep(300);
        // Each isolate decides on its own breaker: it stopped calling the dead provider.
        for (let i = 0; i < 4; i++) assert.equal((await health(gw, i)).dead.state, "open");
        const quiet = total("dead");
        await wave();
        assert.equal(total("dead"), quiet, "no isolate calls the dead provider any more");
        const lines = outageLines(gw);
        // An owner out of reach is said once by each relay that calls it; a relay out of
        // reach, once by each isolate that calls it, not once per failed call.
        assert.ok(lines.length >= 2 && lines.length <= 4, lines.join("\n"));
        // Back: what an isolate of AMS sees, the isolates of SJC learn again.
        await fault("none");
        mock.setFault("backup", { faults: [{ mode: "status", status: 503 }] });
        try {
          await sleep(1700); // calls hung before are past their time limits
          for (let i = 0; i < 3; i++) await chat(gw, 0);
          // An SJC isolate serves no request meanwhile: its /health refreshes its view.
          await eventually(async () => (await health(gw, 2)).backup.state === "open", 8000);
          await eventually(() => gw.logs.some((l) => l.includes("fleet breaker reachable again")), 8000);
        } finally {
          mock.setFault("backup", { faults: [] });
        }
      } finally {
        await gw.close();
      }
    });
  }
});
