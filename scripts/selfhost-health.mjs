#!/usr/bin/env node
// The container image's HEALTHCHECK: GET /health on the self-hosted gateway, healthy when it
// answers 200 within 4 s. The gateway asks for a client key there when auth is on: the key is
// read from the environment variable HEALTHCHECK_KEY_ENV names (default GATEWAY_KEY), unset
// when auth is off. Exit 0 healthy, 1 not (what Docker's HEALTHCHECK reads).
//   node scripts/selfhost-health.mjs [URL]      (default http://127.0.0.1:8787/health)
const url = process.argv[2] ?? "http://127.0.0.1:8787/health";
const key = process.env[process.env.HEALTHCHECK_KEY_ENV || "GATEWAY_KEY"];
try {
  const res = await fetch(url, { headers: key ? { "x-api-key": key } : {}, signal: AbortSignal.timeout(4000) });
  const body = await res.json().catch(() => ({}));
  console.log(`health: ${res.status} ${body.status ?? ""}`.trim());
  process.exit(res.status === 200 ? 0 : 1);
} catch (e) {
  console.log(`health: ${e.message}`);
  process.exit(1);
}
