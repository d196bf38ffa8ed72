
// `client[Symbol.dispose]()` (and `using client = new ResilientClient(…)`) under TypeScript's
// default lib too: declared as its esnext.disposable lib does, with which it merges.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
}

// ---- Configuration (the one JSON shape of the Worker and this package) ----

/** Retry settings; every field optional. */
export interface RetryConfig {
  /** Attempts per provider per request, the first included (1–10; default 3). */
  maxAttempts?: number;
  /** The first backoff cap in ms (default 200); full jitter below it. */
  baseDelayMs?: number;
  /** The largest backoff and the longest Retry-After honoured, in ms (default 10000). */
  maxDelayMs?: number;
  /**
   * The longest a 429 is waited for while a later entry of the route can serve, in ms
   * (default 1000); past it the request moves on at once. Set it to `maxDelayMs` to wait
   * as long as a Retry-After allows.
   */
  rateLimitWaitMs?: number;
}

/** The retry budget: retries ≤ ratio × first attempts + a floor. */
export interface BudgetConfig {
  /** Retry tokens earned per first attempt (0–1; default 0.2). */
  ratio?: number;
  /** Retry tokens earned per second regardless of traffic. */
  floorPerSec?: number;
  /** The most tokens saved up. */
  capacity?: number;
}

/** Circuit breaker settings (one breaker per provider and model). */
export interface BreakerConfig {
  /** Consecutive failures that open it (default 5). */
  failureThreshold?: number;
  /** Failure rate over the window that opens it, in (0, 1]. */
  failureRate?: number;
  /** Verdicts in the sliding window. */
  window?: number;
  /** Verdicts needed before the rate counts. */
  minimumCalls?: number;
  /** The first opening's length in ms. */
  cooldownMs?: number;
  /** The longest opening in ms (cooldowns double on each re-open). */
  maxCooldownMs?: number;
  /** Probes at once in half-open (default 1). */
  halfOpenPermits?: number;
  /** Probe successes that close it (default 1). */
  successThreshold?: number;
}

/** One step of a route. */
export interface RouteEntry {
  /** A provider: a name from `options.providers` (or `config.providers`). */
  provider: string;
  /** The model sent to it. */
  model: string;
  /** A name for logs and events. */
  label?: string;
  /** This entry's per-attempt timeout in ms. */
  timeoutMs?: number;
  /** This entry's retry settings, over the client's. */
  retry?: RetryConfig;
  /** Streams: this entry's first-token deadline in ms. */
  firstTokenTimeoutMs?: number;
  /**
   * The embedding model it serves: on an embeddings route every entry declares the same family
   * and dimensions (vectors of different models are not interchangeable).
   */
  embeddings?: { family: string; dimensions: number };
  /**
   * Its tier: entries sharing a priority split load by `weight`, lower priorities first; the next
   * priority serves only when the whole tier cannot. Give every entry of a route a priority, or none.
   */
  priority?: number;
  /** Its share of its tier's load, 1 to 10000 (default 1); needs a `priority`. */
  weight?: number;
  /** p95 of whole answers, in ms, above which this entry is tried after the others. */
  latencySloMs?: number;
  /** p95 of a stream's time to first token, in ms, above which it is tried after the others. */
  ttftSloMs?: number;
  /** Streams: the slowest rate the first tokens may come at, before anything is delivered. */
  minTokensPerSecond?: number;
  /** Streams: over how many first tokens that rate is judged (default 20). */
  rateWindowTokens?: number;
}

/** Size limits. */
export interface LimitsConfig {
  /** The largest request body a gateway accepts (Worker only). */
  maxRequestBytes?: number;
  /** The largest provider response read (default 8 MiB). */
  maxResponseBytes?: number;
  /** The in-memory response cache's most answers (default 1000). */
  cacheMaxEntries?: number;
  /** The in-memory response cache's most bytes (default 16 MiB; at least 1024). */
  cacheMaxBytes?: number;
}

/**
 * A route's response cache, for requests through `client.fetch` (and the Worker): an identical
 * request (same route, client format and body, `stream`, `stream_options`, `user` and
 * `metadata` aside) is answered from the answer stored, with `x-cache: hit` and `age`.
 */
export interface CacheConfig {
  /** How long an answer is served fresh, in seconds (1 to 30 days). */
  ttlSeconds: number;
  /** How long past its TTL it may still be served when every entry of the route fails (`x-cache: stale`). Default 0. */
  staleIfErrorSeconds?: number;
  /** `client` (default): one client's answers are never served to another; `shared`: every client's. */
  scope?: "client" | "shared";
}

/**
 * Where `client.fetch`'s cached answers are kept instead of memory (Redis, IndexedDB, a file).
 * Values are opaque bytes.
 */
export interface CacheStore {
  /** The bytes stored under `key`, or `null`/`undefined`. A throw or rejection is a miss. */
  get(key: string): Uint8Array | null | undefined | Promise<Uint8Array | null | undefined>;
  /** Keeps `value` under `key` for `ttlSeconds`; not awaited (a rejection is a write lost). */
  put(key: string, value: Uint8Array, ttlSeconds: number): void | Promise<unknown>;
}

