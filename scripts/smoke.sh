#!/bin/sh
# Install this checkout with the Python given (a path) into a fresh virtualenv, as a
# person would, and run cortex end to end: --version, init, write, run, query, maintain,
# validate. `make smoke-pythons` runs it on every supported Python that is installed.
set -eu
py="$1"
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q "$here"
export HOME="$tmp/home" PRE_COMMIT_HOME="$tmp/home/.pre-commit" GIT_CONFIG_NOSYSTEM=1 \
    GIT_AUTHOR_NAME=smoke GIT_AUTHOR_EMAIL=smoke@example.com \
    GIT_COMMITTER_NAME=smoke GIT_COMMITTER_EMAIL=smoke@example.com
mkdir -p "$HOME"
unset CORTEX_VAULT || true
cortex="$tmp/venv/bin/cortex"
vault="$tmp/My Vault"
set -x
"$cortex" --version
"$cortex" init "$vault"
"$cortex" write --vault "$vault" --type decision --body "Use Postgres 16 for the ledger service." --attribution smoke
"$cortex" --vault "$vault" run
"$cortex" --vault "$vault" query "which database does the ledger use" --limit 1
"$cortex" --vault "$vault" maintain --force
"$cortex" --vault "$vault" validate --all
git -C "$vault" log --oneline | grep -q "observe: Use Postgres 16"
