#!/usr/bin/env node
// The workerd configuration (capnp) of the self-hosted gateway, generated from wrangler.toml
// by scripts/serve.sh at every start (docs/selfhost.md). What it carries over:
//
//   main, compatibility_date, compatibility_flags   the built Worker's modules (build/index.js
//                                 and every .wasm it imports), the date and the flags
//   [durable_objects] bindings + [[migrations]]     each namespace, stored on disk as SQLite
//                                 under <state>/durable-objects/<uniqueKey>/ (a class of
//                                 new_sqlite_classes gets the SQL API, as on Cloudflare)
//   [vars]                        text bindings (JSON for non-strings); a variable also set in
//                                 the environment is read from the environment instead
//   CONFIG                        --config FILE (JSON), else the CONFIG environment variable,
//                                 else wrangler.toml's [vars] CONFIG
//   secrets                       every name the CONFIG refers to (any "...Env" field:
//                                 apiKeyEnv, clientKeysEnv, accessKeyIdEnv, ...), every
//                                 provider's default key variable, and each --secret NAME: a
//                                 `fromEnvironment` binding, read by workerd from its own
//                                 environment when it starts. No secret value is ever written.
//
// A wrangler.toml key the self-hosted runtime cannot honour (a KV namespace, an R2 bucket, a
// service binding, ...) is an error, not a silent omission; [[analytics_engine_datasets]] is
// dropped with a notice (workerd has no Analytics Engine; the Worker then writes no points).
//
//   node scripts/selfhost-config.mjs --state DIR [--listen ADDR:PORT] [--config FILE]
//       [--wrangler FILE] [--secret NAME]... [--out FILE]
// writes the configuration to --out (default <state>/workerd.capnp) and prints one JSON line
// on stdout: {"capnp": path, "workerd": the pinned binary, "listen": address,
// "secrets": [names], "notes": [...]}.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The variables a provider reads its credentials from when its entry names none (the Rust
 * defaults: src/provider/preset.rs, src/config/providers.rs, src/config/providers/vertex.rs).
 * Bound whether set or not: an unset one is `null` in the Worker, the same as no binding.
 */
export const DEFAULT_SECRET_NAMES = [
  "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "DEEPSEEK_API_KEY",
  "GROQ_API_KEY", "MISTRAL_API_KEY", "TOGETHER_API_KEY", "FIREWORKS_API_KEY",
  "OPENROUTER_API_KEY", "GEMINI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN", "GOOGLE_SERVICE_ACCOUNT_KEY",
];

/** wrangler.toml keys that describe deployment on Cloudflare only: nothing to carry. */
const DEPLOY_ONLY = new Set([
  "name", "build", "account_id", "workers_dev", "route", "routes", "preview_urls",
  "observability", "placement", "logpush", "minify", "keep_vars", "upload_source_maps",
  "send_metrics", "dev", "limits", "env", "tail_consumers", "no_bundle", "rules",
  "find_additional_modules", "base_dir", "preserve_file_names",
]);
/** Keys carried into the configuration (see the header). */
const CARRIED = new Set(["main", "compatibility_date", "compatibility_flags", "durable_objects", "migrations", "vars"]);
/** Bindings workerd has no equivalent for, dropped with a notice. */
const DROPPED = { analytics_engine_datasets: "workerd has no Analytics Engine: the Worker writes no data points" };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The pinned workerd binary (the npm package `workerd`, package.json's devDependency). */
export function workerdBinary() {
  return createRequire(path.join(ROOT, "package.json"))("workerd").default;
}

/** Reads and parses a wrangler.toml. */
export function readWrangler(file = path.join(ROOT, "wrangler.toml")) {
  return { file: path.resolve(file), toml: parseToml(readFileSync(file, "utf8")) };
}

/** Every name a configuration refers to by a field ending in `Env` (strings or string lists). */
export function referencedSecrets(config) {
  const names = new Set();
  const walk = (v) => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (!v || typeof v !== "object") return;
    for (const [k, x] of Object.entries(v)) {
      if (k.endsWith("Env") && typeof x === "string") names.add(x);
      else if (k.endsWith("Env") && Array.isArray(x)) x.filter((s) => typeof s === "string").forEach((s) => names.add(s));
      else walk(x);
    }
  };
  walk(config);
  return [...names];
}