/** Per-model facts for a built-in provider. */
export interface ModelConfig {
  contextWindow?: number;
  prefill?: boolean;
  tools?: boolean;
  /** US dollars per million tokens: input, output, and input read from or written to the prompt cache (at the input price when not given). */
  inputPricePerMtok?: number;
  outputPricePerMtok?: number;
  cachedInputPricePerMtok?: number;
  cacheWritePricePerMtok?: number;
}

/** The presets of `kind: "openai-compatible"` (`custom`: any other server, `baseUrl` required). */
export type PresetName =
  | "openai"
  | "deepseek"
  | "groq"
  | "mistral"
  | "together"
  | "fireworks"
  | "openrouter"
  | "gemini"
  | "azure"
  | "vllm"
  | "ollama"
  | "llamacpp"
  | "custom";

/** A built-in HTTP provider (Anthropic, OpenAI, OpenAI-compatible presets, AWS Bedrock, Vertex AI). */
export type ProviderConfig =
  | {
      kind: "anthropic";
      baseUrl?: string;
      apiKey?: string;
      apiKeyEnv?: string;
      /** Several keys, each a secret name (optionally weighted): a tier of upstreams `<id>#1`, `<id>#2`... */
      apiKeyEnvs?: (string | { env: string; weight?: number })[];
      models?: Record<string, ModelConfig>;
      headers?: Record<string, string>;
      anthropicVersion?: string;
      defaultMaxTokens?: number;
    }
  | {
      kind: "openai";
      baseUrl?: string;
      apiKey?: string;
      apiKeyEnv?: string;
      /** Several keys, each a secret name (optionally weighted): a tier of upstreams `<id>#1`, `<id>#2`... */
      apiKeyEnvs?: (string | { env: string; weight?: number })[];
      models?: Record<string, ModelConfig>;
      headers?: Record<string, string>;
      organization?: string;
      project?: string;
      maxTokensField?: "max_tokens" | "max_completion_tokens";
      streamUsage?: boolean;
    }
  | {
      kind: "openai-compatible";
      preset: PresetName;
      baseUrl?: string;
      apiKey?: string;
      apiKeyEnv?: string;
      /** Several keys, each a secret name (optionally weighted): a tier of upstreams `<id>#1`, `<id>#2`... */
      apiKeyEnvs?: (string | { env: string; weight?: number })[];
      models?: Record<string, ModelConfig>;
      headers?: Record<string, string>;
      path?: string;
      deployment?: string;
      apiVersion?: string;
      maxTokensField?: "max_tokens" | "max_completion_tokens";
      streamUsage?: boolean;
    }
  | {
      /** AWS Bedrock: each credential itself, or the name of the env var holding it. */
      kind: "bedrock";
      region: string;
      baseUrl?: string;
      accessKeyId?: string;
      accessKeyIdEnv?: string;
      secretAccessKey?: string;
      secretAccessKeyEnv?: string;
      sessionToken?: string;
      sessionTokenEnv?: string;
      models?: Record<string, ModelConfig>;
      headers?: Record<string, string>;
      anthropicVersion?: string;
      defaultMaxTokens?: number;
    }
  | {
      /** Google Vertex AI: Claude (`publisher: "anthropic"`) or Gemini (`"google"`) models. */
      kind: "vertex";
      publisher: "anthropic" | "google";
      project: string;
      /** The location: `us-east5`, `europe-west1`, `global`, … */
      region: string;
      baseUrl?: string;
      /** The service account's key file: its JSON text, or the parsed object. */
      serviceAccountKey?: string | Record<string, unknown>;
      /** The environment variable holding the key file's JSON (default `GOOGLE_SERVICE_ACCOUNT_KEY`). */
      serviceAccountKeyEnv?: string;
      models?: Record<string, ModelConfig>;
      defaultMaxTokens?: number;
    };

/**
 * The client's configuration. Every problem is reported at once by a
 * `ConfigError` whose `issues` carry paths such as `routes.default[1].provider`.
 */
