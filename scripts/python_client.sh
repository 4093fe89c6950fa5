#!/usr/bin/env bash
# The generated-client check (docs/api.md, "Generated clients"): openapi-python-client, on its
# default settings (no config file), generates a Python client from the document the server
# serves (/api/v1/openapi.json), and scripts/python_client.py calls a few operations with it
# against that server (the newsletter, its time zone, subscribers with `per_page`, bulk
# create, an issue, a bounce, a field the server does not know). A warning while generating,
# an error, or an answer that is not what the document says fails the script.
# openapi-python-client (and the ruff its default post-hooks run) go into a virtualenv under
# target/; the server is the built binary on a random port with a temporary data directory.
#
#   scripts/python_client.sh                    # builds target/debug/broadsheet first
#   BROADSHEET_BIN=path scripts/python_client.sh
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.29.1
venv=target/python-client-venv
out=target/python-client
mkdir -p "$out"

say() { printf '\n== %s\n' "$*"; }

say "openapi-python-client $version (in $venv)"
python3 -m venv --help >/dev/null 2>&1 \
  || { echo "python3 with its venv module is needed (Debian: apt-get install python3-venv)" >&2; exit 1; }
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$("$venv/bin/openapi-python-client" --version 2>/dev/null)" != "openapi-python-client version: $version" ]; then
  "$venv/bin/pip" install -q "openapi-python-client==$version"
fi
"$venv/bin/openapi-python-client" --version
[ -n "${BROADSHEET_BIN:-}" ] || cargo build --bin broadsheet

# shellcheck source=scripts/lib/server.sh
. scripts/lib/server.sh

say "a server on a fresh data directory"
start_server "$out/server.log"
sign_up_owner python@example.com python-client-password
newsletter=$(create_newsletter "Client Check" "Read by a generated client")
BROADSHEET_API_KEY=$(create_api_key "$newsletter" python-client read write)
[ -n "$BROADSHEET_API_KEY" ] || { echo "no API key was created" >&2; exit 1; }
export BROADSHEET_API_KEY BROADSHEET_BASE="$base"
echo "server at $base, newsletter $newsletter"

say "generating the client from $base/api/v1/openapi.json (default settings)"
rm -rf "$out/client"
# The venv's bin first: the default post-hooks run `ruff`, which came with the generator.
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate \
  --url "$base/api/v1/openapi.json" --output-path "$out/client" --fail-on-warning

say "calling the server through the generated client"
PYTHONPATH="$out/client" "$venv/bin/python" scripts/python_client.py
