// The Python half of the Responses API suite: starts the mock provider and the built Worker (the
// set-up of responses-setup.mjs), runs tests/e2e/python/test_responses.py with the official
// `openai` package from the virtualenv scripts/setup-python.sh makes, and
// stops everything. Python's own report goes to stderr, one line per test.
//   RESILIENT_LLM_PYTHON: the interpreter (default: $RESILIENT_LLM_TOOLS/venv-py/bin/python)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GATEWAY_KEY, MOCK_KEY } from "./gateway-harness.mjs";
import { startResponses } from "./responses-setup.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TIMEOUT_MS = 150_000;
const tools = process.env.RESILIENT_LLM_TOOLS
  ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "resilient-llm/tools");
const python = process.env.RESILIENT_LLM_PYTHON ?? path.join(tools, "venv-py/bin/python");

let f;
before(async () => { f = await startResponses(); });
after(() => f?.close());

test("the official Python openai SDK: responses.create, stream, parse (tests/e2e/python, unittest)", { timeout: TIMEOUT_MS + 10_000 }, async () => {
  assert.ok(existsSync(python), `${python} is missing: run scripts/setup-python.sh`);
  const child = spawn(python, ["-m", "unittest", "-v", "test_responses"], {
    cwd: path.join(HERE, "python"),
    env: { ...process.env, GATEWAY_URL: f.gw.url, GATEWAY_KEY, MOCK_URL: f.mock.url, MOCK_KEY, PYTHONDONTWRITEBYTECODE: "1" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
  const [code, signal] = await new Promise((resolve) => child.once("exit", (c, s) => resolve([c, s])));
  clearTimeout(timer);
  assert.equal(signal, null, `python was stopped after ${TIMEOUT_MS} ms`);
  assert.equal(code, 0, "a Python test failed (its report is above)");
});