export interface Config {
  /** Built-in providers by id; keys in `apiKey`, or `apiKeyEnv` read from `process.env` in Node. JS providers go in `options.providers`. */
  providers?: Record<string, ProviderConfig>;
  /**
   * Routes by name, each an ordered failover chain. Without routes, the JS
   * providers in `options.providers` form the `default` route in order.
   */
  routes?: Record<string, RouteEntry[]>;
  /** The route for requests that name none (default `default`, else the first). */
  defaultRoute?: string;
  retry?: RetryConfig;
  budget?: BudgetConfig;
  breaker?: BreakerConfig;
  /** Per-attempt timeout in ms (default 30000). */
  timeoutMs?: number;
  /** End-to-end deadline over all retries and fallbacks, in ms (default 60000). */
  deadlineMs?: number;
  /** Streams: how long the first token may take, in ms (default 10000). */
  firstTokenTimeoutMs?: number;
  /** Streams: the longest silence between chunks, in ms (default 10000). */
  idleTimeoutMs?: number;
  /** Gateway streams: the wait before keepalives start, and their interval, in ms (default 15000). */
  keepaliveMs?: number;
  /** Latency objectives for every entry, streams' pace, and how demotion decides. */
  latency?: {
    latencySloMs?: number;
    ttftSloMs?: number;
    minTokensPerSecond?: number;
    rateWindowTokens?: number;
    /** Recent samples the p95 is taken over (default 50). */
    window?: number;
    /** Samples before a p95 decides (default 20). */
    minSamples?: number;
    /** Restored below this share of the objective (default 0.8). */
    restoreRatio?: number;
    /** Share of requests that keep the configured order (default 0.05). */
    explore?: number;
  };
  /** Hedged requests by route name (off by default). */
  hedge?: Record<string, { after: number | "p95"; maxExtra?: number; budget?: number }>;
  /** Per-provider breaker settings, over `breaker`. */
  breakers?: Record<string, BreakerConfig>;
  limits?: LimitsConfig;
  /** Whether `provider/model` may name a model no route lists (default false). */
  allowAnyModel?: boolean;
  /**
   * Whether requests are steered by what providers say of their rate-limit pools (default
   * true): an entry whose pool cannot take the request goes behind those that can until its
   * reset, and tier weights follow the share of each pool left. False: only 429s move traffic.
   */
  steerByCapacity?: boolean;
  /**
   * Whether a route sheds its lower-priority calls while its providers cannot carry its load
   * (default true): `sheddable` calls are refused first (an `LLMError` of kind `load_shed`,
   * 503, with `retryAfterMs`), then `standard` ones while `critical` ones ask.
   */
  shedByPriority?: boolean;
  /** Settings of the gateway host (the Worker); ignored by this package. */
  gateway?: { clientKeysEnv?: string[]; allowUnauthenticated?: boolean };
  /** Prices for JS providers (by `provider/model`), and per route its ordering and daily budget. */
  cost?: CostConfig;
  /** Validators and escalation limits, by route name (JS function validators go in `options.validators`). */
  quality?: Record<string, QualityConfig>;
  /** The response cache, by route name: nothing is cached unless a route says so. */
  cache?: Record<string, CacheConfig>;
}

/** A model's prices in US dollars per million tokens. */
export interface PriceConfig {
  inputPerMtok: number;
  outputPerMtok: number;
  cachedInputPerMtok?: number;
  cacheWritePerMtok?: number;
}

/** Cost settings: prices for providers written in code, and each route's ordering and budget. */
export interface CostConfig {
  /** By `provider/model`; over a provider's `models` table. */
  prices?: Record<string, PriceConfig>;
  routes?: Record<
    string,
    {
      /** `"cheapest"`: entries by expected cost for the request (prices × its size and `maxTokens`). Default `"ordered"`. */
      strategy?: "ordered" | "cheapest";
      /** What the route may spend per UTC day, in US dollars (kept per client in this package). */
      dailyBudgetUsd?: number;
      /** Once spent: refuse (`"reject"`, the default) or serve only entries priced at most this per million tokens. */
      overBudget?: "reject" | { maxPricePerMtok: number };
    }
  >;
}

/**
 * A route's validators: an answer that fails one is recorded as a rejected attempt (not a
 * provider failure: no breaker counts it) and the route escalates to its next entry.
 */
export interface QualityConfig {
  /** Checks of the answer's text (or finish reason), in order; the first failure rejects. */
  validators: ValidatorConfig[];
  /** How many rejected answers may escalate to the next entry (default: as many as the route has entries). */
  maxEscalations?: number;
  /** No escalation once the request's attempts have cost this much (US dollars, from the models' prices). */
  maxCostUsd?: number;
  /** When no answer passed: the last answer (default) or an `LLMError` of kind `no_valid_answer` (502). */
  onExhausted?: "lastAnswer" | "error";
}

export type ValidatorConfig =
  | { kind: "json" }
  /** JSON Schema draft 2020-12 (boon): `$ref`s inside the schema only; `pattern`s with Unicode classes; a schema that does not compile is a `ConfigError` at its path. */
  | { kind: "jsonSchema"; schema: object }
  /** The Rust `regex` crate's syntax, Unicode classes such as `\p{L}` included; matches anywhere unless anchored. */
  | { kind: "regex"; pattern: string }
  /** In characters (Unicode scalar values). */
  | { kind: "minLength"; value: number }
  | { kind: "maxLength"; value: number }
  /** Finish reasons that reject, by OpenAI or Anthropic name: `length` / `max_tokens`, `content_filter` / `refusal`, … */
  | { kind: "finishReason"; reject: string[] }
  /** Rejects a refusal: finish reason `content_filter` (Anthropic `refusal`, Gemini `SAFETY`…) or OpenAI's `message.refusal`. */
  | { kind: "notRefusal" };

/** What a JS validator is given: the answer as `client.chat` returns it, without the attempts. */
export interface ValidatedAnswer {
  text: string;
  model: string;
  provider: string;
  usage: Usage | null;
  finishReason: FinishReason | null;
  toolCalls: ToolCall[];
  raw: unknown;
}

/**
 * A JS validator: `true` / `{ ok: true }` passes, `false` / `{ ok: false, reason }` rejects (a
 * throw or a rejected promise rejects too, the error's message as the reason).
 */
export type AnswerValidator = (
  answer: ValidatedAnswer,
) => boolean | { ok: boolean; reason?: string } | Promise<boolean | { ok: boolean; reason?: string }>;

// ---- Requests and responses ----

export type Role = "system" | "user" | "assistant" | "tool";

/** A tool call made by the model. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as JSON text. */
  arguments: string;
}

/**
 * A prompt-cache breakpoint after this part or tool, as Anthropic writes it
 * (`{ type: "ephemeral" }`, optionally with `ttl: "1h"`). Sent to providers
 * that take one; OpenAI caches on its own and ignores it.
 */
