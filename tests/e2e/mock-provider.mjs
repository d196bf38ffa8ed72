#!/usr/bin/env node
// A fault-injecting mock LLM provider server: many named providers on one port, each speaking
// the OpenAI chat-completions and Anthropic messages formats (JSON and SSE streams), each with
// its own scripted faults. No dependencies; Node >= 20; listens on 127.0.0.1 only.
//
//   node tests/e2e/mock-provider.mjs [--port 0] [--config FILE | --config-json JSON]
//                                    [--seed N] [--log]
//
// prints {"listening":"http://127.0.0.1:PORT"} on stdout once ready. From tests:
//
//   import { startMock } from "./mock-provider.mjs";
//   const mock = await startMock({ config: { providers: { primary: {} } } });
//   await fetch(`${mock.url}/p/primary/v1/chat/completions`, …);
//   mock.received("primary");   // what it received (as GET /admin/primary/received); clearReceived()
//   await mock.close();
//
// Routes (any provider name works; unconfigured ones answer normally):
//   POST /p/<name>/v1/chat/completions   OpenAI format  (SDK baseURL: <url>/p/<name>/v1)
//   POST /p/<name>/v1/messages           Anthropic format (SDK baseURL: <url>/p/<name>)
//   POST /p/<name>/v1/responses          OpenAI Responses (tests/e2e/mock-responses.mjs)
//   GET  /p/<name>/v1/models             model list (Anthropic shape with anthropic-version)
//   POST /p/<name>/v1/embeddings, /p/<name>/v1/messages/count_tokens
//                                        deterministic vectors, token counts (mock-endpoints.mjs)
//   POST /bedrock/<name>/model/<id>/{invoke,invoke-with-response-stream,converse,converse-stream}
//                                        AWS Bedrock, SigV4-checked (tests/e2e/mock-bedrock.mjs)
//   POST /vertex/…                       Google Vertex AI: token endpoint, rawPredict, generateContent
//                                        (tests/e2e/mock-vertex.mjs says how)
//   GET  /health
//   GET  /admin/stats                    every provider's counters
//   GET  /admin/<name>/stats             one provider's counters and last request
//   GET  /admin/<name>/received          {received: [{seq, at, method, path, format, headers,
//                                        keyDigests, body}]}: its last 200 chat requests, oldest
//                                        first (keys redacted; keyDigests: their SHA-256, 12 hex)
//   DELETE /admin/<name>/received        forgets them
//   GET  /admin/<name>/fault             its current settings
//   POST /admin/<name>/fault             change its settings (body below)
//   POST /admin/<name>/reset             its startup settings back, counters and RNG reset
//   POST /admin/reset                    the same for every provider
//
// Config: { "seed": 1, "providers": { "<name>": PROVIDER, … } }   (keys starting with $ are comments)
// PROVIDER: { "latencyMs": 0, "requireKey": false, "prefill": "accept" | "reject",
//             "models": ["…"] (others get 404), "chunkDelayMs": 0, "faults": [RULE, …],
//             "answerTokens": n, "tokensPerChunk": 1, "streamUsage": "asked" | "never",
//             "future": false, "redactThinking": false,
//             "quality": "invalid-json" | "json" | "json-no-answer" (mock-quality.mjs: answers of a set quality),
//             "pool": { "requests": n, "tokens": n, "windowMs": ms } (mock-pool.mjs: a rate-limit pool
//             that counts down in its headers and answers 429 when empty) }
//   answerTokens: the answer's words repeated to exactly n tokens (one word = one token), for
//   long answers from short prompts; tokensPerChunk: tokens per streamed content chunk;
//   streamUsage "never": no usage chunk even when a stream asks for one; future: fields and
//   event types no current client knows; redactThinking: Anthropic thinking comes as
//   redacted_thinking blocks (tests/e2e/mock-answers.mjs: what answers hold).
// RULE: { "mode": "ok" | "status" | "hang" | "slow" | "reset" | "malformed" | "stall" | "stream"
//         | "echo-key" (an error quoting the key it was sent: mock-echo.mjs),
//         "firstN": n, "p": 0..1, "latencyMs": ms, "model": name, …mode options }
//   The first rule that takes a request decides it; none: a normal answer. A rule takes a
//   request it sees when it is still within `firstN` (counting the requests that reached it)
//   and a draw of the provider's seeded RNG is below `p` (when given). "stream" rules only
//   see streaming requests; a rule with "model" only requests for that model. Options:
//   status:    status (503), error (kind, default from status: rate_limit, insufficient_quota,
//              context_length_exceeded, content_policy, invalid_request, auth, permission,
//              not_found, request_too_large, timeout, server, unavailable, overloaded),
//              message, retryAfter (seconds or HTTP-date), retryAfterMs, headers {…}
//   hang:      never answers until the client goes away (or holdMs, default 10 min)
//   slow:      slowFirstByteMs before the normal answer
//   reset:     afterMs, then the socket is reset with nothing sent
//   malformed: a 200 application/json answer cut in the middle
//   stall:     a 200 application/json answer's first half, its length declared whole, then
//              nothing until the client goes away (or holdMs)
//   stream:    cutAfterChunks k (socket destroyed after k content chunks), stallAfterChunks k
//              (nothing more sent, socket kept open), malformedChunkAt k (content chunk k,
//              0-based, is invalid JSON), noDone (no [DONE] / message_stop), slowFirstTokenMs
//              (headers and preamble at once, the first content chunk late), endAfterChunks k
//              (after k content chunks, the stream's end — [DONE], message_stop — with no
//              finish reason before it: a cut dressed as an end). k may exceed the content:
//              the fault then hits before the finish chunk.
// POST /admin/<name>/fault takes a RULE (the rules become [RULE]) or a PROVIDER whose given
// fields replace the current ones; either way rule counters start again.
import { createHash } from "node:crypto";
import http from "node:http";
import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { FORMATS, planAnswer } from "./mock-answers.mjs";
import { bedrockBody, bedrockErrorBody, bedrockErrorHeaders, bedrockFormat, bedrockFrame, bedrockRoute, signatureProblem } from "./mock-bedrock.mjs";
import { echoKey } from "./mock-echo.mjs";
import { responses } from "./mock-responses.mjs";
import { endpointFor } from "./mock-endpoints.mjs";
import { routeVertex, vertexApi } from "./mock-vertex.mjs";
import { qualityPlan, qualityProblem } from "./mock-quality.mjs";
import { newPool, poolProblem, take } from "./mock-pool.mjs";

