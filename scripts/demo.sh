#!/usr/bin/env bash
# The quickstart's main job: install plait into .venv, index examples/ into the embedded
# store (./.plait/plait.db, no server), run searches that show a lexical rescue, a
# semantic match and a hit found by both arms, then serve the result at
# http://127.0.0.1:8000 (PLAIT_DEMO_SERVE=0 skips serving).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[server]'
export PLAIT_STORE="${PLAIT_STORE:-./.plait/plait.db}"
plait() { .venv/bin/plait "$@"; }

echo "== index examples/ through git (tracked Markdown: docs, ADRs under docs/adr/, runbooks; part Portuguese)"
plait index examples
echo
echo "== index the support session logs (only chat.message and agent.response; one malformed line is reported)"
plait index-sessions examples/sessions
echo
echo "== identifier: ERR-4012 is one lexical token; near-miss codes ERR-4013/4017/4021 never match it"
plait search "what does ERR-4012 mean" -k 5
echo
echo "== semantic match: no word in common with the answer"
plait search "the bank rejected my purchase" -k 5
echo
echo "== both arms: an identifier plus prose"
plait search "stock wrong for SKU-88213-B" -k 5
echo
echo "== Portuguese, identifier + accent folding"
plait search "estorno do PIX-2024-88317 não chegou" -k 3
echo
echo "== a session hit: the answer is in a support conversation"
plait search "customer saw a pending charge after checkout failed" -k 3
echo
echo "== coverage: sources present against indexed, chunks without a vector, last indexed"
plait coverage
if [ "${PLAIT_DEMO_SERVE:-1}" != "0" ]; then
  echo
  echo "== serving the indexed example at http://127.0.0.1:${PLAIT_DEMO_PORT:-8000} (search & debug page; API docs at /docs). Ctrl-C stops it."
  exec .venv/bin/plait serve --host 127.0.0.1 --port "${PLAIT_DEMO_PORT:-8000}" --no-auth
fi
