// The self-hosted configuration (scripts/selfhost-config.mjs) against the checked-in
// wrangler.toml: every binding it declares is carried into workerd's capnp configuration, a
// binding kind the generator does not know fails the generation (so adding one to
// wrangler.toml without carrying it fails here), and no secret value is ever written.
// Needs no build: a stand-in main module in a temporary directory.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { stringify } from "smol-toml";
import {
  DEFAULT_SECRET_NAMES, ROOT, capnpText, readWrangler, referencedSecrets, selfhostConfig,
} from "../../scripts/selfhost-config.mjs";
import { tempDir } from "./gateway-harness.mjs";

/** wrangler.toml as checked in, its main module replaced by a stand-in of worker-build's shape. */
function checkedIn(tmp, edit = (t) => t) {
  const { toml } = readWrangler();
  mkdirSync(path.join(tmp, "build"), { recursive: true });
  writeFileSync(path.join(tmp, "build/index.js"), 'import{WorkerEntrypoint}from"cloudflare:workers";import w from"./index_bg.wasm";export default {};');
  writeFileSync(path.join(tmp, "build/index_bg.wasm"), "");
  const file = path.join(tmp, "wrangler.toml");
  writeFileSync(file, stringify(edit(structuredClone(toml))));
  return { toml, wrangler: readWrangler(file) };
}

const generate = (wrangler, extra = {}) => selfhostConfig({ wrangler, state: path.join(path.dirname(wrangler.file), "state"), env: {}, ...extra });