const HOST = "127.0.0.1";
const MAX_BODY_BYTES = 8 * 1024 * 1024;
const DEFAULT_HOLD_MS = 10 * 60 * 1000;
const AUTH_HEADERS = new Set(["authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"]);
const PROVIDER_KEYS = new Set(["latencyMs", "requireKey", "prefill", "models", "chunkDelayMs", "faults", "fault",
  "answerTokens", "tokensPerChunk", "streamUsage", "future", "redactThinking", "quality", "pool"]);
const MAX_RECEIVED = 200;
const RULE_KEYS = {
  common: ["mode", "firstN", "p", "latencyMs", "model"],
  ok: [],
  status: ["status", "error", "message", "retryAfter", "retryAfterMs", "headers"],
  hang: ["holdMs"],
  slow: ["slowFirstByteMs"],
  reset: ["afterMs"],
  malformed: [],
  stall: ["holdMs"],
  stream: ["cutAfterChunks", "stallAfterChunks", "malformedChunkAt", "noDone", "slowFirstTokenMs", "holdMs", "endAfterChunks"],
  "echo-key": ["status"], // mock-echo.mjs
};

// ---------------------------------------------------------------- settings and validation

class ConfigError extends Error {}

function check(cond, message) {
  if (!cond) throw new ConfigError(message);
}

/** The keys of a settings object, less comments ("$comment" and any other key starting with $). */
function settingKeys(obj) {
  return Object.keys(obj).filter((key) => !key.startsWith("$"));
}

function isCount(v) {
  return Number.isInteger(v) && v >= 0;
}

function normalizeRule(raw, where) {
  check(raw && typeof raw === "object" && !Array.isArray(raw), `${where}: a rule must be an object`);
  const mode = raw.mode ?? "ok";
  check(Object.hasOwn(RULE_KEYS, mode) && mode !== "common", `${where}.mode: unknown mode ${JSON.stringify(mode)}`);
  const allowed = new Set([...RULE_KEYS.common, ...RULE_KEYS[mode]]);
  for (const key of settingKeys(raw)) check(allowed.has(key), `${where}.${key}: not an option of mode "${mode}"`);
  for (const key of ["firstN", "latencyMs", "holdMs", "slowFirstByteMs", "afterMs", "retryAfterMs",
    "cutAfterChunks", "stallAfterChunks", "malformedChunkAt", "slowFirstTokenMs", "endAfterChunks"]) {
    check(raw[key] === undefined || isCount(raw[key]), `${where}.${key}: must be a whole number >= 0`);
  }
  check(raw.p === undefined || (typeof raw.p === "number" && raw.p >= 0 && raw.p <= 1), `${where}.p: must be in [0, 1]`);
  check(raw.model === undefined || typeof raw.model === "string", `${where}.model: must be a model name`);
  if (mode === "status") {
    const status = raw.status ?? 503;
    check(Number.isInteger(status) && status >= 400 && status <= 599, `${where}.status: must be 400..599`);
    check(raw.error === undefined || Object.hasOwn(ERROR_KINDS, raw.error), `${where}.error: unknown kind ${JSON.stringify(raw.error)}`);
    check(raw.retryAfter === undefined || ["number", "string"].includes(typeof raw.retryAfter), `${where}.retryAfter: seconds or an HTTP-date`);
    check(raw.headers === undefined || (typeof raw.headers === "object" && !Array.isArray(raw.headers)), `${where}.headers: must be an object`);
    return { ...withoutComments(raw), mode, status, error: raw.error ?? kindForStatus(status) };
  }
  return { ...withoutComments(raw), mode };
}

function withoutComments(obj) {
  return Object.fromEntries(settingKeys(obj).map((key) => [key, obj[key]]));
}

