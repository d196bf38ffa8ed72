// Shared set-up for the Worker's end-to-end tests: the built Worker (build/index.js +
// index_bg.wasm, from scripts/test-worker.sh) in Miniflare with a real Durable Object, in
// front of the fault-injecting mock provider. Everything listens on 127.0.0.1, port 0.
import { Miniflare } from "miniflare";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startMock } from "./mock-provider.mjs";
import { TEST_CREDENTIALS } from "./mock-bedrock.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const GATEWAY_KEY = "e2e-client-key";
/** The key the gateway sends every mock provider (its MOCK_API_KEY secret). */
export const MOCK_KEY = "mock-key";

/**
 * The gateway configuration over `mock`: providers named after mock providers, each given as
 * its kind ("openai") or as its settings ({ kind: "openai", streamUsage: false }).
 */
export function gatewayConfig(mock, { providers, routes, breaker, retry, timeoutMs, deadlineMs, open } = {}) {
  const p = {};
  for (const [name, spec] of Object.entries(providers)) {
    const settings = typeof spec === "string" ? { kind: spec } : spec;
    if (settings.kind === "bedrock") {
      // The mock's Bedrock runtime, signed for with the Worker's AWS_* secrets.
      p[name] = { region: "us-east-1", baseUrl: `${mock.url}/bedrock/${name}`, ...settings };
      continue;
    }
    p[name] = { kind: settings.kind, baseUrl: mock.providerUrl(name), apiKeyEnv: "MOCK_API_KEY", ...settings };
  }
  return {
    providers: p,
    routes,
    retry: retry ?? { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 2000 },
    breaker: breaker ?? { failureThreshold: 3, cooldownMs: 60000, maxCooldownMs: 60000 },
    timeoutMs: timeoutMs ?? 3000,
    deadlineMs: deadlineMs ?? 15000,
    limits: { maxRequestBytes: 64 * 1024 },
    gateway: open ? { allowUnauthenticated: true } : { clientKeysEnv: ["GATEWAY_KEY"] },
  };
}

function workerOptions(config, name, bindings = {}) {
  return {
    name,
    modules: true,
    scriptPath: path.join(ROOT, "build/index.js"),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
    compatibilityDate: "2026-08-01",
    compatibilityFlags: ["enable_request_signal"],
    bindings: { CONFIG: JSON.stringify(config), MOCK_API_KEY: MOCK_KEY, GATEWAY_KEY,
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey, ...bindings },
  };
}

/**
 * Starts Miniflare serving the Worker on a free port. `persist`: a directory for Durable
 * Object storage (a second start on it is a restart). `isolates: 2`: two workers with their
 * own isolate memory sharing the first one's Durable Object namespace. `bindings`: more
 * secrets, by name; `vars`: more bindings (`{ FLEET_FAULTS: "on" }` arms the breaker object's
 * test faults). `fleet: false`: no `BREAKERS` binding at all (the object is unreachable).
 */
export async function startGateway(config, { persist, isolates = 1, log = false, bindings = {}, vars = {}, fleet = true, onLog } = {}) {
  const durableObjectsPersist = persist ?? false;
  const first = {
    ...workerOptions(config, "a", { ...bindings, ...vars }),
    durableObjects: { BREAKERS: { className: "BreakerStore", useSQLite: true } },
  };
  if (!fleet) first.durableObjects = {};
  const workers = [first];
  if (isolates === 2) {
    workers.push({
      ...workerOptions(config, "b", { ...bindings, ...vars }),
      durableObjects: { BREAKERS: { className: "BreakerStore", scriptName: "a", useSQLite: true } },
    });
  }
  const logs = [];
  const options = {
    host: "127.0.0.1",
    port: 0,
    cf: false,
    durableObjectsPersist,
    workers,
    handleRuntimeStdio(stdout, stderr) {
      for (const s of [stdout, stderr]) {
        s.setEncoding("utf8");
        s.on("data", (chunk) => {
          for (const line of chunk.split("\n")) {
            if (!line.trim()) continue;
            if (onLog) onLog(line);
            else logs.push(line);
            if (log) process.stderr.write(`${line}\n`);
          }
        });
      }
    },
  };
  const mf = new Miniflare(options);
  let url = (await mf.ready).toString().replace(/\/$/, "");
  let handles = [];
  for (const w of workers) handles.push(await mf.getWorker(w.name));
  return {
    get url() { return url; },
    mf,
    logs,
    /** Restarts the runtime (every isolate and Durable Object; storage kept with `persist`). */
    async restart() {
      await mf.setOptions(options);
      url = (await mf.ready).toString().replace(/\/$/, "");
      handles = [];
      for (const w of workers) handles.push(await mf.getWorker(w.name));
    },
    /** fetch through isolate `i` (0 or 1). */
    fetch: (i, input, init) => handles[i].fetch(input, init),
    /** POST `body` to provider `key`'s breaker object as `http://do/<op>`: its status and text. */
    async fleet(key, op, body = { key }) {
      const ns = await mf.getDurableObjectNamespace("BREAKERS", "a");
      const res = await ns.get(ns.idFromName(key)).fetch(`http://do/${op}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    },
    close: () => mf.dispose(),
  };
}

export function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), "rl-e2e-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export { startMock };

/** Polls `check` every 50 ms until it returns truthy or `ms` pass. */
export async function eventually(check, ms = 3000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