export type CacheControl = { type: "ephemeral"; ttl?: string } | Record<string, unknown>;

/** Where an image's bytes are: an http(s) URL (or a base64 `data:` URL), or inline base64. */
export type ImageSource =
  | { url: string; data?: never; mediaType?: never }
  | { data: string; mediaType: string; url?: never };

/** An image; `detail` is OpenAI's (`low`, `high`, `auto`), left out for Anthropic. */
export type Image = ImageSource & { detail?: "low" | "high" | "auto" | (string & {}); cacheControl?: CacheControl };

/**
 * A block of the model's reasoning, as `ChatResult.thinking` holds it. Send
 * it back unchanged in the assistant message of a later turn: Anthropic
 * checks the `signature` (or takes the `redacted` data) to go on from it.
 */
export interface Thinking {
  /** The reasoning text (empty for a redacted block). */
  text: string;
  /** The provider's signature of the block. */
  signature?: string;
  /** Encrypted reasoning (Anthropic `redacted_thinking`), no text. */
  redacted?: string;
}

export type ContentPart =
  | { type: "text"; text: string; cacheControl?: CacheControl }
  | ({ type: "image" } & Image)
  | ({ type: "tool_call" } & ToolCall)
  | {
      type: "tool_result";
      toolCallId: string;
      /** The tool's output as text. */
      content: string;
      /** Images the tool returned beside its text. */
      images?: Image[];
      isError?: boolean;
      cacheControl?: CacheControl;
    }
  | ({ type: "thinking"; text?: string } & Partial<Omit<Thinking, "text">>);

export interface ChatMessage {
  role: Role;
  /** Text, or parts (images, tool calls and results, thinking sent back). */
  content: string | ContentPart[];
}

export interface Tool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  parameters: unknown;
  cacheControl?: CacheControl;
}

export type ToolChoice =
  | { type: "auto" }
  | { type: "none" }
  | { type: "required" }
  | { type: "tool"; name: string };

/**
 * The shape of the answer. Through an Anthropic provider, `json_schema`
 * becomes its structured output (or a forced tool, per the model's config)
 * and the answer's `text` is the JSON either way.
 */
export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name: string; schema: unknown; strict?: boolean; description?: string };

/**
 * How much the model reasons before answering: one of an OpenAI effort
 * level (a thinking budget for Anthropic), a thinking budget in tokens (an
 * effort level for OpenAI), adaptive thinking (the model decides; Anthropic's
 * `thinking: {type: "adaptive"}` with `output_config.effort`, the effort
 * level or the provider's default for OpenAI), or no reasoning.
 */
export type Reasoning =
  | { effort: "minimal" | "low" | "medium" | "high" | (string & {}) }
  | { budgetTokens: number }
  | { adaptive: true; effort?: "low" | "medium" | "high" | (string & {}) }
  | { disabled: true };

/** Request headers a native body may carry to its provider; no other (credentials never). */
export type ForwardedHeader = "anthropic-beta" | "openai-beta" | "idempotency-key";

/**
 * A request written in a provider's own format. An entry whose provider
 * speaks `dialect` is sent `body` as it is, every field included (known,
 * unknown, future), with only `model` (the entry's), `stream` and, on a
 * stream, the usage setting changed. Other entries are sent the translation
 * of the body, read as the gateway reads a client's: a field with no
 * equivalent there makes that entry pass (the next one is tried), a
 * sampling hint is left out and named in the attempt's `omitted`.
 */
export interface NativeRequest {
  dialect: "openai" | "anthropic";
  /** The provider-format body (`messages`, `max_tokens`, …). Its `model` names the route unless `ChatRequest.model` does. */
  body: Record<string, unknown>;
  headers?: Partial<Record<ForwardedHeader, string>>;
}

/**
 * A request: the neutral fields below, or `native` (with at most `model`
 * beside it). Unknown fields are refused with their path, so a typo is an
 * error rather than a setting silently never sent.
 */
export type ChatRequest = NeutralRequest | { native: NativeRequest; model?: string };

export interface NeutralRequest {
  messages: ChatMessage[];
  /** A route name (`default`, `fast`, …); the route's entries pick the models. */
  model?: string;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  /** Top-k sampling (Anthropic; left out for OpenAI, named in `omitted`). */
  topK?: number;
  stop?: string[];
  tools?: Tool[];
  toolChoice?: ToolChoice;
  /** `false`: at most one tool call per turn. */
  parallelToolCalls?: boolean;
  responseFormat?: ResponseFormat;
  reasoning?: Reasoning;
  /** Sampling seed (OpenAI; left out for Anthropic, named in `omitted`). */
  seed?: number;
  /** OpenAI; left out for Anthropic, named in `omitted`. */
  frequencyPenalty?: number;
  /** OpenAI; left out for Anthropic, named in `omitted`. */
  presencePenalty?: number;
  /** `auto`, `default`, `flex`, `priority` (OpenAI) or `standard_only` (Anthropic); mapped where there is an equivalent. */
  serviceTier?: string;
  /** OpenAI's prompt cache key. */
  promptCacheKey?: string;
  /** Provider metadata; its `user_id` reaches both providers. */
  metadata?: Record<string, unknown>;
  /** The end user's id: `metadata.user_id` (OpenAI `user`). */
  user?: string;
}