function normalizeProvider(raw, where, base = defaultProvider()) {
  check(raw && typeof raw === "object" && !Array.isArray(raw), `${where}: must be an object`);
  if (raw.mode !== undefined) return { ...base, faults: [normalizeRule(raw, where)] };
  for (const key of settingKeys(raw)) check(PROVIDER_KEYS.has(key), `${where}.${key}: unknown setting`);
  check(raw.latencyMs === undefined || isCount(raw.latencyMs), `${where}.latencyMs: must be a whole number >= 0`);
  check(raw.chunkDelayMs === undefined || isCount(raw.chunkDelayMs), `${where}.chunkDelayMs: must be a whole number >= 0`);
  for (const key of ["answerTokens", "tokensPerChunk"]) {
    check(raw[key] === undefined || (Number.isInteger(raw[key]) && raw[key] >= 1 && raw[key] <= 1_000_000), `${where}.${key}: must be a whole number in 1..1000000`);
  }
  check(raw.streamUsage === undefined || ["asked", "never"].includes(raw.streamUsage), `${where}.streamUsage: "asked" or "never"`);
  check(qualityProblem(raw.quality) === null, `${where}.quality: ${qualityProblem(raw.quality)} (mock-quality.mjs)`);
  check(poolProblem(raw.pool) === null, `${where}.pool: ${poolProblem(raw.pool)} (mock-pool.mjs)`);
  for (const key of ["future", "redactThinking"]) check(raw[key] === undefined || typeof raw[key] === "boolean", `${where}.${key}: true or false`);
  check(raw.prefill === undefined || ["accept", "reject"].includes(raw.prefill), `${where}.prefill: "accept" or "reject"`);
  check(raw.models === undefined || (Array.isArray(raw.models) && raw.models.every((m) => typeof m === "string")), `${where}.models: a list of names`);
  check(!(raw.faults && raw.fault), `${where}: give "faults" or "fault", not both`);
  const rules = raw.fault ? [raw.fault] : raw.faults;
  check(rules === undefined || Array.isArray(rules), `${where}.faults: must be a list`);
  const next = { ...base };
  for (const key of ["latencyMs", "requireKey", "prefill", "models", "chunkDelayMs", "answerTokens", "tokensPerChunk", "streamUsage", "future",
    "redactThinking", "quality", "pool"]) {
    if (raw[key] !== undefined) next[key] = raw[key];
  }
  next.requireKey = Boolean(next.requireKey);
  if (rules) next.faults = rules.map((r, i) => normalizeRule(r, `${where}.faults[${i}]`));
  return next;
}

function defaultProvider() {
  return { latencyMs: 0, requireKey: false, prefill: "accept", models: null, chunkDelayMs: 0, faults: [], answerTokens: null, tokensPerChunk: 1,
    streamUsage: "asked", future: false, redactThinking: false };
}

function normalizeConfig(raw) {
  const config = raw ?? {};
  check(typeof config === "object" && !Array.isArray(config), "config: must be an object");
  for (const key of settingKeys(config)) check(["seed", "providers"].includes(key), `config.${key}: unknown setting`);
  check(config.seed === undefined || Number.isInteger(config.seed), "config.seed: must be an integer");
  const providers = {};
  check(config.providers === undefined || (typeof config.providers === "object" && !Array.isArray(config.providers)), "config.providers: must be an object");
  for (const [name, p] of Object.entries(config.providers ?? {})) {
    if (name.startsWith("$")) continue;
    check(/^[A-Za-z0-9_.-]{1,64}$/.test(name), `config.providers: bad provider name ${JSON.stringify(name)}`);
    providers[name] = normalizeProvider(p, `providers.${name}`);
  }
  return { seed: config.seed ?? 1, providers };
}

