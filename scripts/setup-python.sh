#!/usr/bin/env bash
# The Python virtualenv of the end-to-end suite: $TOOLS/venv-py with the official `openai` and
# `anthropic` clients and `pydantic`, at the versions pinned in tests/e2e/python/requirements.txt.
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
if [[ -f $stamp && $(<"$stamp") == "$want" ]] && "$VENV/bin/python" -c 'import openai, anthropic, pydantic' 2>/dev/null; then
  log "venv-py: matches tests/e2e/python/requirements.txt"
  exit 0
fi
log "venv-py: installing tests/e2e/python/requirements.txt into $VENV"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
printf '%s\n' "$want" >"$stamp"
