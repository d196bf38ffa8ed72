#!/usr/bin/env bash
# The main job. For now: the failover demo on the fake platform (virtual
# time, no network, no keys).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --example demo --features testing
