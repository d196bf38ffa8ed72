#!/usr/bin/env bash
# Every test of the project, from a fresh clone: installs what it needs
# (pinned, outside the clone), then runs the checks and the test suites.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain and tools (pinned, installed outside the clone, skipped when present)"
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
bash scripts/setup.sh
TOOLS=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}
# Warm builds: every clone (CI's is fresh each run) shares one target directory.
export RESILIENT_LLM_SHARED_TARGET=1
# shellcheck source=/dev/null
. "$TOOLS/env.sh"

step "format and lints (native and wasm32)"
cargo fmt --all -- --check
cargo clippy --all-targets --all-features -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown --features js -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown --features worker,schema -- -D warnings

step "the core builds for wasm32 without wasm-only crates"
cargo build --lib --target wasm32-unknown-unknown

step "native tests, default features (as a contributor's plain \`cargo test\` runs them)"
cargo test

step "native tests, all features (fake platform: deterministic, no sleeps, no ports)"
cargo test --all-features

step "fuzz targets: 20 s each from the committed seed corpora (nightly + cargo-fuzz, installed if missing)"
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
bash scripts/fuzz.sh 20

step "npm package: pkg/ (one package for every runtime), size, Node, SDK, packed-tarball and headless Chromium suites"
bash scripts/test-npm.sh

step "Cloudflare Worker: build, size, wrangler deploy --dry-run, end-to-end in workerd"
bash scripts/test-worker.sh --no-setup

step "self-hosted Worker: scripts/serve.sh on workerd (its configuration, the e2e subset, a restart); the image where Docker is"
node --test --test-concurrency=1 tests/e2e/selfhost-config.test.mjs tests/e2e/selfhost.test.mjs
bash scripts/check-image.sh

step "benchmark builds"
cargo bench --no-run --features testing
# The edge benchmark's Rust/wasm reference (a standalone crate; scripts/bench-worker.sh builds it).
cargo fmt --manifest-path benches/edge-reference/Cargo.toml -- --check
cargo clippy --manifest-path benches/edge-reference/Cargo.toml --target wasm32-unknown-unknown -- -D warnings

step "mock provider server (node --test)"
node --test tests/e2e/mock-provider.test.mjs tests/e2e/mock-answers.test.mjs tests/e2e/mock-quality.test.mjs \
  tests/e2e/mock-pool.test.mjs
