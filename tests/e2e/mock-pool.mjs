// A rate-limit pool for the mock provider (tests/e2e/mock-provider.mjs): the setting
// `pool: { requests, tokens, windowMs }` gives a provider a pool of `requests` requests and
// `tokens` tokens (either may be left out) that fills again `windowMs` (default 60000) after
// its first use. Every answer of the provider, an error's too, says what is left in the
// headers of its format: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (OpenAI's,
// resets as durations such as "1.5s" or "250ms") or `anthropic-ratelimit-{requests,tokens}-
// {limit,remaining,reset}` (Anthropic's, resets as RFC 3339 times). A request the pool cannot
// take is answered 429 with a `retry-after` (seconds until it fills) and counted in the
// provider's stats as `poolRefused`. A request costs one request and its tokens: its input
// estimated as a quarter of its messages' JSON length, plus its max_tokens.

export const POOL_KEYS = ["requests", "tokens", "windowMs"];

/** Why `raw` is not a pool setting, or null. */
export function poolProblem(raw) {
  if (raw === undefined) return null;
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return "must be an object";
  for (const key of Object.keys(raw)) if (!POOL_KEYS.includes(key)) return `${key}: unknown setting (${POOL_KEYS.join(", ")})`;
  for (const key of POOL_KEYS) {
    const v = raw[key];
    if (v !== undefined && !(Number.isInteger(v) && v >= 1 && v <= 1e9)) return `${key}: must be a whole number in 1..1e9`;
  }
  if (raw.requests === undefined && raw.tokens === undefined) return "give requests, tokens or both";
  return null;
}

/** A pool's state: what is left and when it fills (starting at its first use). */
export function newPool(setting) {
  return { setting, requests: setting.requests, tokens: setting.tokens, fullAt: null };
}

/** What `body` costs the pool in tokens. */
function cost(body) {
  const input = Math.ceil(JSON.stringify(body.messages ?? body.input ?? "").length / 4);
  const output = body.max_tokens ?? body.max_completion_tokens ?? body.max_output_tokens ?? 0;
  return input + (Number.isInteger(output) ? output : 0);
}

/**
 * Takes `body`'s cost from `pool` at `now`: { ok, headers } where headers say what is left in
 * `format`'s family, and a refusal carries its retry-after.
 */
export function take(pool, body, format, now = Date.now()) {
  const { setting } = pool;
  if (pool.fullAt !== null && now >= pool.fullAt) {
    pool.requests = setting.requests;
    pool.tokens = setting.tokens;
    pool.fullAt = null;
  }
  if (pool.fullAt === null) pool.fullAt = now + (setting.windowMs ?? 60000);
  const tokens = cost(body);
  const ok = (pool.requests === undefined || pool.requests >= 1) && (pool.tokens === undefined || pool.tokens >= tokens);
  if (ok) {
    if (pool.requests !== undefined) pool.requests -= 1;
    if (pool.tokens !== undefined) pool.tokens -= tokens;
  }
  const headers = poolHeaders(pool, format, now);
  if (!ok) headers["retry-after"] = String(Math.max(1, Math.ceil((pool.fullAt - now) / 1000)));
  return { ok, headers };
}

function poolHeaders(pool, format, now) {
  const headers = {};
  const anthropic = format === "anthropic";
  for (const kind of ["requests", "tokens"]) {
    if (pool[kind] === undefined) continue;
    const limit = String(pool.setting[kind]);
    const remaining = String(pool[kind]);
    if (anthropic) {
      headers[`anthropic-ratelimit-${kind}-limit`] = limit;
      headers[`anthropic-ratelimit-${kind}-remaining`] = remaining;
      headers[`anthropic-ratelimit-${kind}-reset`] = new Date(pool.fullAt).toISOString();
    } else {
      headers[`x-ratelimit-limit-${kind}`] = limit;
      headers[`x-ratelimit-remaining-${kind}`] = remaining;
      headers[`x-ratelimit-reset-${kind}`] = duration(pool.fullAt - now);
    }
  }
  return headers;
}

/** Milliseconds as OpenAI writes a reset: "250ms", "1.5s", "6m0s". */
export function duration(ms) {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number(s.toFixed(3))}s`;
  const m = Math.floor(s / 60);
  return `${m}m${Number((s - m * 60).toFixed(3))}s`;
}
