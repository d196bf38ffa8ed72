// simulate(config, scenario) from the built nodejs package: the real client on virtual time.
import assert from "node:assert/strict";
import { test } from "node:test";

import m from "./pkg.mjs";

const { simulate, ConfigError } = m;

const config = {
  providers: { primary: { kind: "anthropic" }, backup: { kind: "openai" } },
  routes: { default: [{ provider: "primary", model: "p" }, { provider: "backup", model: "b" }] },
  retry: { maxAttempts: 1 },
  breaker: { failureThreshold: 1, cooldownMs: 60000, maxCooldownMs: 60000 },
};

const scenario = {
  name: "dead-primary",
  durationMs: 10000,
  providers: {
    primary: { medianMs: 100, p95Ms: 100, faults: [{ fromMs: 0, toMs: 10000, effect: { kind: "status", status: 503 } }] },
    backup: { medianMs: 200, p95Ms: 200, inputPerMtok: 1, outputPerMtok: 2 },
  },
  traffic: { ratePerSec: 1, spacing: "even", inputTokens: 1000, outputTokens: 500 },
  policies: [{ name: "defaults" }, { name: "no failover", patch: { routes: { default: [{ provider: "primary", model: "p" }] } } }],
};

test("simulate runs each policy on virtual time and gives the figures worked out by hand", () => {
  const started = Date.now();
  const report = simulate(config, scenario);
  assert.ok(Date.now() - started < 5000, "10 s of traffic, no real waiting");
  assert.deepEqual(report.runs.map((r) => r.policy), ["defaults", "no failover"]);
  const [failover, alone] = report.runs.map((r) => r.figures);
  // One 503 opens the breaker; every request is answered by the backup in 200 ms, the first in 300.
  assert.deepEqual([failover.requests, failover.answered, failover.calls, failover.failingCalls], [10, 10, 11, 1]);
  assert.deepEqual(failover.latencyMs, { p50: 200, p95: 300, p99: 300 });
  assert.ok(Math.abs(failover.costUsd - 0.02) < 1e-12);
  assert.deepEqual(failover.recoveryMs, { primary: null });
  assert.deepEqual([alone.answered, alone.availability], [0, 0]);
  assert.equal(report.runs[0].series.failed.length, 10, "a point per second");
  assert.deepEqual(simulate(JSON.stringify(config), JSON.stringify(scenario)), report, "same seed, same report");
});

test("a bad scenario throws a ConfigError naming the field", () => {
  assert.throws(() => simulate(config, { ...scenario, durationMs: "soon" }), (e) => {
    assert.ok(e instanceof ConfigError, e);
    assert.match(e.issues[0].message, /durationMs: invalid type/);
    return true;
  });
});