/** Options of one call. */
export interface ChatOptions {
  /** Aborting rejects the call with an `AbortError` and aborts the upstream call. */
  signal?: AbortSignal;
  /** The route to use instead of `request.model`. */
  route?: string;
  /** A tighter end-to-end deadline for this call, in ms. */
  deadlineMs?: number;
  /** `false`: never hedge this call, whatever its route says (a call that must not run twice). */
  hedge?: boolean;
  /**
   * This call's priority class for its route's load shedding (default `"standard"`): while
   * the route's providers cannot carry its load, `sheddable` calls are refused first, then
   * `standard` ones; `critical` ones are always sent.
   */
  priority?: "critical" | "standard" | "sheddable";
  /**
   * On a route that caches (`cache.<route>`), this call's controls, as an HTTP client's
   * `cache-control` and `x-cache-ttl`: `noCache` asks the providers whatever is stored (the
   * answer is still stored, and no stale answer is given), `noStore` keeps this answer out of
   * the store, `ttlSeconds` keeps it fresh for less than the route's TTL.
   */
  cache?: { noCache?: boolean; noStore?: boolean; ttlSeconds?: number };
  /**
   * The caller's W3C `traceparent` (and `tracestate`): each attempt sends its provider a
   * `traceparent` naming a span of its own, a child of this one, and the `tracestate` as given.
   * Without it no trace context is sent. An invalid `traceparent` rejects the call (400).
   */
  traceparent?: string;
  tracestate?: string;
}

/** What `client.embeddings(…)` takes: an OpenAI embeddings body, sent on as written. */
export interface EmbeddingsRequest {
  /** An embeddings route (or `provider/model`). */
  model: string;
  input: string | string[] | number[] | number[][];
  encoding_format?: "float" | "base64";
  dimensions?: number;
  user?: string;
  [field: string]: unknown;
}

/** What `await client.embeddings(…)` gives. */
export interface EmbeddingsResult {
  /** One vector per input, in input order: numbers, or base64 for `encoding_format: "base64"`. */
  embeddings: (number[] | string)[];
  /** The model that answered, as the provider named it. */
  model: string | null;
  /** The provider's usage, as it reported it (`{ prompt_tokens, total_tokens }`), or null. */
  usage: { prompt_tokens?: number; total_tokens?: number } | null;
  servedBy: { provider: string; model: string; label: string | null };
  attempts: AttemptRecord[];
  /** The provider's own response (JSON). */
  raw: unknown;
}

/** What `client.countTokens(…)` takes: an Anthropic count_tokens body, sent on as written. */
export interface CountTokensRequest {
  model: string;
  messages: unknown[];
  system?: unknown;
  tools?: unknown[];
  [field: string]: unknown;
}

/** What `await client.countTokens(…)` gives. */
export interface CountTokensResult {
  inputTokens: number;
  servedBy: { provider: string; model: string; label: string | null };
  attempts: AttemptRecord[];
  /** The provider's own response (`{ input_tokens }`). */
  raw: unknown;
}

export type ErrorKind =
  | "rate_limited"
  | "quota_exhausted"
  | "server"
  | "timeout"
  | "stalled"
  | "transport"
  | "auth"
  | "not_found"
  | "context_length"
  | "content_filter"
  | "invalid_request"
  | "unsupported"
  | "decode"
  | "circuit_open"
  | "deadline_exceeded";

/** One attempt at one route entry. */
export interface AttemptRecord {
  provider: string;
  model: string;
  /** 1 for the first try at an entry, 2 for its first retry, …; 0 when skipped (open breaker). */
  attempt: number;
  ok: boolean;
  kind?: ErrorKind;
  status?: number;
  code?: string;
  message?: string;
  retryAfterMs?: number;
  retryable?: boolean;
  durationMs: number;
  /** When it started (ms since the epoch). */
  startedAt: number;
  /** Whether the request reached the provider. */
  reached: boolean;
  /** The tokens it consumed, where the provider reported them (a failed stream's too). */
  usage?: Usage;
  /** Sampling hints of the request this provider has no setting for, left out of what was sent (`seed`, …). */
  omitted?: string[];
  /** `validator: reason` when the provider answered but a route validator refused the answer (`ok` is then false). */
  rejected?: string;
}

/**
 * Token counts as the provider reported them; a count it did not report is
 * absent, never 0. `inputTokens` counts every input token, cached ones
 * included; `outputTokens` includes reasoning.
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the prompt cache. */
  cachedInputTokens?: number;
  /** Input tokens written to the prompt cache (Anthropic). */
  cacheWriteInputTokens?: number;
  /** Output tokens spent reasoning. */
  reasoningTokens?: number;
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | (string & {});