test("every binding of wrangler.toml is in the generated configuration", () => {
  const tmp = tempDir();
  try {
    const { toml, wrangler } = checkedIn(tmp.dir);
    const out = generate(wrangler, { listen: "127.0.0.1:9999" });
    const names = new Map(out.bindings.map((b) => [b.name, b.kind]));
    // Durable Objects: each binding, its class stored on disk with the SQL API.
    assert.ok(toml.durable_objects.bindings.length > 0);
    for (const b of toml.durable_objects.bindings) {
      assert.equal(names.get(b.name), "durableObjectNamespace", b.name);
      assert.match(out.capnp, new RegExp(`\\(name = "${b.name}", durableObjectNamespace = \\(className = "${b.class_name}"\\)\\)`));
      const sqlite = toml.migrations.some((m) => (m.new_sqlite_classes ?? []).includes(b.class_name));
      assert.match(out.capnp, new RegExp(`className = "${b.class_name}", uniqueKey = "${toml.name}-${b.class_name}", enableSql = ${sqlite}`));
    }
    assert.match(out.capnp, /durableObjectStorage = \(localDisk = "durable-objects"\)/);
    assert.match(out.capnp, /\(name = "durable-objects", disk = \(path = "[^"]+\/state\/durable-objects", writable = true\)\)/);
    // Every [vars] entry, CONFIG as its JSON text.
    for (const [name, value] of Object.entries(toml.vars)) {
      assert.equal(names.get(name), "text", name);
      const expected = name === "CONFIG" ? JSON.stringify(JSON.parse(value)) : value;
      assert.ok(out.capnp.includes(`(name = "${name}", text = ${capnpText(expected)})`), name);
    }
    // Date, flags, modules, the socket.
    assert.ok(out.capnp.includes(`compatibilityDate = "${toml.compatibility_date}"`));
    assert.ok(out.capnp.includes(`compatibilityFlags = [${toml.compatibility_flags.map((f) => `"${f}"`).join(", ")}]`));
    assert.match(out.capnp, /\(name = "index.js", esModule = embed "\.\.\/build\/index.js"\)/);
    assert.match(out.capnp, /\(name = "index_bg.wasm", wasm = embed "\.\.\/build\/index_bg.wasm"\)/);
    assert.match(out.capnp, /address = "127.0.0.1:9999"/);
    // Only what the generator knows about: every top-level key of the real file is handled
    // (generation above did not throw), and the one dropped binding kind is said so.
    if (toml.analytics_engine_datasets) assert.ok(out.notes.some((n) => n.includes("analytics_engine_datasets")));
  } finally {
    tmp.remove();
  }
});

test("a binding kind the generator does not carry fails the generation, by name", () => {
  const tmp = tempDir();
  try {
    for (const [key, value] of [
      ["kv_namespaces", [{ binding: "CACHE", id: "x" }]],
      ["r2_buckets", [{ binding: "BUCKET", bucket_name: "b" }]],
      ["services", [{ binding: "AUTH", service: "auth" }]],
      ["d1_databases", [{ binding: "DB", database_id: "x" }]],
      ["queues", { producers: [{ binding: "Q", queue: "q" }] }],
    ]) {
      const { wrangler } = checkedIn(tmp.dir, (t) => ({ ...t, [key]: value }));
      assert.throws(() => generate(wrangler), new RegExp(`"${key}" has no self-hosted equivalent`), key);
    }
    const { wrangler } = checkedIn(tmp.dir, (t) => {
      t.durable_objects.bindings.push({ name: "OTHER", class_name: "Other", script_name: "elsewhere" });
      return t;
    });
    assert.throws(() => generate(wrangler), /script_name/);
  } finally {
    tmp.remove();
  }
});

test("a second Durable Object binding and a new var are carried without a change to the generator", () => {
  const tmp = tempDir();
  try {
    const { wrangler } = checkedIn(tmp.dir, (t) => {
      t.durable_objects.bindings.push({ name: "LEDGER", class_name: "Ledger" });
      t.migrations.push({ tag: "v2", new_sqlite_classes: ["Ledger"] });
      t.vars.LIMIT = 3;
      return t;
    });
    const out = generate(wrangler);
    assert.match(out.capnp, /\(name = "LEDGER", durableObjectNamespace = \(className = "Ledger"\)\)/);
    assert.match(out.capnp, /className = "Ledger", uniqueKey = "resilient-llm-Ledger", enableSql = true/);
    assert.match(out.capnp, /\(name = "LIMIT", json = "3"\)/);
  } finally {
    tmp.remove();
  }
});

test("secrets: every name CONFIG refers to, read from the environment, never written", () => {
  const tmp = tempDir();
  try {
    const { wrangler } = checkedIn(tmp.dir);
    const config = {
      providers: {
        a: { kind: "anthropic", apiKeyEnv: "TEAM_ANTHROPIC_KEY" },
        b: { kind: "bedrock", region: "us-east-1", accessKeyIdEnv: "B_ID", secretAccessKeyEnv: "B_SECRET" },
      },
      routes: { default: [{ provider: "a", model: "m" }] },
      gateway: { clientKeysEnv: ["GATEWAY_KEY", "GATEWAY_KEY_NEXT"] },
    };
    const configFile = path.join(tmp.dir, "config.json");
    writeFileSync(configFile, JSON.stringify(config));
    assert.deepEqual(referencedSecrets(config).sort(), ["B_ID", "B_SECRET", "GATEWAY_KEY", "GATEWAY_KEY_NEXT", "TEAM_ANTHROPIC_KEY"]);
    const env = { TEAM_ANTHROPIC_KEY: "sk-secret-value-1", GATEWAY_KEY: "client-secret-2", MOCK_API_KEY: "env-over-var-3" };
    const out = generate(wrangler, { configFile, env, secrets: ["EXTRA_ONE"] });
    for (const name of [...referencedSecrets(config), ...DEFAULT_SECRET_NAMES, "EXTRA_ONE"]) {
      assert.ok(out.capnp.includes(`(name = "${name}", fromEnvironment = "${name}")`), name);
    }
    // A [vars] entry also set in the environment is read from it (as .dev.vars under wrangler dev).
    assert.ok(out.capnp.includes('(name = "MOCK_API_KEY", fromEnvironment = "MOCK_API_KEY")'));
    assert.ok(!out.capnp.includes('(name = "MOCK_API_KEY", text'));
    for (const value of Object.values(env)) assert.ok(!out.capnp.includes(value), "a secret value in the configuration");
    assert.ok(out.capnp.includes(capnpText(JSON.stringify(config))), "CONFIG from --config");
  } finally {
    tmp.remove();
  }
});

test("the default key variables are the Rust sources' defaults", () => {
  // String literals naming a variable in the code (not comments, not tests) of the files
  // that define the defaults.
  const files = ["src/provider/preset.rs", "src/config/providers.rs", "src/config/providers/vertex.rs"];
  const found = new Set();
  for (const f of files) {
    const code = readFileSync(path.join(ROOT, f), "utf8").split("#[cfg(test)]")[0];
    const text = code.split("\n").filter((l) => !l.trimStart().startsWith("//")).join("\n");
    for (const m of text.matchAll(/"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:KEY|ID|TOKEN))"/g)) found.add(m[1]);
  }
  assert.deepEqual([...found].sort(), [...DEFAULT_SECRET_NAMES].sort());
});

test("capnp text escaping", () => {
  assert.equal(capnpText('a"b\\c\nd\te\u0001é'), '"a\\"b\\\\c\\nd\\te\\x01é"');
});