/** A capnp text literal: UTF-8 as is, quotes, backslashes and control characters escaped. */
export function capnpText(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

/**
 * The self-hosted configuration. `wrangler`: from readWrangler; `state`: the state directory;
 * `listen`: "host:port"; `configFile`: a JSON file for CONFIG; `secrets`: more secret names;
 * `env`: the environment workerd will run with (only names are read from it, never written).
 * Returns { capnp (the file's text), bindings: [{name, kind}], secrets, notes, configText }.
 */
export function selfhostConfig({ wrangler, state, listen = "127.0.0.1:8787", configFile, secrets = [], env = process.env, out }) {
  const { toml, file } = wrangler;
  const dir = path.dirname(file);
  const notes = [];
  for (const key of Object.keys(toml)) {
    if (CARRIED.has(key) || DEPLOY_ONLY.has(key)) continue;
    if (key in DROPPED) {
      notes.push(`wrangler.toml [${key}] not carried: ${DROPPED[key]}`);
      continue;
    }
    throw new Error(`wrangler.toml: "${key}" has no self-hosted equivalent in scripts/selfhost-config.mjs; carry it there or list it as deploy-only`);
  }
  if (typeof toml.main !== "string") throw new Error("wrangler.toml: no main module");
  if (typeof toml.compatibility_date !== "string") throw new Error("wrangler.toml: no compatibility_date");
  const flags = toml.compatibility_flags ?? [];
  const workerName = typeof toml.name === "string" ? toml.name : "worker";

  // Modules: the main module and the .wasm files it imports (worker-build's output is exactly
  // an ES module importing "./index_bg.wasm"; anything else it imports is an error here).
  const main = path.resolve(dir, toml.main);
  const source = readFileSync(main, "utf8");
  const modules = [{ name: path.basename(main), kind: "esModule", file: main }];
  const imports = [...source.matchAll(/(?:\bimport\s*(?:[\w$*{}\s,]+\s*from\s*)?|\bfrom\s*)["']([^"']+)["']/g)].map((m) => m[1]);
  for (const spec of new Set(imports)) {
    if (spec.startsWith("cloudflare:") || spec.startsWith("node:")) continue;
    if (spec.startsWith("./") && spec.endsWith(".wasm")) {
      modules.push({ name: spec.slice(2), kind: "wasm", file: path.resolve(path.dirname(main), spec) });
      continue;
    }
    throw new Error(`${toml.main} imports "${spec}": only built-in modules and ./*.wasm are supported`);
  }

  // Durable Objects.
  const sqlite = new Set();
  for (const m of toml.migrations ?? []) {
    for (const c of m.new_sqlite_classes ?? []) sqlite.add(c);
    for (const c of m.deleted_classes ?? []) sqlite.delete(c);
    for (const r of m.renamed_classes ?? []) if (sqlite.delete(r.from)) sqlite.add(r.to);
  }
  const doBindings = toml.durable_objects?.bindings ?? [];
  const classes = new Set();
  const bindings = [];
  for (const b of doBindings) {
    if (b.script_name) throw new Error(`durable object binding ${b.name}: script_name (another Worker's class) is not supported self-hosted`);
    if (!NAME.test(b.name ?? "") || !b.class_name) throw new Error(`durable object binding ${JSON.stringify(b)}: needs name and class_name`);
    classes.add(b.class_name);
    bindings.push({ name: b.name, kind: "durableObjectNamespace", value: b.class_name });
  }
  for (const key of Object.keys(toml.durable_objects ?? {})) {
    if (key !== "bindings") throw new Error(`wrangler.toml [durable_objects] ${key}: not supported self-hosted`);
  }

  // Variables, CONFIG and secrets.
  const vars = { ...(toml.vars ?? {}) };
  let configText;
  let configFrom;
  if (configFile) {
    configText = readFileSync(configFile, "utf8");
    configFrom = `--config ${configFile}`;
  } else if (env.CONFIG) {
    configText = env.CONFIG;
    configFrom = "the CONFIG environment variable";
  } else if (typeof vars.CONFIG === "string") {
    configText = vars.CONFIG;
    configFrom = `${path.basename(file)} [vars]`;
  }
  let config;
  if (configText !== undefined) {
    try {
      config = JSON.parse(configText);
    } catch (e) {
      throw new Error(`CONFIG from ${configFrom} is not JSON: ${e.message}`);
    }
    delete vars.CONFIG;
    bindings.push({ name: "CONFIG", kind: "text", value: JSON.stringify(config) });
    notes.push(`CONFIG from ${configFrom}`);
  }
  const secretNames = new Set([...referencedSecrets(config ?? {}), ...DEFAULT_SECRET_NAMES, ...secrets]);
  for (const [name, value] of Object.entries(vars)) {
    if (!NAME.test(name)) throw new Error(`[vars] ${name}: not a binding name`);
    if (env[name] !== undefined) {
      // The environment wins, as .dev.vars does over [vars] under wrangler dev.
      secretNames.add(name);
      notes.push(`${name} from the environment (over [vars])`);
      continue;
    }
    secretNames.delete(name);
    if (typeof value === "string") bindings.push({ name, kind: "text", value });
    else bindings.push({ name, kind: "json", value: JSON.stringify(value) });
  }
  for (const name of secretNames) {
    if (!NAME.test(name)) throw new Error(`secret name "${name}" (in CONFIG or --secret) is not a valid variable name`);
    if (bindings.some((b) => b.name === name)) continue;
    bindings.push({ name, kind: "fromEnvironment", value: name });
  }
  const secretList = bindings.filter((b) => b.kind === "fromEnvironment").map((b) => b.name);

  // The capnp text. Paths in `embed` are relative to the configuration file.
  const stateDir = path.resolve(state);
  const outFile = path.resolve(out ?? path.join(stateDir, "workerd.capnp"));
  const rel = (f) => path.relative(path.dirname(outFile), f) || ".";
  const line = (b) => {
    const v = b.kind === "durableObjectNamespace" ? `(className = ${capnpText(b.value)})` : capnpText(b.value);
    return `    (name = ${capnpText(b.name)}, ${b.kind} = ${v}),`;
  };
  const nsLines = [...classes].map((c) =>
    `    (className = ${capnpText(c)}, uniqueKey = ${capnpText(`${workerName}-${c}`)}, enableSql = ${sqlite.has(c)}),`);
  const capnp = [
    "# Generated by scripts/selfhost-config.mjs from " + path.basename(file) + " at every start of scripts/serve.sh:",
    "# edits here are lost. Secrets are fromEnvironment bindings: no value is in this file.",
    'using Workerd = import "/workerd/workerd.capnp";',
    "",
    "const config :Workerd.Config = (",
    "  services = [",
    '    (name = "gateway", worker = .gateway),',
    `    (name = "durable-objects", disk = (path = ${capnpText(path.join(stateDir, "durable-objects"))}, writable = true)),`,
    "    # Providers may be on this machine or the local network (vLLM, Ollama): private addresses too.",
    '    (name = "internet", network = (allow = ["public", "private"], tlsOptions = (trustBrowserCas = true))),',
    "  ],",
    `  sockets = [(name = "http", address = ${capnpText(listen)}, http = (), service = "gateway")],`,
    ");",
    "",
    "const gateway :Workerd.Worker = (",
    "  modules = [",
    ...modules.map((m) => `    (name = ${capnpText(m.name)}, ${m.kind} = embed ${capnpText(rel(m.file))}),`),
    "  ],",
    `  compatibilityDate = ${capnpText(toml.compatibility_date)},`,
    `  compatibilityFlags = [${flags.map(capnpText).join(", ")}],`,
    "  bindings = [",
    ...bindings.map(line),
    "  ],",
    "  durableObjectNamespaces = [",
    ...nsLines,
    "  ],",
    `  durableObjectStorage = ${classes.size ? '(localDisk = "durable-objects")' : "(none = void)"},`,
    ");",
    "",
  ].join("\n");
  return { capnp, out: outFile, bindings: bindings.map(({ name, kind }) => ({ name, kind })), secrets: secretList, notes, listen, classes: [...classes] };
}

function cli(argv) {
  const opts = { secrets: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--state") opts.state = value();
    else if (a === "--listen") opts.listen = value();
    else if (a === "--config") opts.configFile = value();
    else if (a === "--wrangler") opts.wranglerFile = value();
    else if (a === "--secret") opts.secrets.push(value());
    else if (a === "--out") opts.out = value();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!opts.state) throw new Error("--state DIR is required");
  const result = selfhostConfig({ ...opts, wrangler: readWrangler(opts.wranglerFile) });
  mkdirSync(path.join(path.resolve(opts.state), "durable-objects"), { recursive: true });
  // Owner-only: it holds CONFIG as given, and a CONFIG may hold an inline apiKey (use *Env).
  writeFileSync(result.out, result.capnp, { mode: 0o600 });
  chmodSync(result.out, 0o600);
  process.stdout.write(`${JSON.stringify({ capnp: result.out, workerd: workerdBinary(), listen: result.listen, secrets: result.secrets, notes: result.notes })}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    cli(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`selfhost-config: ${e.message}\n`);
    process.exit(2);
  }
}
