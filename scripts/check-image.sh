#!/usr/bin/env bash
# Builds the container image (Dockerfile) and smoke-tests it, where Docker is available; says
# SKIPPED and exits 0 where it is not (the command the image runs, scripts/serve.sh, is tested
# without Docker by tests/e2e/selfhost.test.mjs).
#
#   scripts/check-image.sh [--tag NAME]      (default resilient-llm:check)
#
# The smoke test, all on 127.0.0.1 (host networking, Linux): the mock provider on a free port,
# the image with a configuration over it (gateway auth on, keys in the container's environment),
# then: its HEALTHCHECK turns healthy; a chat request without the key is 401, with it 200 and
# served by the mock; `docker stop` (SIGTERM) ends it with exit code 0; started again on the
# same volume it answers again. The image, container and volume are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=resilient-llm:check
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    *) echo "check-image: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
say() { printf 'check-image: %s\n' "$*"; }

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  say "SKIPPED: no Docker here (the image's command, scripts/serve.sh, is tested by tests/e2e/selfhost.test.mjs)"
  exit 0
fi

name=rl-check-$$
volume=rl-check-state-$$
work=$(mktemp -d)
mock_pid=
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker volume rm "$volume" >/dev/null 2>&1 || true
  if [[ -n $mock_pid ]]; then kill "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

say "docker build -t $tag ."
docker build -t "$tag" .

# The mock provider on a free port; its URL from its first line.
node tests/e2e/mock-provider.mjs --port 0 >"$work/mock.out" 2>&1 &
mock_pid=$!
for _ in $(seq 50); do grep -q listening "$work/mock.out" && break; sleep 0.1; done
mock_url=$(sed -nE 's/.*"listening":"([^"]+)".*/\1/p' "$work/mock.out" | head -n 1)
[[ -n $mock_url ]] || { say "FAILED: the mock provider did not start"; exit 1; }
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
cat >"$work/config.json" <<EOF
{"providers": {"steady": {"kind": "openai", "baseUrl": "$mock_url/p/steady", "apiKeyEnv": "MOCK_API_KEY"}},
 "routes": {"default": [{"provider": "steady", "model": "m"}]},
 "gateway": {"clientKeysEnv": ["GATEWAY_KEY"]}}
EOF
chmod 644 "$work/config.json"
key=check-$$-key

start() {
  docker run -d --name "$name" --network host --health-interval 1s --health-start-period 30s \
    -v "$volume:/data" -v "$work:/config:ro" -e GATEWAY_KEY="$key" -e MOCK_API_KEY=mock-key \
    "$tag" --listen "127.0.0.1:$port" --config /config/config.json >/dev/null
}
wait_healthy() {
  local status=
  for _ in $(seq 60); do
    status=$(docker inspect -f '{{.State.Health.Status}}' "$name")
    [[ $status == healthy ]] && return 0
    sleep 1
  done
  docker logs "$name" | tail -n 20
  say "FAILED: the container is '$status', not healthy, after 60 s"
  exit 1
}
request() { # KEY → the HTTP status and x-served-by
  # shellcheck disable=SC2016  # JavaScript, not shell
  node -e '
    const [url, key] = process.argv.slice(1);
    fetch(url, { method: "POST", signal: AbortSignal.timeout(10000),
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "hello" }] }) })
      .then((r) => console.log(r.status, r.headers.get("x-served-by") ?? "-"), (e) => console.log("error", e.message));
  ' "http://127.0.0.1:$port/v1/chat/completions" "${1:-}"
}

start
wait_healthy
say "healthy"
[[ $(request) == "401 -" ]] || { say "FAILED: no key: $(request)"; exit 1; }
got=$(request "$key")
[[ $got == "200 steady/m" ]] || { say "FAILED: with the key: $got"; docker logs "$name" | tail -n 20; exit 1; }
say "401 without the key, 200 with it, served by the mock"
docker stop -t 20 "$name" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$name")
[[ $code == 0 ]] || { say "FAILED: exit code $code after docker stop (SIGTERM)"; exit 1; }
say "docker stop: exit code 0"
docker rm "$name" >/dev/null
start
wait_healthy
got=$(request "$key")
[[ $got == "200 steady/m" ]] || { say "FAILED: after the restart: $got"; exit 1; }
say "restarted on the same volume: 200"
docker rmi "$tag" >/dev/null 2>&1 || true
say "OK"
