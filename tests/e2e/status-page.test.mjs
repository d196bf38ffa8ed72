// The status page in headless Chromium: starts the mock provider and the built Worker, runs
// tests/e2e/python/test_status_page.py (selenium, from the virtualenv of
// scripts/setup-python.sh) against them, and stops everything. Screenshots go to
// $CARGO_TARGET_DIR/e2e (or target/e2e).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TIMEOUT_MS = 120_000;
const tools = process.env.RESILIENT_LLM_TOOLS
  ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "resilient-llm/tools");
const python = process.env.RESILIENT_LLM_PYTHON ?? path.join(tools, "venv-py/bin/python");
const shots = path.join(process.env.CARGO_TARGET_DIR ?? path.join(HERE, "../../target"), "e2e");

let mock;
let gw;
before(async () => {
  // The backup's answers carry rate-limit headers: the page shows its pool.
  mock = await startMock({ config: { providers: { primary: {}, backup: { pool: { requests: 1000 } } } } });
  gw = await startGateway(gatewayConfig(mock, {
    providers: { primary: "openai", backup: "openai" },
    routes: { default: [{ provider: "primary", model: "m" }, { provider: "backup", model: "m" }] },
    retry: { maxAttempts: 1 },
    breaker: { failureThreshold: 1, cooldownMs: 2000, maxCooldownMs: 2000 },
  }));
});
after(async () => { await gw?.close(); await mock?.close(); });

test("the status page in headless Chromium (tests/e2e/python/test_status_page.py)", { timeout: TIMEOUT_MS + 10_000 }, async () => {
  assert.ok(existsSync(python), `${python} is missing: run scripts/setup-python.sh`);
  mkdirSync(shots, { recursive: true });
  const child = spawn(python, ["-m", "unittest", "-v", "test_status_page"], {
    cwd: path.join(HERE, "python"),
    env: { ...process.env, GATEWAY_URL: gw.url, GATEWAY_KEY, MOCK_URL: mock.url, SCREENSHOT_DIR: shots, PYTHONDONTWRITEBYTECODE: "1" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
  const [code, signal] = await new Promise((resolve) => child.once("exit", (c, s) => resolve([c, s])));
  clearTimeout(timer);
  assert.equal(signal, null, `python was stopped after ${TIMEOUT_MS} ms`);
  assert.equal(code, 0, "a status page check failed (its report is above)");
  for (const f of ["status-open.png", "status-closed.png"]) assert.ok(existsSync(path.join(shots, f)), `${f} saved`);
});
