// Google Vertex AI for the mock provider (tests/e2e/mock-provider.mjs routes /vertex/… here):
//
//   POST /vertex/token       the OAuth2 token endpoint of the test service account
//                            (tests/fixtures/vertex/service-account.json with its token_uri set
//                            to <mock>/vertex/token): a form with grant_type jwt-bearer and an
//                            assertion, a JWT whose RS256 signature is checked with node:crypto
//                            against the test key's public half and whose claims are checked
//                            (iss, scope cloud-platform, aud = this URL, iat/exp within an hour);
//                            answers {access_token, expires_in: 3600, token_type: "Bearer"}
//   GET  /vertex/token/stats {calls, issued, refused}
//   POST /vertex/<name>/v1/projects/<p>/locations/<r>/publishers/anthropic/models/<m>:rawPredict
//        …:streamRawPredict  the Messages API body without `model` and with
//                            anthropic_version "vertex-2023-10-16"; answers as the Anthropic format
//        …/publishers/google/models/<m>:generateContent, :streamGenerateContent?alt=sse
//                            Gemini's format, answered from the same plan as every mock answer
//
// Each <name> is a mock provider of its own (faults, counters, received requests as every
// other), reached with `Authorization: Bearer <a token this mock issued>`; errors, scripted
// faults included, come in Google's shape {"error": {"code", "message", "status"}}.
import { createPublicKey, randomBytes, verify } from "node:crypto";
import { readFileSync } from "node:fs";
import { FORMATS, planAnswer } from "./mock-answers.mjs";

const PUBLIC_KEY = createPublicKey(readFileSync(new URL("../fixtures/vertex/test-key.pub.pem", import.meta.url)));
const SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const VERSION = "vertex-2023-10-16";
const TOKEN_SECONDS = 3600;
const CHAT = /^\/vertex\/([A-Za-z0-9_.-]{1,64})\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(anthropic|google)\/models\/([^/:]+):(rawPredict|streamRawPredict|generateContent|streamGenerateContent)$/;

