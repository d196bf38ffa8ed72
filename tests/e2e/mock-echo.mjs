// The mock provider's "echo-key" mode: an error whose message quotes the key the request
// carried, whole (as a proxy echoing the Authorization header would) and masked (as OpenAI's
// "Incorrect API key provided: sk-...abcd" does), for the tests that keys never reach a client
// or a log.

/** The key a request carried: its Bearer token, x-api-key or api-key header; "" when none. */
export function requestKey(headers) {
  const auth = headers.authorization ?? "";
  const bearer = /^Bearer\s+(.+)$/i.exec(auth);
  return (bearer ? bearer[1] : auth) || headers["x-api-key"] || headers["api-key"] || "";
}

/** The key as a provider masks it: its first 3 characters, "...", its last 4. */
export function maskedKey(key) {
  return `${key.slice(0, 3)}...${key.slice(-4)}`;
}

/** Answers `status` (default 401) with a message quoting the request's key both ways. */
export function echoKey(ctx, rule, replyError) {
  const key = requestKey(ctx.req.headers);
  const status = rule.status ?? 401;
  const kind = status === 401 ? "auth" : "server";
  replyError(ctx, status, kind, `Incorrect API key provided: ${maskedKey(key)}. You sent: Authorization: Bearer ${key}`);
}
