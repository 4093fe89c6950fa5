#!/usr/bin/env bash
# The ceiling for sending speed on this machine: Postfix's own benchmarking pair, smtp-source
# sending pre-made messages to smtp-sink over loopback, each connection reused for many
# messages. A sender that renders, personalises, records and sends each message can at best
# approach this figure, so a send benchmark is reported as a ratio to it, measured in the same
# run (examples/send_bench.rs runs this script).
#
# usage: scripts/smtp-ceiling.sh [MESSAGES] [SIZE_BYTES] [SESSIONS]   (defaults 50000 20000 4)
#          prints one line: "smtp ceiling: ... = N msg/s"
#        scripts/smtp-ceiling.sh --sink PORT
#          runs only smtp-sink on 127.0.0.1:PORT in the foreground, as the relay of a send
#          benchmark
#
# smtp-sink and smtp-source are used from PATH or /usr/sbin when Postfix is installed.
# Otherwise the script downloads Debian's postfix package (apt-get download, no root needed)
# and unpacks it (dpkg -x) into target/smtp-bench/ of this repository, or $SMTP_BENCH_CACHE:
# nothing is installed system-wide and no mail daemon is started.
set -euo pipefail

say() { echo "smtp-ceiling.sh: $*" >&2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SMTP_BENCH_CACHE:-$repo/target/smtp-bench}

# Finds both tools; sets $sink and $source (and LD_LIBRARY_PATH for an unpacked package).
find_tools() {
  local dir
  for dir in "$(dirname "$(command -v smtp-sink 2>/dev/null || echo /nonexistent/x)")" /usr/sbin \
             "$cache/root/usr/sbin"; do
    if [ -x "$dir/smtp-sink" ] && [ -x "$dir/smtp-source" ]; then
      sink=$dir/smtp-sink source=$dir/smtp-source
      if [ "$dir" = "$cache/root/usr/sbin" ]; then
        # The unpacked binaries need Postfix's private libraries from the same package.
        export LD_LIBRARY_PATH=$cache/root/usr/lib/postfix${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      fi
      return 0
    fi
  done
  return 1
}

unpack_postfix() {
  command -v apt-get >/dev/null && command -v dpkg >/dev/null || {
    say "smtp-sink and smtp-source are missing and this is not a Debian-like system."
    say "Install Postfix's tools (they come with the postfix package) and put them on PATH."
    exit 1
  }
  say "smtp-sink and smtp-source are not installed."
  say "DOWNLOADING Debian's postfix package (apt-get download postfix) and UNPACKING it into"
  say "  $cache"
  say "(nothing is installed system-wide, no mail daemon is started; delete that folder to undo)."
  mkdir -p "$cache"
  rm -f "$cache"/postfix_*.deb
  if ! (cd "$cache" && apt-get download postfix >&2); then
    if [ "$(id -u)" = 0 ]; then
      say "apt-get download failed; refreshing the package lists (apt-get update) and trying again."
      apt-get update -qq >&2
      (cd "$cache" && apt-get download postfix >&2)
    else
      say "apt-get download failed; run 'sudo apt-get update' (or install postfix) and try again."
      exit 1
    fi
  fi
  rm -rf "$cache/root"
  dpkg -x "$cache"/postfix_*.deb "$cache/root"
  say "unpacked $(basename "$cache"/postfix_*.deb)"
}

find_tools || { unpack_postfix; find_tools; } || {
  say "the postfix package did not hold smtp-sink and smtp-source"
  exit 1
}

# smtp-sink refuses to run as root unless told which user to switch to.
sink_user=()
[ "$(id -u)" = 0 ] && sink_user=(-u nobody)

if [ "${1:-}" = "--sink" ]; then
  exec "$sink" "${sink_user[@]}" -c "127.0.0.1:${2:?usage: --sink PORT}" 1000
fi

msgs=${1:-50000} size=${2:-20000} sessions=${3:-4}

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port nothing listens on (the sink says so if another program takes it meanwhile).
port=$((20000 + RANDOM % 40000))
while accepts "$port"; do port=$((20000 + RANDOM % 40000)); done

"$sink" "${sink_user[@]}" -c "127.0.0.1:$port" 1000 >/dev/null &
sink_pid=$!
trap 'kill "$sink_pid" 2>/dev/null || true' EXIT
for _ in $(seq 500); do accepts "$port" && break; sleep 0.01; done
accepts "$port" || { say "smtp-sink did not start on port $port"; exit 1; }

# CPU seconds (user + system) the sink has used so far.
sink_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$sink_pid/stat"; }

# CPU seconds of this shell's finished children, from the second line of `times` (written to
# a file: in a $(...) subshell it would count nothing). The difference around the run is
# smtp-source's; the sink still runs.
times_file=$(mktemp)
children_cpu() { awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' "$times_file"; }

sink_before=$(sink_cpu)
times >"$times_file"
children_before=$(children_cpu)
start=$(date +%s.%N)
"$source" -d -s "$sessions" -m "$msgs" -l "$size" -f from@example.com -t to@example.com "127.0.0.1:$port"
end=$(date +%s.%N)
times >"$times_file"
children_after=$(children_cpu)
sink_after=$(sink_cpu)
rm -f "$times_file"
source_cpu=$(awk -v a="$children_before" -v b="$children_after" 'BEGIN { print b - a }')
awk -v m="$msgs" -v size="$size" -v s="$sessions" -v t0="$start" -v t1="$end" \
    -v sink="$(awk -v a="$sink_before" -v b="$sink_after" 'BEGIN { print b - a }')" -v src="$source_cpu" 'BEGIN {
  t = t1 - t0
  printf "smtp ceiling: %d messages of %d bytes over %d reused connections in %.2f s = %.0f msg/s", m, size, s, t, m / t
  printf " (CPU per message: smtp-sink %.0f us, smtp-source %.0f us)\n", sink * 1e6 / m, src * 1e6 / m
}'