const STATUS_NAMES = { 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
  408: "DEADLINE_EXCEEDED", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
  503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED" };
const GOOGLE_MESSAGES = {
  rate_limit: "Resource exhausted. Please try again later.",
  context_length_exceeded: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
  unavailable: "The model is overloaded. Please try again later.",
  overloaded: "The model is overloaded. Please try again later.",
  auth: "Request had invalid authentication credentials. Expected OAuth 2 access token.",
  permission: "Permission 'aiplatform.endpoints.predict' denied.",
};

/** Google's error body for a status and a mock error kind. */
export function googleError(status, kind, message) {
  const name = STATUS_NAMES[status] ?? (status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION");
  return { error: { code: status, message: message ?? GOOGLE_MESSAGES[kind] ?? `mock ${kind ?? "error"}`, status: name } };
}

function vertexState(state) {
  state.vertex ??= { tokens: new Set(), calls: 0, issued: 0, refused: 0, tokenFault: null };
  return state.vertex;
}

/** The test's handle on the Vertex part of a mock: token counters and a token-endpoint fault. */
export function vertexApi(state) {
  return {
    tokenStats: () => {
      const v = vertexState(state);
      return { calls: v.calls, issued: v.issued, refused: v.refused };
    },
    /** null: tokens are issued; {status, error?}: every token request fails so. */
    setTokenFault: (fault) => { vertexState(state).tokenFault = fault; },
    /** Forgets every issued token (requests carrying one get 401). */
    revokeTokens: () => { vertexState(state).tokens.clear(); },
  };
}

function b64urlJson(segment) {
  return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
}

/** Why an assertion is refused, or null. */
function assertionProblem(jwt, audience) {
  const parts = typeof jwt === "string" ? jwt.split(".") : [];
  if (parts.length !== 3) return "assertion: not a JWT";
  let header, claims;
  try {
    header = b64urlJson(parts[0]);
    claims = b64urlJson(parts[1]);
  } catch {
    return "assertion: header or claims not base64url JSON";
  }
  if (header.alg !== "RS256") return "assertion: alg must be RS256";
  const signed = verify("RSA-SHA256", Buffer.from(`${parts[0]}.${parts[1]}`), PUBLIC_KEY, Buffer.from(parts[2], "base64url"));
  if (!signed) return "Invalid JWT Signature.";
  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.iss !== "string" || !claims.iss.includes("@")) return "assertion: iss must be the service account's email";
  if (claims.scope !== SCOPE) return `assertion: scope must be ${SCOPE}`;
  if (claims.aud !== audience) return `assertion: aud must be ${audience}`;
  if (!Number.isInteger(claims.iat) || Math.abs(claims.iat - now) > 300) return "assertion: iat is not now";
  if (!Number.isInteger(claims.exp) || claims.exp <= claims.iat || claims.exp - claims.iat > 3600) return "Invalid JWT: Token must be a short-lived token (60 minutes)";
  return null;
}

async function token(state, req, res, { readBody, sendJson }) {
  const v = vertexState(state);
  v.calls += 1;
  const refuse = (status, error, description) => {
    v.refused += 1;
    return sendJson(res, status, { error, error_description: description });
  };
  if (req.method !== "POST") return refuse(405, "invalid_request", "POST only");
  if (v.tokenFault) return refuse(v.tokenFault.status ?? 500, v.tokenFault.error ?? "server_error", "scripted fault");
  if (!String(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) {
    return refuse(400, "invalid_request", "the body must be a form (application/x-www-form-urlencoded)");
  }
  const form = new URLSearchParams((await readBody(req)) ?? "");
  if (form.get("grant_type") !== GRANT) return refuse(400, "unsupported_grant_type", `grant_type must be ${GRANT}`);
  const problem = assertionProblem(form.get("assertion"), `http://${req.headers.host}/vertex/token`);
  if (problem) return refuse(400, "invalid_grant", problem);
  const accessToken = `ya29.mock-${randomBytes(12).toString("hex")}`;
  v.tokens.add(accessToken);
  v.issued += 1;
  return sendJson(res, 200, { access_token: accessToken, expires_in: TOKEN_SECONDS, token_type: "Bearer" });
}

/** A Gemini request's contents as the OpenAI-shaped request the answer planner reads. */
function plannerBody(model, body, stream) {
  const messages = [];
  const sys = (body.systemInstruction?.parts ?? []).map((p) => p.text ?? "").join("");
  if (sys) messages.push({ role: "system", content: sys });
  for (const c of body.contents) {
    const text = c.parts.filter((p) => typeof p.text === "string").map((p) => p.text).join("");
    const calls = c.parts.filter((p) => p.functionCall);
    const results = c.parts.filter((p) => p.functionResponse);
    if (c.role === "model") {
      messages.push({ role: "assistant", content: text, ...(calls.length ? { tool_calls: calls.map((p, i) => ({ id: `c${i}`, type: "function", function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } })) } : {}) });
    } else {
      for (const r of results) messages.push({ role: "tool", tool_call_id: r.functionResponse.name, content: JSON.stringify(r.functionResponse.response) });
      if (text || !results.length) messages.push({ role: "user", content: text });
    }
  }
  const tools = (body.tools ?? []).flatMap((t) => t.functionDeclarations ?? [])
    .map((f) => ({ type: "function", function: { name: f.name, parameters: f.parameters ?? {} } }));
  const fc = body.toolConfig?.functionCallingConfig;
  const toolChoice = fc?.mode === "NONE" ? "none"
    : fc?.mode === "ANY" && fc.allowedFunctionNames?.length === 1 ? { type: "function", function: { name: fc.allowedFunctionNames[0] } }
      : fc?.mode === "ANY" ? "required" : undefined;
  const g = body.generationConfig ?? {};
  const responseFormat = g.responseMimeType === "application/json"
    ? (g.responseSchema ? { type: "json_schema", json_schema: { name: "answer", schema: g.responseSchema } } : { type: "json_object" })
    : undefined;
  return { model, messages, tools, tool_choice: toolChoice, response_format: responseFormat, max_tokens: g.maxOutputTokens,
    reasoning_effort: g.thinkingConfig?.includeThoughts ? "medium" : undefined, stream };
}

const PART_KEYS = ["text", "inlineData", "fileData", "functionCall", "functionResponse"];
const TOP_KEYS = new Set(["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "labels", "cachedContent"]);
const CONFIG_KEYS = new Set(["maxOutputTokens", "temperature", "topP", "topK", "stopSequences", "seed", "presencePenalty",
  "frequencyPenalty", "responseMimeType", "responseSchema", "thinkingConfig", "candidateCount"]);

/** Why Vertex AI would refuse a generateContent body, or null. */
function geminiProblem(body) {
  for (const k of Object.keys(body)) if (!TOP_KEYS.has(k)) return `Invalid JSON payload received. Unknown name "${k}": Cannot find field.`;
  for (const k of Object.keys(body.generationConfig ?? {})) {
    if (!CONFIG_KEYS.has(k)) return `Invalid JSON payload received. Unknown name "${k}" at 'generation_config': Cannot find field.`;
  }
  if (!Array.isArray(body.contents) || body.contents.length === 0) return "contents is not specified";
  for (const [i, c] of body.contents.entries()) {
    if (c?.role !== "user" && c?.role !== "model") return `contents[${i}].role: must be user or model`;
    if (!Array.isArray(c.parts) || c.parts.length === 0) return `contents[${i}].parts: must not be empty`;
    for (const [j, p] of c.parts.entries()) {
      const set = PART_KEYS.filter((k) => p?.[k] !== undefined);
      if (set.length !== 1) return `contents[${i}].parts[${j}]: exactly one data field must be set`;
      if (p.inlineData && (typeof p.inlineData.mimeType !== "string" || typeof p.inlineData.data !== "string")) return `contents[${i}].parts[${j}].inlineData: mimeType and data are required`;
      if (p.functionResponse && (typeof p.functionResponse.name !== "string" || typeof p.functionResponse.response !== "object")) return `contents[${i}].parts[${j}].functionResponse: name and response (an object) are required`;
    }
  }
  return null;
}

const GEMINI_FINISH = { stop: "STOP", length: "MAX_TOKENS", tools: "STOP" };

function usageMetadata(plan, done = true) {
  const out = plan.outputTokens;
  return { promptTokenCount: plan.inputTokens, ...(done ? { candidatesTokenCount: out } : {}),
    ...(plan.reasoningTokens ? { thoughtsTokenCount: plan.reasoningTokens } : {}),
    totalTokenCount: plan.inputTokens + (done ? out + plan.reasoningTokens : 0), trafficType: "ON_DEMAND" };
}

function callParts(plan) {
  return plan.tools.map((t) => ({ functionCall: { name: t.name, args: JSON.parse(t.args) } }));
}

/** Gemini's answers for the mock's plan (whole and as SSE chunks, no end marker). */
export const gemini = {
  validate: (body) => FORMATS.openai.validate(body),
  maxTokens: (body) => body.max_tokens,
  plan: (provider, ctx, body, maxTokens) => planAnswer(provider, { ...ctx, format: "openai" }, body, maxTokens),
  completion(ctx) {
    const { plan } = ctx;
    const parts = [];
    if (plan.thinking) parts.push({ text: plan.thinking, thought: true });
    if (plan.text !== null) parts.push({ text: plan.text });
    parts.push(...callParts(plan));
    return { candidates: [{ content: { role: "model", parts }, finishReason: GEMINI_FINISH[plan.finish], avgLogprobs: -0.1 }],
      usageMetadata: usageMetadata(plan), modelVersion: ctx.model, createTime: new Date().toISOString(), responseId: ctx.id };
  },
  streamEvents(ctx) {
    const { plan } = ctx;
    const chunk = (parts, extra = {}) => ({ data: JSON.stringify({ candidates: [{ content: { role: "model", parts }, ...extra }],
      usageMetadata: extra.finishReason ? usageMetadata(plan) : usageMetadata(plan, false), modelVersion: ctx.model, responseId: ctx.id }) });
    const content = [];
    if (plan.thinking) content.push(chunk([{ text: plan.thinking, thought: true }]));
    for (const piece of plan.chunks) content.push(chunk([{ text: piece }]));
    return { preamble: [], content, finish: [chunk(callParts(plan), { finishReason: GEMINI_FINISH[plan.finish] })], done: [] };
  },
};
FORMATS.gemini = gemini;

/**
 * Routes a /vertex/… request. `helpers` are the mock's own: trackChat, readBody, sendJson.
 */
export async function routeVertex(state, req, res, url, helpers) {
  const path = url.pathname;
  const { sendJson, trackChat, providerFor } = helpers;
  if (path === "/vertex/token") return token(state, req, res, helpers);
  if (path === "/vertex/token/stats") return sendJson(res, 200, vertexApi(state).tokenStats());
  const m = CHAT.exec(path);
  if (!m) return sendJson(res, 404, googleError(404, "not_found", `no route for ${req.method} ${path}`));
  const [, name, , , publisher, model, method] = m;
  const anthropic = publisher === "anthropic";
  if (anthropic !== (method === "rawPredict" || method === "streamRawPredict")) {
    return sendJson(res, 400, googleError(400, "invalid_request", `${method} is not a method of ${publisher} models`));
  }
  const streamed = method.startsWith("stream");
  if (method === "streamGenerateContent" && url.searchParams.get("alt") !== "sse") {
    return sendJson(res, 400, googleError(400, "invalid_request", "this mock streams only with alt=sse"));
  }
  if (req.method !== "POST") return sendJson(res, 405, googleError(405, "invalid_request", "POST only"));
  const provider = providerFor(state, name);
  const v = vertexState(state);
  const extra = {
    errorBody: (status, kind, message) => googleError(status, kind, message),
    /** The wire body as the planner and the answer writers read it; or {status, kind, message}. */
    adapt(body, headers) {
      const auth = String(headers.authorization ?? "");
      const bearer = auth.startsWith("Bearer ") ? auth.slice(7) : null;
      if (!bearer || !v.tokens.has(bearer)) return { error: { status: 401, kind: "auth" } };
      if (anthropic) {
        if (body.model !== undefined) return { error: { status: 400, kind: "invalid_request", message: "model: Extra inputs are not permitted (the model is in the URL)" } };
        if (body.anthropic_version !== VERSION) return { error: { status: 400, kind: "invalid_request", message: `anthropic_version: must be ${VERSION}` } };
        if ((body.stream === true) !== streamed) return { error: { status: 400, kind: "invalid_request", message: `stream must be ${streamed} for ${method}` } };
        const { anthropic_version: _, ...rest } = body;
        return { body: { ...rest, model } };
      }
      const problem = geminiProblem(body);
      if (problem) return { error: { status: 400, kind: "invalid_request", message: problem } };
      return { body: plannerBody(model, body, streamed) };
    },
  };
  return trackChat(state, provider, anthropic ? "anthropic" : "gemini", req, res, path, extra);
}

