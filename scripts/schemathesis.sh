#!/usr/bin/env bash
# The API contract check: schemathesis generates requests from the served OpenAPI document
# (/api/v1/openapi.json) and checks every answer against it, with every check and the
# examples, coverage, fuzzing and stateful phases, a bounded number of examples and a fixed
# seed (scripts/schemathesis.toml, the one place where a check is relaxed, each with its
# reason). The server is the built binary on a random port with a temporary data directory,
# raised rate limits and the paid tier, and an owner whose API key has every permission.
# Any failure fails the script. schemathesis is installed into a virtualenv under target/.
#
# The server and schemathesis run in a network namespace of their own with only a loopback
# interface (`unshare`): the generated webhook URLs are accepted (--allow-private-webhooks)
# and their deliveries fail there, never reaching another machine.
#
#   scripts/schemathesis.sh            # builds target/debug/broadsheet first
#   BROADSHEET_BIN=path scripts/schemathesis.sh
#   scripts/schemathesis.sh --include-path-regex '^/issues'   # extra flags for `schemathesis run`
set -euo pipefail
cd "$(dirname "$0")/.."

version=4.32.5
venv=target/schemathesis-venv
out=target/schemathesis
mkdir -p "$out"

say() { printf '\n== %s\n' "$*"; }

if [ -z "${BROADSHEET_CONTRACT_ISOLATED:-}" ]; then
  say "schemathesis $version (in $venv)"
  python3 -m venv --help >/dev/null 2>&1 \
    || { echo "python3 with its venv module is needed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if [ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $version" ]; then
    "$venv/bin/pip" install -q "schemathesis==$version"
  fi
  "$venv/bin/schemathesis" --version
  [ -n "${BROADSHEET_BIN:-}" ] || cargo build --bin broadsheet

  # Root makes the namespace directly; anyone else through a user namespace.
  isolate=(unshare --net)
  [ "$(id -u)" = 0 ] || isolate=(unshare --map-root-user --net)
  "${isolate[@]}" true 2>/dev/null \
    || { echo "cannot make a network namespace (${isolate[*]}): the check needs one" >&2; exit 1; }
  export BROADSHEET_CONTRACT_ISOLATED=1
  # shellcheck disable=SC2016 # expanded by the inner shell
  exec "${isolate[@]}" bash -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi

# shellcheck source=scripts/lib/server.sh
. scripts/lib/server.sh

say "a server on a fresh data directory, limits raised, in a network of its own"
start_server "$out/server.log" --default-tier paid --allow-private-webhooks \
  --rate-limit-get 1000000 --rate-limit-write 1000000 --rate-limit-bulk 1000000
sign_up_owner schemathesis@example.com schemathesis-password
newsletter=$(create_newsletter "Contract Check" "Requests made up by a generator")
BROADSHEET_API_KEY=$(create_api_key "$newsletter" schemathesis read write delete)
[ -n "$BROADSHEET_API_KEY" ] || { echo "no API key was created" >&2; exit 1; }
export BROADSHEET_API_KEY
echo "server at $base, newsletter $newsletter"

say "schemathesis run"
export HYPOTHESIS_STORAGE_DIRECTORY="$out/hypothesis"
"$venv/bin/schemathesis" --no-color --config-file scripts/schemathesis.toml run \
  --report junit --report-junit-path "$out/junit.xml" "$@" "$base/api/v1/openapi.json"