/** What `await client.chat(…)` gives. */
export interface ChatResult {
  text: string;
  /** The model that answered, as the provider named it. */
  model: string;
  /** The provider that answered. */
  provider: string;
  /** The route entry that answered. */
  servedBy: { provider: string; model: string; label: string | null };
  /** Every attempt, in order, the successful one last. */
  attempts: AttemptRecord[];
  usage: Usage | null;
  finishReason: FinishReason | null;
  toolCalls: ToolCall[];
  /** The model's reasoning, block by block (empty when it gave none); send it back in the next turn. */
  thinking: Thinking[];
  /** The provider's own response (JSON), or null. */
  raw: unknown;
  /**
   * What the attempts cost in US dollars, from the usage providers reported
   * and the configured prices: every attempt (`totalUsd`) and the answer's
   * share (`answerUsd`). Null when no attempt reported usage of a priced model.
   */
  cost: { totalUsd: number; answerUsd?: number } | null;
  /**
   * What the response cache did, on a route that caches (absent elsewhere): `hit` (a fresh
   * stored answer, `ageSeconds` old, no attempts), `miss` (asked, stored when it may be),
   * `stale` (every entry failed with `error`; a stored answer past its TTL within its stale
   * window instead), `bypass` (`noCache`, or a body that cannot be canonicalised). `savedUsd`:
   * what a stored answer cost when it was asked.
   */
  cache?: {
    result: "hit" | "miss" | "stale" | "bypass";
    ageSeconds?: number;
    savedUsd?: number;
    error?: string;
  };
}

/** `client.costs()`: what was spent. */
export interface CostReport {
  /** Per provider and model since the client started. */
  costs: { provider: string; model: string; usd: number; attempts: number }[];
  /** Each route with a daily budget: today's spend (UTC day). */
  spend: { route: string; budgetUsd: number; spentUsd: number; exhausted: boolean; resetsAt: number }[];
}

// ---- Streams ----

/**
 * What `client.stream(…)` yields, in order: `start` (the answering model),
 * then thinking, text and tool call parts, then `finish` and `usage` (only
 * where the provider reported it: never zeros). A `thinking` event's `text`
 * extends the current block; one with a `signature` ends it; one with
 * `redacted` is a whole redacted block.
 */
export type StreamEvent =
  | { type: "start"; model: string | null }
  | { type: "thinking"; text: string; signature?: string; redacted?: string }
  | { type: "text"; text: string }
  | { type: "tool_call"; index: number; id: string | null; name: string | null; arguments: string }
  | { type: "finish"; reason: FinishReason }
  | { type: "usage"; usage: Usage };

/** The whole answer of a stream, once it ends. */
export interface StreamAnswer {
  text: string;
  /** The reasoning text, all blocks joined. */
  thinking: string;
  toolCalls: { index: number; id: string | null; name: string | null; arguments: string }[];
  finishReason: FinishReason | null;
  /** As the provider reported it; null when it reported none. */
  usage: Usage | null;
  model: string | null;
}

/** `client.stream`'s options: a call's (but `cache`: a stream through `client.fetch` caches), and `onFinish`. */
export interface StreamOptions extends Omit<ChatOptions, "cache"> {
  /** Called once with the whole answer when the stream ends cleanly. */
  onFinish?: (answer: StreamAnswer) => void;
}

/**
 * What `client.stream(…)` returns: an async iterator of `StreamEvent`s. Read it once, one way:
 * `for await`, `textStream`, `toReadableStream()` or `toResponse()`. Stopping early (break,
 * `return()`, cancelling the ReadableStream or the Response's body) aborts the upstream request.
 */
export interface StreamResult extends AsyncIterableIterator<StreamEvent> {
  /** Stops reading: frees the stream and aborts the upstream request. */
  return(value?: unknown): Promise<IteratorResult<StreamEvent>>;
  /** The answer's text pieces, as strings. */
  readonly textStream: AsyncIterableIterator<string>;
  /**
   * The whole answer once the stream ends; rejects with the stream's error. Asked for before any
   * reading starts, it reads the stream itself.
   */
  readonly finalResponse: Promise<StreamAnswer>;
  /** The events as a ReadableStream. */
  toReadableStream(): ReadableStream<StreamEvent>;
  /**
   * A `Response` of server-sent events for a route handler: `event: <type>` and the event as
   * JSON per event; `event: error` with the error's JSON if the stream fails after it began.
   */
  toResponse(init?: ResponseInit): Response;
}

// ---- JS providers ----

/** What a JS provider's `chat` receives: the neutral request, the entry's model, text-only messages as strings. */
export interface ProviderRequest extends Omit<NeutralRequest, "model" | "user"> {
  /** The model of the route entry being tried. */
  model: string;
  /**
   * The caller's native body, when it gave one (the fields above are read
   * from it): what they cannot hold — unknown and future fields — is there.
   */
  native?: NativeRequest & { headers: Partial<Record<ForwardedHeader, string>> };
}

/** What a JS provider's `chat` resolves with (`{ text, model }` and what else it knows). */
export interface ProviderResponse {
  text: string;
  model?: string;
  toolCalls?: ToolCall[];
  finishReason?: FinishReason;
  usage?: Usage;
  thinking?: Thinking[];
  /** Kept when it is JSON. */
  raw?: unknown;
}

/**
 * A provider written in JS: `{ name, chat(request, signal) }`. It gets the
 * same timeout, retries, breaker and failover as the built-in adapters, and
 * `signal` aborts when the client stops waiting (timeout, caller abort).
 *
 * What it throws is classified: `kind` (this package's error classes), else
 * `status` (429 rate limited; 5xx, 529, 408 server; 401/403 auth; 404 not
 * found; 400/413/422 invalid request), else the class name (`RateLimitError`,
 * `ServerError`, `TimeoutError`, `ClientRequestError`; a `TypeError` is a
 * network failure, retried), else a server error. `retryable` overrides the
 * verdict; `retryAfterMs` is honoured.
 */
