// The mock provider's AWS Bedrock runtime (imported by mock-provider.mjs): the routes
//   POST /bedrock/<name>/model/<modelId>/invoke                       Messages body, JSON answer
//   POST /bedrock/<name>/model/<modelId>/invoke-with-response-stream  event stream of chunks
//   POST /bedrock/<name>/model/<modelId>/converse                     Converse JSON
//   POST /bedrock/<name>/model/<modelId>/converse-stream              event stream of Converse events
// (the adapter's baseUrl: <url>/bedrock/<name>). Every request must carry a SigV4 signature by
// the AWS documentation's example credentials (TEST_CREDENTIALS), service "bedrock", recomputed
// here with node:crypto; a wrong or missing one is a 403 InvalidSignatureException. Answers come
// from the same plans as the other formats (mock-answers.mjs), so fault rules, counters and
// `received` work as for any provider; errors are Bedrock-shaped: {"message"} with the
// exception's name in x-amzn-ErrorType. Streams are AWS event-stream frames, CRC32 from node:zlib.
import { createHash, createHmac } from "node:crypto";
import zlib from "node:zlib";
import { anthropic, textOf } from "./mock-answers.mjs";

export const TEST_CREDENTIALS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

const ROUTE = /^\/bedrock\/([A-Za-z0-9_.-]{1,64})\/model\/([^/]+)\/(invoke|invoke-with-response-stream|converse|converse-stream)$/;
const MAX_SKEW_MS = 5 * 60 * 1000;

/** {name, model, action, stream, converse} for a Bedrock path, else null. */
export function bedrockRoute(path) {
  const m = ROUTE.exec(path);
  if (!m) return null;
  let model;
  try {
    model = decodeURIComponent(m[2]);
  } catch {
    return null;
  }
  const action = m[3];
  return { name: m[1], model, action, stream: action.endsWith("stream"), converse: action.startsWith("converse") };
}

// The exception names AWS gives each of the mock's error kinds.
const EXCEPTIONS = {
  rate_limit: "ThrottlingException", insufficient_quota: "ServiceQuotaExceededException",
  context_length_exceeded: "ValidationException", content_policy: "ValidationException",
  invalid_request: "ValidationException", auth: "UnrecognizedClientException", permission: "AccessDeniedException",
  not_found: "ResourceNotFoundException", request_too_large: "ValidationException", timeout: "ModelTimeoutException",
  server: "InternalServerException", unavailable: "ServiceUnavailableException", overloaded: "ServiceUnavailableException",
};

const MESSAGES = { context_length_exceeded: "Input is too long for requested model.",
  rate_limit: "Too many requests, please wait before trying again." };

export function bedrockErrorBody(kind, message) {
  return { message: message ?? MESSAGES[kind] ?? `mock ${EXCEPTIONS[kind] ?? "InternalServerException"}` };
}

export function bedrockErrorHeaders(kind) {
  return { "x-amzn-errortype": `${EXCEPTIONS[kind] ?? "InternalServerException"}:http://internal.amazon.com/coral/com.amazon.bedrock/` };
}

// ---------------------------------------------------------------- SigV4, recomputed

const sha256 = (data) => createHash("sha256").update(data).digest("hex");
const hmac = (key, data) => createHmac("sha256", key).update(data).digest();
const encode = (s, keepSlash) => [...Buffer.from(s, "utf8")].map((b) => {
  const c = String.fromCharCode(b);
  return /[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === "/") ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
}).join("");

/** Why the request's signature is not the one the test credentials give (null: it is). */
export function signatureProblem(req, rawBody, now = Date.now()) {
  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return "Authorization header requires a SigV4 signature.";
  const [, keyId, date, region, service, signedList, signature] = m;
  if (keyId !== TEST_CREDENTIALS.accessKeyId) return "The security token included in the request is invalid.";
  if (service !== "bedrock") return `Credential should be scoped to correct service: 'bedrock', not '${service}'.`;
  const amzDate = req.headers["x-amz-date"] ?? "";
  if (!/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== date) return "Missing or bad X-Amz-Date.";
  const at = Date.UTC(+amzDate.slice(0, 4), +amzDate.slice(4, 6) - 1, +amzDate.slice(6, 8), +amzDate.slice(9, 11), +amzDate.slice(11, 13), +amzDate.slice(13, 15));
  if (Math.abs(now - at) > MAX_SKEW_MS) return "Signature expired: the request time is too far from the server's.";
  const signed = signedList.split(";");
  if (!signed.includes("host") || !signed.includes("x-amz-date")) return "SignedHeaders must include host and x-amz-date.";
  const [path, query = ""] = (req.url ?? "/").split("?");
  const canonicalQuery = query.split("&").filter(Boolean).map((p) => p.split("=")).map(([k, v = ""]) => [encode(decodeURIComponent(k)), encode(decodeURIComponent(v))])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1)).map(([k, v]) => `${k}=${v}`).join("&");
  const headerLines = signed.map((h) => `${h}:${String(req.headers[h] ?? "").trim().replace(/\s+/g, " ")}\n`).join("");
  const canonical = [req.method, encode(path, true), canonicalQuery, headerLines, signedList, sha256(Buffer.from(rawBody, "utf8"))].join("\n");
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  let key = hmac(`AWS4${TEST_CREDENTIALS.secretAccessKey}`, date);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  const expected = hmac(key, toSign).toString("hex");
  return expected === signature ? null : "The request signature we calculated does not match the signature you provided.";
}

// ---------------------------------------------------------------- event-stream frames