// ---------------------------------------------------------------- per-provider state

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hashString(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

function emptyStats() {
  return { total: 0, inFlight: 0, aborted: 0, streams: 0, poolRefused: 0, byStatus: {}, byFormat: {}, faults: {}, lastRequest: null };
}

class Provider {
  constructor(name, settings, seed) {
    this.name = name;
    this.initial = settings;
    this.seed = seed;
    this.reset();
  }

  reset() {
    this.setSettings(this.initial);
    this.random = seededRandom(hashString(`${this.seed}:${this.name}`));
    this.stats = emptyStats();
    this.seq = 0;
    this.received = [];
    this.cacheSeen = new Set();
  }

  setSettings(settings) {
    this.settings = settings;
    this.rules = settings.faults.map((rule) => ({ rule, seen: 0 }));
    this.pool = settings.pool ? newPool(settings.pool) : null;
  }

  /** The rule that takes this request, or null for a normal answer. Counts and draws. */
  pickRule(isStream, model) {
    for (const entry of this.rules) {
      if (entry.rule.mode === "stream" && !isStream) continue;
      if (entry.rule.model !== undefined && entry.rule.model !== model) continue;
      const { firstN, p } = entry.rule;
      if (firstN !== undefined && entry.seen >= firstN) continue;
      entry.seen += 1;
      if (p !== undefined && !(this.random() < p)) continue;
      return entry.rule;
    }
    return null;
  }

  count(field, key) {
    const table = this.stats[field];
    table[key] = (table[key] ?? 0) + 1;
  }
}

// ---------------------------------------------------------------- the two wire formats

const ERROR_KINDS = {
  rate_limit: { status: 429, openai: ["requests", "rate_limit_exceeded"], anthropic: "rate_limit_error", message: "Rate limit reached for requests. Please try again later." },
  insufficient_quota: { status: 429, openai: ["insufficient_quota", "insufficient_quota"], anthropic: "invalid_request_error", message: "You exceeded your current quota, please check your plan and billing details. (Your credit balance is too low.)" },
  context_length_exceeded: { status: 400, openai: ["invalid_request_error", "context_length_exceeded", "messages"], anthropic: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum (This model's maximum context length is 200000 tokens.)" },
  content_policy: { status: 400, openai: ["invalid_request_error", "content_policy_violation"], anthropic: "invalid_request_error", message: "Output blocked by content filtering policy: the request was rejected by the safety system." },
  invalid_request: { status: 400, openai: ["invalid_request_error", null], anthropic: "invalid_request_error", message: "Invalid request." },
  auth: { status: 401, openai: ["invalid_request_error", "invalid_api_key"], anthropic: "authentication_error", message: "Invalid or missing API key." },
  permission: { status: 403, openai: ["invalid_request_error", "permission_denied"], anthropic: "permission_error", message: "Your API key does not have permission to use this resource." },
  not_found: { status: 404, openai: ["invalid_request_error", "model_not_found", "model"], anthropic: "not_found_error", message: "The model does not exist or you do not have access to it." },
  request_too_large: { status: 413, openai: ["invalid_request_error", "request_too_large"], anthropic: "request_too_large", message: "Request exceeds the maximum allowed number of bytes." },
  timeout: { status: 504, openai: ["timeout", null], anthropic: "timeout_error", message: "Request timed out." },
  server: { status: 500, openai: ["server_error", null], anthropic: "api_error", message: "The server had an error while processing your request." },
  unavailable: { status: 503, openai: ["server_error", null], anthropic: "api_error", message: "The engine is currently overloaded, please try again later." },
  overloaded: { status: 529, openai: ["server_error", "overloaded"], anthropic: "overloaded_error", message: "Overloaded" },
};

function kindForStatus(status) {
  const byStatus = { 400: "invalid_request", 401: "auth", 403: "permission", 404: "not_found", 408: "timeout",
    413: "request_too_large", 429: "rate_limit", 503: "unavailable", 504: "timeout", 529: "overloaded" };
  return byStatus[status] ?? (status >= 500 ? "server" : "invalid_request");
}

function errorBody(format, kind, message) {
  const spec = ERROR_KINDS[kind];
  if (format === "bedrock") return bedrockErrorBody(kind, message);
  const text = message ?? spec.message;
  if (format === "anthropic") return { type: "error", error: { type: spec.anthropic, message: text } };
  const [type, code, param = null] = spec.openai;
  return { error: { message: text, type, param, code } };
}


// ---------------------------------------------------------------- HTTP plumbing

function sendJson(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function readBody(req) {
  const parts = [];
  let size = 0;
  for await (const part of req) {
    size += part.length;
    if (size > MAX_BODY_BYTES) return null;
    parts.push(part);
  }
  return Buffer.concat(parts).toString("utf8");
}

function redactHeaders(headers) {
  const out = {};
  for (const [key, value] of Object.entries(headers)) out[key] = AUTH_HEADERS.has(key) ? "[redacted]" : value;
  return out;
}

/**
 * The first 12 hex digits of each key header's SHA-256, so a test can tell which key came
 * (the provider's own, not the client's) without the key itself in any output.
 */
export function keyDigests(headers) {
  const out = {};
  for (const [key, value] of Object.entries(headers)) if (AUTH_HEADERS.has(key)) out[key] = keyDigest(value);
  return out;
}

export function keyDigest(value) {
  return createHash("sha256").update(String(value)).digest("hex").slice(0, 12);
}

function hasKey(headers) {
  const bearer = /^Bearer\s+\S+/i.test(headers.authorization ?? "");
  return bearer || (headers["x-api-key"] ?? "").trim() !== "";
}

/** Waits ms, or until the request is gone (then throws AbortError). */
function wait(ms, signal) {
  return ms > 0 ? delay(ms, undefined, { signal }) : Promise.resolve();
}

/** Keeps the response open, sending nothing, until the client leaves or holdMs passes. */
async function hold(ctx, holdMs = DEFAULT_HOLD_MS) {
  await wait(holdMs, ctx.signal);
  destroy(ctx);
}

function destroy(ctx, reset = false) {
  ctx.destroyedByUs = true;
  const socket = ctx.res.socket ?? ctx.req.socket;
  if (reset && typeof socket?.resetAndDestroy === "function") socket.resetAndDestroy();
  else socket?.destroy();
}

/** Writes one SSE event, waiting for the socket to drain; throws AbortError once the client is gone. */
async function writeEvent(ctx, { event, data }) {
  const { res, signal } = ctx;
  signal.throwIfAborted();
  let written;
  ctx.flushed = new Promise((resolve) => { written = resolve; });
  const bytes = ctx.bedrock ? bedrockFrame(ctx.bedrock, { event, data }) : `${event ? `event: ${event}\n` : ""}data: ${data}\n\n`;
  if (!res.write(bytes, written)) {
    await new Promise((resolve) => {
      const done = () => {
        res.off("drain", done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      res.on("drain", done);
      signal.addEventListener("abort", done);
    });
  }
  signal.throwIfAborted();
}

// The wires a chat route speaks, by format.
const WIRES = { ...FORMATS, responses };

// ---------------------------------------------------------------- answering

function responseHeaders(ctx, format) {
  const id = `req_mock_${ctx.provider.name}_${ctx.seq}`;
  if (format === "bedrock") return { "x-amzn-requestid": id };
  const pool = ctx.poolHeaders ?? {};
  return format === "anthropic" ? { "request-id": id, ...pool } : { "x-request-id": id, "openai-processing-ms": "1", ...pool };
}

async function answer(ctx, body) {
  if (ctx.answerWith) return ctx.answerWith(ctx, body, { replyError, sendJson, responseHeaders });
  const { provider, format } = ctx;
  const wire = ctx.bedrock ? bedrockFormat(ctx.bedrock) : WIRES[format];
  const invalid = wire.validate(body);
  if (invalid) return replyError(ctx, 400, "invalid_request", invalid);
  const models = provider.settings.models;
  if (models && !models.includes(body.model)) {
    return replyError(ctx, 404, "not_found", `The model \`${body.model}\` does not exist or you do not have access to it.`);
  }
  if (provider.settings.prefill === "reject" && body.messages.at(-1)?.role === "assistant") {
    return replyError(ctx, 400, "invalid_request", "This model does not support assistant message prefill. The conversation must end with a user message.");
  }
  ctx.model = body.model;
  // Bedrock plans its answers as the Messages format it carries (or Converse read as it).
  ctx.plan = (wire.plan ?? planAnswer)(provider, ctx.bedrock ? { ...ctx, format: "anthropic" } : ctx, body, wire.maxTokens(body));
  ctx.plan = qualityPlan(provider, ctx, ctx.plan);
  ctx.id = format === "anthropic" ? `msg_mock_${provider.name}_${ctx.seq}` : `chatcmpl-mock-${provider.name}-${ctx.seq}`;
  ctx.created = Math.floor(Date.now() / 1000);
  if (body.stream === true) return stream(ctx, body, ctx.rule?.mode === "stream" ? ctx.rule : {});
  ctx.status = 200;
  sendJson(ctx.res, 200, wire.completion(ctx, body), responseHeaders(ctx, format));
}

async function stream(ctx, body, fault) {
  const events = (ctx.bedrock ? bedrockFormat(ctx.bedrock) : WIRES[ctx.format]).streamEvents(ctx, body);
  const { res } = ctx;
  ctx.provider.stats.streams += 1;
  ctx.status = 200;
  const type = ctx.bedrock ? "application/vnd.amazon.eventstream" : "text/event-stream; charset=utf-8";
  res.writeHead(200, { "content-type": type, "cache-control": "no-cache", ...responseHeaders(ctx, ctx.format) });
  res.flushHeaders();
  for (const ev of events.preamble) await writeEvent(ctx, ev);
  await wait(fault.slowFirstTokenMs ?? 0, ctx.signal);
  let sent = 0;
  for (const ev of events.content) {
    const isDelta = ev.count !== false && ev.event !== "ping";
    if (isDelta && (await streamFaultAt(ctx, fault, sent, false, events))) return;
    const bad = isDelta && sent === fault.malformedChunkAt;
    await writeEvent(ctx, bad ? { event: ev.event, data: ev.data.slice(0, Math.ceil(ev.data.length * 0.6)) } : ev);
    if (isDelta) sent += 1;
    await wait(ctx.provider.settings.chunkDelayMs, ctx.signal);
  }
  if (await streamFaultAt(ctx, fault, sent, true, events)) return;
  for (const ev of events.finish) await writeEvent(ctx, ev);
  if (!fault.noDone) for (const ev of events.done) await writeEvent(ctx, ev);
  res.end();
}

/**
 * Applies a cut or stall due after `sent` content chunks (at the end of the text: any one not
 * yet applied, since k was beyond it); true when the stream is over.
 */
async function streamFaultAt(ctx, fault, sent, atEnd, events) {
  const due = (k) => k !== undefined && (atEnd || sent >= k);
  if (due(fault.endAfterChunks)) {
    // The end event, with no finish chunk (finish_reason, message_delta) before it.
    for (const ev of events.done) await writeEvent(ctx, ev);
    ctx.res.end();
    return true;
  }
  if (due(fault.cutAfterChunks)) {
    // What was written reaches the client (within a second), then the connection drops.
    await Promise.race([ctx.flushed, delay(1000, undefined, { ref: false })]);
    destroy(ctx);
    return true;
  }
  if (due(fault.stallAfterChunks)) {
    await hold(ctx, fault.holdMs);
    return true;
  }
  return false;
}

function replyError(ctx, status, kind, message, extraHeaders = {}) {
  ctx.status = status;
  const aws = ctx.format === "bedrock" ? bedrockErrorHeaders(kind) : {};
  const body = ctx.errorBody ? ctx.errorBody(status, kind, message) : errorBody(ctx.format, kind, message);
  sendJson(ctx.res, status, body, { ...responseHeaders(ctx, ctx.format), ...aws, ...extraHeaders });
}

function retryHeaders(rule) {
  const headers = {};
  if (rule.retryAfter !== undefined) headers["retry-after"] = String(rule.retryAfter);
  if (rule.retryAfterMs !== undefined) headers["retry-after-ms"] = String(rule.retryAfterMs);
  return { ...headers, ...(rule.headers ?? {}) };
}

function malformed(ctx, body) {
  const text = JSON.stringify(ctx.format === "anthropic"
    ? { id: `msg_mock_${ctx.provider.name}_${ctx.seq}`, type: "message", role: "assistant", model: body.model ?? "", content: [{ type: "text", text: "cut" }] }
    : { id: `chatcmpl-mock-${ctx.provider.name}-${ctx.seq}`, object: "chat.completion", model: body.model ?? "", choices: [{ index: 0, message: { content: "cut" } }] });
  const cut = text.slice(0, Math.floor(text.length / 2));
  ctx.status = 200;
  ctx.res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(cut), ...responseHeaders(ctx, ctx.format) });
  ctx.res.end(cut);
}

/** A whole answer's first half under a length that declares all of it, then silence. */
async function stalled(ctx, body, holdMs) {
  const text = JSON.stringify(ctx.format === "anthropic"
    ? { id: `msg_mock_${ctx.provider.name}_${ctx.seq}`, type: "message", role: "assistant", model: body.model ?? "", content: [{ type: "text", text: "stalled" }] }
    : { id: `chatcmpl-mock-${ctx.provider.name}-${ctx.seq}`, object: "chat.completion", model: body.model ?? "", choices: [{ index: 0, message: { content: "stalled" } }] });
  ctx.status = 200;
  ctx.res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...responseHeaders(ctx, ctx.format) });
  ctx.res.write(text.slice(0, Math.floor(text.length / 2)));
  await hold(ctx, holdMs);
}

/** Carries out the rule that took the request (null: a normal answer). */
async function applyRule(ctx, rule, body) {
  await wait((ctx.provider.settings.latencyMs ?? 0) + (rule?.latencyMs ?? 0), ctx.signal);
  switch (rule?.mode ?? "ok") {
    case "ok": case "stream": return answer(ctx, body);
    case "slow": await wait(rule.slowFirstByteMs ?? 0, ctx.signal); return answer(ctx, body);
    case "status": return replyError(ctx, rule.status, rule.error, rule.message, retryHeaders(rule));
    case "hang": return hold(ctx, rule.holdMs);
    case "reset": await wait(rule.afterMs ?? 0, ctx.signal); return destroy(ctx, true);
    case "malformed": return malformed(ctx, body);
    case "stall": return stalled(ctx, body, rule.holdMs);
    case "echo-key": return echoKey(ctx, rule, replyError);
    default: throw new Error(`unreachable mode ${rule.mode}`);
  }
}

async function handleChat(state, ctx) {
  const { provider, req } = ctx;
  const stats = provider.stats;
  stats.lastRequest = { method: req.method, path: ctx.path, format: ctx.format, headers: redactHeaders(req.headers), body: null, at: new Date().toISOString() };
  const raw = await readBody(req);
  if (raw === null) return replyError(ctx, 413, "request_too_large");
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    return replyError(ctx, 400, "invalid_request", "The request body is not valid JSON.");
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) return replyError(ctx, 400, "invalid_request", "The request body must be a JSON object.");
  stats.lastRequest.body = body;
  provider.received.push({ seq: ctx.seq, at: stats.lastRequest.at, method: req.method, path: ctx.path, format: ctx.format,
    headers: stats.lastRequest.headers, keyDigests: keyDigests(req.headers), body });
  if (provider.received.length > MAX_RECEIVED) provider.received.shift();
  if (ctx.bedrock) {
    const problem = signatureProblem(req, raw);
    if (problem) return replyError(ctx, 403, "auth", problem, { "x-amzn-errortype": "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/" });
    const read = bedrockBody(ctx.bedrock, body);
    if (read.invalid) return replyError(ctx, 400, "invalid_request", read.invalid);
    body = read.body;
  } else if (ctx.adapt) {
    // A reseller's wire (mock-vertex.mjs): its checks, then the body the answer is planned from.
    const adapted = ctx.adapt(body, req.headers);
    if (adapted.error) return replyError(ctx, adapted.error.status, adapted.error.kind, adapted.error.message);
    body = adapted.body;
  }
  if (!ctx.bedrock && provider.settings.requireKey && !hasKey(req.headers)) {
    return replyError(ctx, 401, "auth", "Missing API key: send Authorization: Bearer <key> or x-api-key.");
  }
  if (provider.pool) {
    const { ok, headers } = take(provider.pool, body, ctx.format);
    ctx.poolHeaders = headers;
    if (!ok) {
      provider.stats.poolRefused += 1;
      return replyError(ctx, 429, "rate_limit", undefined, { "retry-after": headers["retry-after"] });
    }
  }
  const rule = provider.pickRule(body.stream === true, body.model);
  ctx.rule = rule;
  if (rule) provider.count("faults", rule.mode);
  state.log({ provider: provider.name, format: ctx.format, model: body.model, stream: body.stream === true, fault: rule?.mode ?? null });
  return applyRule(ctx, rule, body);
}

/** Tracks one chat request in the provider's counters for its whole life. */
async function trackChat(state, provider, format, req, res, path, extra = {}) {
  const controller = new AbortController();
  const ctx = { provider, format, req, res, path, signal: controller.signal, seq: ++provider.seq, status: null, destroyedByUs: false, rule: null, flushed: Promise.resolve(), ...extra };
  const stats = provider.stats;
  stats.total += 1;
  stats.inFlight += 1;
  provider.count("byFormat", format);
  state.live.add(controller);
  res.on("close", () => {
    stats.inFlight -= 1;
    if (!res.writableFinished && !ctx.destroyedByUs && !state.closing) stats.aborted += 1;
    if (ctx.status !== null) provider.count("byStatus", String(ctx.status));
    state.live.delete(controller);
    controller.abort();
  });
  try {
    await handleChat(state, ctx);
  } catch (err) {
    if (err?.name === "AbortError" || controller.signal.aborted) return;
    sendJson(res, 500, { error: { message: `mock internal error: ${err.message}`, type: "mock_error" } });
  }
}

// ---------------------------------------------------------------- admin API

function providerFor(state, name) {
  if (!state.providers.has(name)) state.providers.set(name, new Provider(name, defaultProvider(), state.seed));
  return state.providers.get(name);
}

function statsOf(provider) {
  return { name: provider.name, ...provider.stats };
}

async function handleAdmin(state, req, res, parts) {
  const [name, action] = parts.length === 1 ? [null, parts[0]] : parts;
  if (name === null && action === "reset" && req.method === "POST") {
    for (const p of state.providers.values()) p.reset();
    return sendJson(res, 200, { reset: [...state.providers.keys()] });
  }
  if (name === null && action === "stats" && req.method === "GET") {
    return sendJson(res, 200, Object.fromEntries([...state.providers].map(([n, p]) => [n, statsOf(p)])));
  }
  if (name === null || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) return sendJson(res, 404, { error: "unknown admin route" });
  const provider = providerFor(state, name);
  if (action === "stats" && req.method === "GET") return sendJson(res, 200, statsOf(provider));
  if (action === "fault" && req.method === "GET") return sendJson(res, 200, provider.settings);
  if (action === "received" && req.method === "GET") return sendJson(res, 200, { received: provider.received });
  if (action === "received" && req.method === "DELETE") {
    provider.received = [];
    return sendJson(res, 200, { cleared: [name] });
  }
  if (action === "reset" && req.method === "POST") {
    provider.reset();
    return sendJson(res, 200, { reset: [name] });
  }
  if (action === "fault" && req.method === "POST") {
    const raw = await readBody(req);
    try {
      provider.setSettings(normalizeProvider(JSON.parse(raw ?? ""), `admin.${name}`, provider.settings));
    } catch (err) {
      return sendJson(res, 400, { error: err.message });
    }
    return sendJson(res, 200, provider.settings);
  }
  return sendJson(res, 404, { error: "unknown admin route" });
}

// ---------------------------------------------------------------- routing and lifecycle

function modelList(provider, anthropicShape) {
  const ids = provider.settings.models ?? ["mock-model"];
  if (anthropicShape) {
    const data = ids.map((id) => ({ type: "model", id, display_name: id, created_at: "2026-01-01T00:00:00Z" }));
    return { data, has_more: false, first_id: ids[0] ?? null, last_id: ids.at(-1) ?? null };
  }
  return { object: "list", data: ids.map((id) => ({ id, object: "model", created: 1767225600, owned_by: "mock" })) };
}

async function route(state, req, res) {
  const path = new URL(req.url ?? "/", "http://mock").pathname;
  const parts = path.split("/").filter(Boolean);
  if (path === "/health") return sendJson(res, 200, { ok: true });
  if (parts[0] === "admin" && (parts.length === 2 || parts.length === 3)) return handleAdmin(state, req, res, parts.slice(1));
  const bedrock = bedrockRoute(path);
  if (bedrock) {
    if (req.method !== "POST") return sendJson(res, 405, bedrockErrorBody("invalid_request", `Method ${req.method} not allowed; use POST.`), { allow: "POST" });
    return trackChat(state, providerFor(state, bedrock.name), "bedrock", req, res, path, { bedrock });
  }
  if (parts[0] === "vertex") {
    return routeVertex(state, req, res, new URL(req.url ?? "/", "http://mock"), { sendJson, readBody, trackChat, providerFor });
  }
  const m = /^\/p\/([A-Za-z0-9_.-]{1,64})\/v1\/(chat\/completions|messages|responses|models|embeddings|messages\/count_tokens)$/.exec(path);
  if (!m) return sendJson(res, 404, { error: { message: `no route for ${req.method} ${path}`, type: "invalid_request_error" } });
  const provider = providerFor(state, m[1]);
  if (m[2] === "models") return sendJson(res, 200, modelList(provider, req.headers["anthropic-version"] !== undefined));
  const endpoint = endpointFor(m[2]);
  const format = endpoint?.format ?? (m[2] === "messages" ? "anthropic" : m[2] === "responses" ? "responses" : "openai");
  if (req.method !== "POST") {
    return sendJson(res, 405, errorBody(format, "invalid_request", `Method ${req.method} not allowed; use POST.`), { allow: "POST" });
  }
  return trackChat(state, provider, format, req, res, path, endpoint ? { answerWith: endpoint.answerWith } : {});
}

/**
 * Starts the mock server on 127.0.0.1.
 * @param {{ port?: number, config?: object, seed?: number, log?: boolean | ((entry: object) => void) }} options
 * @returns {Promise<{ url: string, port: number, providerUrl(name: string): string,
 *   openaiBaseUrl(name: string): string, setFault(name: string, spec: object): object,
 *   stats(name?: string): object, reset(name?: string): void, received(name: string): object[],
 *   clearReceived(name?: string): void, close(): Promise<void> }>}
 */
export async function startMock(options = {}) {
  const config = normalizeConfig(options.config);
  const seed = options.seed ?? config.seed;
  const logger = typeof options.log === "function" ? options.log
    : options.log ? (entry) => process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), ...entry })}\n`) : () => {};
  const state = { seed, providers: new Map(), live: new Set(), closing: false, log: logger };
  for (const [name, settings] of Object.entries(config.providers)) state.providers.set(name, new Provider(name, settings, seed));

  const server = http.createServer((req, res) => {
    route(state, req, res).catch((err) => sendJson(res, 500, { error: { message: String(err?.message ?? err), type: "mock_error" } }));
  });
  server.keepAliveTimeout = 5000;
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, HOST, resolve);
  });
  const port = server.address().port;
  const url = `http://${HOST}:${port}`;
  return {
    url,
    port,
    providerUrl: (name) => `${url}/p/${name}`,
    /** Vertex AI (mock-vertex.mjs): a provider's base URL, the token URL, token counters and faults. */
    vertex: { baseUrl: (name) => `${url}/vertex/${name}`, tokenUri: `${url}/vertex/token`, ...vertexApi(state) },
    openaiBaseUrl: (name) => `${url}/p/${name}/v1`,
    setFault(name, spec) {
      const provider = providerFor(state, name);
      provider.setSettings(normalizeProvider(spec, `setFault.${name}`, provider.settings));
      return provider.settings;
    },
    stats: (name) => (name === undefined
      ? Object.fromEntries([...state.providers].map(([n, p]) => [n, statsOf(p)]))
      : statsOf(providerFor(state, name))),
    reset(name) {
      for (const p of state.providers.values()) if (name === undefined || p.name === name) p.reset();
    },
    /** The chat requests `name` received, oldest first (the last MAX_RECEIVED). */
    received: (name) => [...providerFor(state, name).received],
    /** Forgets the requests received by `name`, or by every provider. */
    clearReceived(name) {
      for (const p of state.providers.values()) if (name === undefined || p.name === name) p.received = [];
    },
    close() {
      state.closing = true;
      for (const controller of state.live) controller.abort();
      const closed = new Promise((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

// ---------------------------------------------------------------- command line

function parseArgs(argv) {
  const opts = { port: 0, config: undefined, seed: undefined, log: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new ConfigError(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--port") opts.port = Number(value());
    else if (arg === "--config") opts.config = JSON.parse(readFileSync(value(), "utf8"));
    else if (arg === "--config-json") opts.config = JSON.parse(value());
    else if (arg === "--seed") opts.seed = Number(value());
    else if (arg === "--log") opts.log = true;
    else if (arg === "--help" || arg === "-h") opts.help = true;
    else throw new ConfigError(`unknown argument ${arg} (try --help)`);
  }
  check(Number.isInteger(opts.port) && opts.port >= 0 && opts.port <= 65535, "--port: 0..65535");
  check(opts.seed === undefined || Number.isInteger(opts.seed), "--seed: an integer");
  return opts;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
    if (opts.help) {
      const header = readFileSync(new URL(import.meta.url), "utf8").split("\nimport ")[0];
      process.stdout.write(`${header.split("\n").slice(1).map((l) => l.replace(/^\/\/ ?/, "")).join("\n")}\n`);
      return;
    }
    const mock = await startMock(opts);
    process.stdout.write(`${JSON.stringify({ listening: mock.url })}\n`);
    const stop = () => mock.close().then(() => process.exit(0));
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  } catch (err) {
    process.stderr.write(`mock-provider: ${err.message}\n`);
    process.exit(2);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) main();