export interface Provider {
  readonly name: string;
  /** The model its entry sends when it forms the default route (default: `name`). */
  readonly model?: string;
  chat(request: ProviderRequest, signal: AbortSignal): Promise<ProviderResponse>;
}

// ---- Events ----

export interface RetryEvent {
  type: "retry";
  provider: string;
  model: string;
  /** The route entry's label, when it has one. */
  label?: string;
  /** The attempt that failed (1-based). */
  attempt: number;
  /** The wait before the next attempt (Retry-After when the provider gave one). */
  delayMs: number;
  error: LLMError;
}

export interface ProviderFailedEvent {
  type: "provider_failed";
  provider: string;
  model: string;
  /** The route entry's label, when it has one. */
  label?: string;
  error: LLMError;
}

export interface FailoverEvent {
  type: "failover";
  /** The provider left behind, its model and its entry's label. */
  from: string;
  fromModel: string;
  fromLabel?: string;
  /** The provider tried next, its model and its entry's label. */
  to: string;
  toModel: string;
  toLabel?: string;
  error: LLMError;
}

export type BreakerState = "closed" | "open" | "half_open";

/** A breaker changed state. Breakers are per (provider, model); `model` is `"*"` for the one breaker models no route lists share. */
export interface BreakerEvent {
  type: "breaker";
  provider: string;
  model: string;
  /** The route entry's label, when it has one. */
  label?: string;
  from: BreakerState;
  to: BreakerState;
}

export interface BudgetExhaustedEvent {
  type: "budget_exhausted";
  provider: string;
}

/** An entry's latency standing changed. */
export interface StandingEvent {
  type: "demoted" | "restored";
  provider: string;
  model: string;
  label?: string;
  measure: "latency" | "ttft";
  p95Ms: number;
  sloMs: number;
}

export type ClientEvent =
  | RetryEvent
  | ProviderFailedEvent
  | FailoverEvent
  | BreakerEvent
  | BudgetExhaustedEvent
  | StandingEvent;

/** The constructor's second argument. */
export interface ClientOptions {
  /** JS providers, referenced by `name` in routes (or, without routes, the `default` route in order). */
  providers?: Provider[];
  /** Every event. Called synchronously; a throwing hook is logged, not fatal. */
  onEvent?: (event: ClientEvent) => void;
  onRetry?: (event: RetryEvent) => void;
  onProviderError?: (event: ProviderFailedEvent) => void;
  onFailover?: (event: FailoverEvent) => void;
  /**
   * When a route has a single entry and it fails, reject with that provider's own typed error
   * (`TimeoutError`, `ClientRequestError`, …, with `attempts`) instead of an
   * `AllProvidersFailedError`. Default `false`: an `AllProvidersFailedError` whose `cause` is the
   * last failure as its own class.
   */
  unwrapSingleProvider?: boolean;
  /**
   * JS validators by route name, run after the route's configured `quality` validators; an
   * answer one refuses escalates like any rejected answer. A route's stream is then buffered.
   */
  validators?: Record<string, AnswerValidator | AnswerValidator[]>;
  /**
   * Where `client.fetch` keeps the answers of the routes with a `cache` (default: memory, within
   * `limits.cacheMaxEntries` and `limits.cacheMaxBytes`).
   */
  cacheStore?: CacheStore;
  /**
   * The calls' spans in the app's own OpenTelemetry tracer: `openTelemetry()` from
   * `resilient-llm/opentelemetry` (which needs `@opentelemetry/api`). Each `chat()`, `stream()`
   * and `fetch` request then has a span under the app's active span (or `options.traceparent`)
   * and one per attempt under it, whose id is the `traceparent` its provider gets.
   */
  tracing?: TracingBridge;
}

/** What `openTelemetry()` returns: the client calls it; its methods are not an API of their own. */
export interface TracingBridge {
  begin(parent?: unknown): unknown;
  hold(traceId: string, spanId: string): void;
  open(traceId: string, parentId: string, startTime: number): string | undefined;
  close(spans: unknown[]): void;
  release(traceId: string, spanId: string): void;
}

/**
 * One provider's health. Two counters with different lives sit side by side: the breaker's
 * (`state`, `consecutiveFailures`) restart at each breaker transition, while the statistics
 * (`requests`, `failures`, `errorRate`, latencies) run for the client's life. So an open breaker
 * shows `consecutiveFailures: 0` beside the `failures` that opened it. Breakers are per model:
 * `state`, `openUntil` and `consecutiveFailures` are the worst of `models`.
 */
export interface ProviderHealth {
  provider: string;
  /** `closed` (calls pass), `open` (calls skipped until `openUntil`), `half_open` (probes pass); the worst of its models'. */
  state: BreakerState;
  /** When an open breaker lets a probe through, in Unix ms (`new Date(openUntil)`); else null. */
  openUntil: number | null;
  /**
   * The breaker's count of failures in a row since its last success or state change (reset to 0
   * when it opens, half-opens or closes); `breaker.failureThreshold` of them open it. Only
   * failures that count for the breaker (not a bad request, a context overflow or a content
   * filter) add to it.
   */
  consecutiveFailures: number;
  /** Calls that went to the provider (or tried to), ever; skipped calls are not counted. */
  requests: number;
  /** Of those, the calls that failed, of any kind, ever. */
  failures: number;
  /** The failed share of the last 256 calls. */
  errorRate: number;
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
  /** Streams: time to first token over recent streams. */
  ttftMs: { p50: number | null; p95: number | null; p99: number | null };
  /** Streams: median output rate, tokens per second. */
  tokensPerSec: number | null;
  /** The most recent failure; `at` in Unix ms. */
  lastFailure: { at: number; kind: ErrorKind; status: number | null; message: string } | null;
  /**
   * The breaker of each model routes send to this provider (and `"*"`, shared by the models no
   * route lists, once used). A rate limit of one model opens only its own; a refused key or an
   * unreachable host counts against all of them.
   */
  models: ModelBreaker[];
  /** Models of this provider demoted for their latency; absent when none is. */
  demoted?: { model: string; measure: "latency" | "ttft"; p95Ms: number }[];
}

