#!/usr/bin/env bash
# The Python virtualenv of the end-to-end suite: $TOOLS/venv-py with the official `openai` and
# `anthropic` clients, `pydantic`, selenium and `opentelemetry-proto` (the OTLP receiver), at the
# versions pinned in tests/e2e/python/requirements.txt.
# Skipped when the venv already holds exactly those (a stamp of the requirements file).
#   TOOLS=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}
#   PYTHON: the interpreter that makes the venv (default python3, >= 3.9)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}
VENV=$TOOLS/venv-py
REQUIREMENTS=$ROOT/tests/e2e/python/requirements.txt
PY=${PYTHON:-python3}

log() { printf 'setup-python: %s\n' "$*" >&2; }

command -v "$PY" >/dev/null || { log "error: $PY not found (install Python 3.9 or newer)"; exit 1; }
mkdir -p "$TOOLS"
# One install at a time per $TOOLS (clones on one machine share it).
exec 8>"$TOOLS/.setup-python.lock"
flock 8

want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
stamp=$VENV/.resilient-llm-requirements
if [[ -f $stamp && $(<"$stamp") == "$want" ]] && "$VENV/bin/python" -c 'import openai, anthropic, pydantic, selenium, opentelemetry.proto' 2>/dev/null; then
  log "venv-py: matches tests/e2e/python/requirements.txt"
  exit 0
fi
# Debian ships `venv` (its ensurepip) apart from python3: install it as scripts/setup.sh
# installs chromium.
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  command -v apt-get >/dev/null || { log "error: $PY has no venv module and there is no apt-get"; exit 1; }
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  log "python3-venv: apt-get install"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    python3-venv >/dev/null
fi
log "venv-py: installing tests/e2e/python/requirements.txt into $VENV"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
printf '%s\n' "$want" >"$stamp"
