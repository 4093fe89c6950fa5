#!/bin/sh
# Makes the sqlite3 shell available and prints its path: the import benchmark
# (examples/import_bench.rs) measures its ceiling with it. Uses the sqlite3 on PATH when there
# is one; otherwise installs Debian's `sqlite3` package with apt-get, saying so on stderr.
set -eu

if command -v sqlite3 >/dev/null 2>&1; then
    command -v sqlite3
    exit 0
fi

echo "install-sqlite3: no sqlite3 on PATH; INSTALLING Debian's sqlite3 package (apt-get install sqlite3)" >&2
if [ "$(id -u)" -eq 0 ]; then
    run() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
    run() { sudo "$@"; }
else
    echo "install-sqlite3: not root and no sudo: install the sqlite3 package, then run again" >&2
    exit 1
fi
run apt-get update >&2
run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends sqlite3 >&2
echo "install-sqlite3: installed $(sqlite3 --version | cut -d' ' -f1)" >&2
command -v sqlite3