/** One event-stream frame with string headers. */
export function frame(headers, payload) {
  const parts = Object.entries(headers).map(([name, value]) => {
    const n = Buffer.from(name, "utf8");
    const v = Buffer.from(value, "utf8");
    const len = Buffer.alloc(2);
    len.writeUInt16BE(v.length);
    return Buffer.concat([Buffer.from([n.length]), n, Buffer.from([7]), len, v]);
  });
  const h = Buffer.concat(parts);
  const body = Buffer.from(payload, "utf8");
  const prelude = Buffer.alloc(8);
  prelude.writeUInt32BE(16 + h.length + body.length, 0);
  prelude.writeUInt32BE(h.length, 4);
  const preludeCrc = Buffer.alloc(4);
  preludeCrc.writeUInt32BE(zlib.crc32(prelude));
  const upToCrc = Buffer.concat([prelude, preludeCrc, h, body]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(upToCrc));
  return Buffer.concat([upToCrc, crc]);
}

const eventFrame = (type, payload) => frame({ ":event-type": type, ":content-type": "application/json", ":message-type": "event" }, payload);

/** The bytes of one mock stream event: a chunk frame (invoke) or a Converse event frame. */
export function bedrockFrame(route, ev) {
  if (route.converse) return eventFrame(ev.event, ev.data);
  return eventFrame("chunk", JSON.stringify({ bytes: Buffer.from(ev.data, "utf8").toString("base64") }));
}

/** An exception frame, as Bedrock ends a stream that failed. */
export function exceptionFrame(type, message) {
  return frame({ ":exception-type": type, ":content-type": "application/json", ":message-type": "exception" }, JSON.stringify({ message }));
}

// ---------------------------------------------------------------- bodies and answers

/** A Converse request as the Messages-shaped body the answer planner reads. */
function fromConverse(body) {
  const text = (blocks) => (Array.isArray(blocks) ? blocks : []).map((b) => {
    if (typeof b?.text === "string") return { type: "text", text: b.text };
    if (b?.toolResult) return { type: "tool_result", tool_use_id: b.toolResult.toolUseId, content: textOf(b.toolResult.content?.map((c) => ({ type: "text", text: c.text ?? "" })) ?? []) };
    if (b?.toolUse) return { type: "tool_use", id: b.toolUse.toolUseId, name: b.toolUse.name, input: b.toolUse.input ?? {} };
    return { type: "text", text: "" };
  });
  const tools = body.toolConfig?.tools?.map((t) => ({ name: t.toolSpec?.name, description: t.toolSpec?.description, input_schema: t.toolSpec?.inputSchema?.json ?? {} }));
  const choice = body.toolConfig?.toolChoice;
  return {
    max_tokens: body.inferenceConfig?.maxTokens ?? 4096,
    system: Array.isArray(body.system) ? body.system.map((s) => s.text ?? "").join("\n") : undefined,
    messages: Array.isArray(body.messages) ? body.messages.map((m) => ({ role: m.role, content: text(m.content) })) : body.messages,
    ...(tools ? { tools } : {}),
    ...(choice?.tool ? { tool_choice: { type: "tool", name: choice.tool.name } } : choice?.any ? { tool_choice: { type: "any" } } : {}),
  };
}

/** The body the mock plans from: the model and streaming from the path, Converse read as Messages. */
export function bedrockBody(route, body) {
  if (!route.converse && ("model" in body || "stream" in body)) return { invalid: `extraneous key [${"model" in body ? "model" : "stream"}] is not permitted` };
  if (!route.converse && typeof body.anthropic_version !== "string") return { invalid: "anthropic_version: required" };
  const read = route.converse ? fromConverse(body) : body;
  return { body: { ...read, model: route.model, stream: route.stream } };
}

const CONVERSE_STOP = { stop: "end_turn", length: "max_tokens", tools: "tool_use" };

function converseUsage(plan) {
  return { inputTokens: plan.inputTokens, outputTokens: plan.outputTokens + plan.reasoningTokens,
    totalTokens: plan.inputTokens + plan.outputTokens + plan.reasoningTokens };
}

/** The wire format object for a Bedrock route: Messages for invoke, Converse otherwise. */
export function bedrockFormat(route) {
  if (!route.converse) return anthropic;
  return {
    validate: (body) => (Array.isArray(body.messages) && body.messages.length ? null : "messages: at least one message is required"),
    maxTokens: (body) => body.max_tokens,
    completion(ctx) {
      const { plan } = ctx;
      const content = [];
      if (plan.text !== null) content.push({ text: plan.text });
      for (const t of plan.tools) content.push({ toolUse: { toolUseId: t.id, name: t.name, input: JSON.parse(t.args) } });
      return { output: { message: { role: "assistant", content } }, stopReason: CONVERSE_STOP[plan.finish],
        usage: converseUsage(plan), metrics: { latencyMs: 1 } };
    },
    streamEvents(ctx) {
      const { plan } = ctx;
      const ev = (event, data, count = event === "contentBlockDelta") => ({ event, data: JSON.stringify(data), count });
      const content = [];
      let index = 0;
      if (plan.text !== null) {
        for (const text of plan.chunks) content.push(ev("contentBlockDelta", { contentBlockIndex: 0, delta: { text } }));
        content.push(ev("contentBlockStop", { contentBlockIndex: 0 }, false));
        index = 1;
      }
      for (const t of plan.tools) {
        content.push(ev("contentBlockStart", { contentBlockIndex: index, start: { toolUse: { toolUseId: t.id, name: t.name } } }, false));
        content.push(ev("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: t.args } } }));
        content.push(ev("contentBlockStop", { contentBlockIndex: index }, false));
        index += 1;
      }
      return {
        preamble: [ev("messageStart", { role: "assistant" })],
        content,
        finish: [ev("messageStop", { stopReason: CONVERSE_STOP[plan.finish] })],
        done: [ev("metadata", { usage: converseUsage(plan), metrics: { latencyMs: 1 } })],
      };
    },
  };
}
