#!/bin/sh
# Install this checkout with the Python given (a path) into a fresh virtualenv, as a
# person would, and run cortex end to end: --version, init, write, run, query, maintain,
# validate, a usage error, an MCP client piping its requests. `make smoke-pythons` runs it
# on every supported Python that is installed.
#
# --lowest: every dependency at the lowest version pyproject.toml accepts
# (scripts/lowest-constraints), and what those do not pin at its newest: the lower
# bounds are claims, checked here.
set -eu
py="$1"
lowest="${2:-}"
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
if [ "$lowest" = "--lowest" ]; then
    "$tmp/venv/bin/python" "$here/scripts/lowest-constraints" > "$tmp/lowest.txt"
    "$tmp/venv/bin/python" -m pip install -q -c "$tmp/lowest.txt" "$here"
    "$tmp/venv/bin/python" -m pip list --format=freeze | grep -i -f "$tmp/lowest.txt"
else
    "$tmp/venv/bin/python" -m pip install -q "$here"
fi
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
# a usage error is one, not a crash of the argument parser (exit 2)
set +e
"$cortex" --vault "$vault" write --body "no type given" 2>"$tmp/usage.txt"
code=$?
set -e
[ "$code" -eq 2 ] || { cat "$tmp/usage.txt"; echo "smoke: a usage error exited $code, not 2"; exit 1; }
# an MCP client that pipes its requests and closes stdin gets every answer
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"smoke","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"text":"which database does the ledger use"}}}' \
  | "$cortex" --vault "$vault" mcp > "$tmp/mcp.txt"
grep -q '"id":2,"result".*Postgres 16' "$tmp/mcp.txt" || { cat "$tmp/mcp.txt"; echo "smoke: no MCP answer"; exit 1; }

