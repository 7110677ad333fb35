#!/usr/bin/env bash
# The whole test suite: install plait with every optional part into .venv and run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[all,test]'
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Lint and types first (configuration in pyproject.toml); then the tests.
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/mypy --strict benchmarks  # the benchmark scripts too (their untyped imports: pyproject.toml)
# One worker per core, at most 4 (pytest-xdist; -n 0 in the arguments runs serially).
exec .venv/bin/python -m pytest -n auto --maxprocesses 4 "$@"