/** One model's breaker at a provider, and its own figures (the provider's are over all its models). */
export interface ModelBreaker {
  model: string;
  /** The first label a route gives the entry. */
  label?: string;
  state: BreakerState;
  openUntil: number | null;
  consecutiveFailures: number;
  requests: number;
  failures: number;
  errorRate: number;
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
  ttftMs: { p50: number | null; p95: number | null; p99: number | null };
  /**
   * What the provider's last answer for this model said of its rate-limit pools (OpenAI's
   * `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*` headers); absent until one said
   * anything, and for providers that send none (Bedrock, Vertex AI).
   */
  pool?: PoolReading;
}

/** One limit of a rate-limit pool; each field absent where the provider did not say it. */
export interface Quota {
  limit?: number;
  remaining?: number;
  /** When it is full again, Unix ms. */
  resetAt?: number;
}

/** A provider's rate-limit pools as its last answer's headers said them. */
export interface PoolReading {
  /** When that answer arrived, Unix ms. */
  saidAt: number;
  requests?: Quota;
  /** Anthropic: the most restrictive of its token limits. */
  tokens?: Quota;
  /** Anthropic only. */
  inputTokens?: Quota;
  /** Anthropic only. */
  outputTokens?: Quota;
  /**
   * Until when a `retry-after` asked to wait, Unix ms: Anthropic's answers say it, and a 429
   * of any provider with a Retry-After marks its pool empty until then.
   */
  retryAfterUntil?: number;
}

// ---- Errors (classes exported by this package) ----

export interface LLMErrorInit {
  kind?: string;
  retryable?: boolean;
  status?: number;
  retryAfterMs?: number;
  code?: string;
  provider?: string;
  cause?: unknown;
}

/** Base class of every error a call rejects with. */
export class LLMError extends Error {
  constructor(message: string, init?: LLMErrorInit);
  /**
   * An `ErrorKind`, or `all_providers_failed`, `aborted`, `unknown_route`, `interrupted` (a stream
   * cut after it began), `invalid_state` (a stream read twice at once), `disposed` (the client was
   * freed), `config` (a `ConfigError`), `load_shed` (the call's route sheds its priority class:
   * nothing was sent; `retryAfterMs` says when to try again).
   */
  readonly kind:
    | ErrorKind
    | "all_providers_failed"
    | "load_shed"
    | "aborted"
    | "unknown_route"
    | "interrupted"
    | "invalid_state"
    | "disposed"
    | "config"
    | (string & {});
  /** Whether trying again may succeed. */
  readonly retryable: boolean;
  /** The HTTP status (a gateway would answer with it). */
  readonly status?: number;
  /** How long to wait before trying again, when known. */
  readonly retryAfterMs?: number;
  /** The provider's error code, when it gave one. */
  readonly code?: string;
  /** The provider that failed or rejected the request. */
  readonly provider?: string;
  /** Every attempt up to a rejection. */
  readonly attempts?: AttemptRecord[];
  toJSON(): Record<string, unknown>;
}
/** 429 or spent quota. */
export class RateLimitError extends LLMError {}
/** 5xx, 529 overloaded, 408, or an undecodable response. */
export class ServerError extends LLMError {}
/** An attempt's deadline, a stalled body, or the request's deadline. */
export class TimeoutError extends LLMError {}
/** Reset, refused, DNS or TLS failure. */
export class NetworkError extends LLMError {}
/** The request itself is unusable (400, 401, 403, 404, 413, 422, unknown route). */
export class ClientRequestError extends LLMError {}
/** A provider's breaker is open. */
export class CircuitOpenError extends LLMError {}
/** The call's `AbortSignal` fired; `cause` is the signal's reason. */
export class AbortError extends LLMError {}
/**
 * Every provider failed or was skipped. `cause` is the last failure as its own class; `status`
 * is the failures' own when they share one (a lone 401 is a 401), else 503 (400 when every
 * provider found the request unusable); `retryable` is true when some failure was transient.
 */
export class AllProvidersFailedError extends LLMError {
  constructor(message: string, init?: LLMErrorInit & { failures?: AttemptRecord[] });
  /** Every attempt, in order: provider, model, kind, status, message, durationMs, reached. */
  readonly failures: AttemptRecord[];
}
/**
 * An invalid configuration or options, thrown by `new ResilientClient` (never by a call); kind
 * `config`, not retryable. `issues` lists every problem with its path.
 */
export class ConfigError extends LLMError {
  constructor(message: string, init?: LLMErrorInit & { issues?: { path: string; message: string }[] });
  readonly issues: { path: string; message: string }[];
}
