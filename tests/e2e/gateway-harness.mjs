// Shared set-up for the Worker's end-to-end tests: the built Worker (build/index.js +
// index_bg.wasm, from scripts/test-worker.sh) in Miniflare with a real Durable Object, in
// front of the fault-injecting mock provider. Everything listens on 127.0.0.1, port 0.
import { Miniflare } from "miniflare";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
 * Object storage (a second start on it is a restart). `isolates: n`: n workers with their
 * own isolate memory sharing the first one's Durable Object namespaces. `colos`: the data
 * centre (`request.cf.colo`) each isolate's requests arrive at, by index (default: the one
 * Miniflare names). `bindings`: more secrets, by name; `vars`: more bindings
 * (`{ FLEET_FAULTS: "on" }` arms the objects' test faults). `fleet: false`: no `BREAKERS`
 * binding at all (the object is unreachable). `relays: false`: no `RELAYS` binding (isolates
 * call the owners directly, as before relays).
 */
export async function startGateway(config, { persist, isolates = 1, colos = [], log = false, bindings = {}, vars = {}, fleet = true, relays = true, onLog } = {}) {
  const durableObjectsPersist = persist ?? false;
  const objects = (scriptName) => {
    const own = scriptName ? { scriptName } : {};
    const ns = { BREAKERS: { className: "BreakerStore", useSQLite: true, ...own } };
    if (relays) ns.RELAYS = { className: "FleetRelay", useSQLite: true, ...own };
    return fleet ? ns : {};
  };
  const workers = [];
  for (let i = 0; i < isolates; i++) {
    const name = String.fromCharCode(97 + i);
    workers.push({ ...workerOptions(config, name, { ...bindings, ...vars }), durableObjects: objects(i === 0 ? undefined : "a") });
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
    /** fetch through isolate `i`, arriving at its data centre (`colos[i]`) when one is set. */
    fetch: (i, input, init) => handles[i].fetch(input, colos[i] ? { ...init, cf: { colo: colos[i] } } : init),
    /** POST `body` to model `key`'s breaker object (its owner) as `http://do/<op>`: its status and text. */
    async fleet(key, op, body = { key }) {
      const ns = await mf.getDurableObjectNamespace("BREAKERS", "a");
      const res = await ns.get(ns.idFromName(key)).fetch(`http://do/${op}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    },
    /** POST `body` to model `key`'s relay in data centre `colo` as `http://do/<op>`. */
    async relay(colo, key, op, body = { key }) {
      const ns = await mf.getDurableObjectNamespace("RELAYS", "a");
      const res = await ns.get(ns.idFromName(`${colo} ${key}`)).fetch(`http://do/${op}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    },
    close: () => mf.dispose(),
  };
}

/**
 * Starts the self-hosted gateway: `scripts/serve.sh --no-build` (the command the container
 * image runs) on 127.0.0.1, a free port, with `config` as its --config file, the mock's key and
 * the client key as secrets in its environment only, and its Durable Objects in `state` (a
 * second start on it is a restart). The same surface as startGateway's, with one isolate:
 * `url`, `logs`, `fetch(0, "http://gateway/…")`, `restart()` (SIGTERM, then a new process on
 * the same state), `close()`; and `pid`, `exitCode` (of the last process stopped).
 */
export async function startSelfHosted(config, { state, env = {}, log = false, onLog } = {}) {
  const own = state === undefined ? tempDir() : null;
  const stateDir = state ?? own.dir;
  const configFile = path.join(stateDir, "test-config.json");
  writeFileSync(configFile, JSON.stringify(config));
  const logs = [];
  let child;
  let url;
  let exitCode;
  const start = async () => {
    child = spawn(path.join(ROOT, "scripts/serve.sh"),
      ["--no-build", "--listen", "127.0.0.1:0", "--state", stateDir, "--config", configFile, "--", "--control-fd=3"], {
        cwd: ROOT,
        env: { ...process.env, MOCK_API_KEY: MOCK_KEY, GATEWAY_KEY, ...env },
        stdio: ["ignore", "pipe", "pipe", "pipe"],
      });
    for (const s of [child.stdout, child.stderr]) {
      s.setEncoding("utf8");
      let rest = "";
      s.on("data", (chunk) => {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop();
        for (const line of lines) {
          if (!line.trim()) continue;
          if (onLog) onLog(line);
          else logs.push(line);
          if (log) process.stderr.write(`${line}\n`);
        }
      });
    }
    // workerd reports each socket's port on the control fd: {"event":"listen","port":…}.
    const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
    const listening = new Promise((resolve) => {
      let buf = "";
      child.stdio[3].setEncoding("utf8");
      child.stdio[3].on("data", (chunk) => {
        buf += chunk;
        for (const line of buf.split("\n")) {
          if (!line.trim()) continue;
          try {
            const msg = JSON.parse(line);
            if (msg.event === "listen" && msg.port) resolve(msg.port);
          } catch { /* a partial line */ }
        }
      });
    });
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("serve.sh did not listen within 30 s")), 30000).unref());
    const port = await Promise.race([listening, exited.then((c) => {
      throw new Error(`serve.sh exited (${c}) before listening:\n${logs.slice(-20).join("\n")}`);
    }), timeout]);
    url = `http://127.0.0.1:${port}`;
  };
  const stop = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
    exitCode = await exited;
    clearTimeout(timer);
  };
  await start();
  return {
    get url() { return url; },
    get pid() { return child.pid; },
    get exitCode() { return exitCode; },
    logs,
    async restart() {
      await stop();
      await start();
    },
    fetch: (_i, input, init) => fetch(String(input).replace(/^http:\/\/[^/]+/, url), init),
    async close() {
      await stop();
      own?.remove();
    },
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
