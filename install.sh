#!/usr/bin/env bash
# Installs Broadsheet on a Linux server: builds the release binary, installs it, creates a
# system user and a data directory, writes an environment file and a systemd unit, and starts
# the service. Every step is printed before it runs; --dry-run prints them and runs nothing.
#
#   sudo bash install.sh [options]
#
# Options:
#   --prefix DIR      where the binary goes: DIR/bin/broadsheet        [/usr/local]
#   --user NAME       system user the service runs as                  [broadsheet]
#   --data-dir DIR    database and outbox                              [/var/lib/broadsheet]
#   --base-url URL    the service origin (BROADSHEET_BASE_URL)          [http://localhost:8080]
#   --public-host H   newsletter sites live at <subdomain>.H            [localhost:8080]
#   --listen ADDR     address to listen on                             [127.0.0.1:8080]
#   --binary FILE     install this binary instead of building one
#   --destdir DIR     stage every file under DIR (packaging; no users, no systemctl)
#   --no-build        do not build; use target/release/broadsheet (or --binary)
#   --backup-keep N   daily backups kept in DATA_DIR/backups            [14]
#   --no-backups      do not install the daily backup timer
#   --no-start        install but do not enable or start the service
#   --dry-run         print the steps without running them
#   -h, --help        this text
set -euo pipefail

prefix=/usr/local
user=broadsheet
data_dir=/var/lib/broadsheet
base_url=http://localhost:8080
public_host=localhost:8080
listen=127.0.0.1:8080
binary=""
destdir=""
build=1
start=1
dry_run=0
backup_keep=14
backups=1

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --user) user=${2:?--user needs a name}; shift 2 ;;
    --data-dir) data_dir=${2:?--data-dir needs a directory}; shift 2 ;;
    --base-url) base_url=${2:?--base-url needs a URL}; shift 2 ;;
    --public-host) public_host=${2:?--public-host needs a host}; shift 2 ;;
    --listen) listen=${2:?--listen needs an address}; shift 2 ;;
    --binary) binary=${2:?--binary needs a file}; build=0; shift 2 ;;
    --destdir) destdir=${2:?--destdir needs a directory}; start=0; shift 2 ;;
    --no-build) build=0; shift ;;
    --backup-keep) backup_keep=${2:?--backup-keep needs a number}; shift 2 ;;
    --no-backups) backups=0; shift ;;
    --no-start) start=0; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$backup_keep" in
  ''|*[!0-9]*|0) echo "install.sh: --backup-keep needs a whole number of backups, 1 or more" >&2; exit 2 ;;
esac

cd "$(dirname "$0")"
step=0
# Prints a numbered step, then runs it unless --dry-run.
run() {
  step=$((step + 1))
  printf '[%d] %s\n' "$step" "$*"
  if [ "$dry_run" = 0 ]; then "$@"; fi
}
# Writes stdin to a file (printed as a step).
write_file() {
  local path=$1 mode=$2 content
  content=$(cat)
  step=$((step + 1))
  printf '[%d] write %s (mode %s)\n' "$step" "$path" "$mode"
  if [ "$dry_run" = 1 ]; then
    printf '%s\n' "$content" | sed 's/^/      | /'
  else
    mkdir -p "$(dirname "$path")"
    printf '%s\n' "$content" > "$path"
    chmod "$mode" "$path"
  fi
}

bin_path="$destdir$prefix/bin/broadsheet"
env_path="$destdir/etc/broadsheet/broadsheet.env"
unit_path="$destdir/etc/systemd/system/broadsheet.service"
backup_script="$prefix/lib/broadsheet/daily-backup"
backup_unit_path="$destdir/etc/systemd/system/broadsheet-backup.service"
backup_timer_path="$destdir/etc/systemd/system/broadsheet-backup.timer"

echo "Installing Broadsheet: binary $prefix/bin/broadsheet, data $data_dir, user $user${destdir:+, staged under $destdir}"
[ "$dry_run" = 1 ] && echo "(dry run: nothing is changed)"

if [ "$build" = 1 ]; then
  command -v cargo >/dev/null 2>&1 || { echo "install.sh: cargo is needed to build (or pass --binary FILE)" >&2; exit 1; }
  run cargo build --release --locked
fi
source_binary=${binary:-target/release/broadsheet}
if [ "$dry_run" = 0 ] && [ ! -x "$source_binary" ]; then
  echo "install.sh: no binary at $source_binary (build it, or pass --binary FILE)" >&2
  exit 1
fi

run install -D -m 0755 "$source_binary" "$bin_path"

if [ -z "$destdir" ]; then
  if ! id "$user" >/dev/null 2>&1; then
    run useradd --system --home-dir "$data_dir" --shell /usr/sbin/nologin "$user"
  else
    echo "    user $user exists"
  fi
fi
run install -d -m 0750 "$destdir$data_dir"
if [ -z "$destdir" ]; then
  run chown "$user:$user" "$destdir$data_dir"
fi

write_file "$env_path" 0640 <<ENV
# Broadsheet settings; every flag of \`broadsheet serve --help\` has a BROADSHEET_* variable.
BROADSHEET_DATA_DIR=$data_dir
BROADSHEET_LISTEN=$listen
BROADSHEET_BASE_URL=$base_url
BROADSHEET_PUBLIC_HOST=$public_host
# The reverse proxy on this machine (Caddy, docs/custom-domains.md): X-Forwarded-For is
# believed from it alone, so each visitor gets their own sign-in and sign-up limits.
BROADSHEET_TRUSTED_PROXY=127.0.0.1
# Without an SMTP URL, mail is written to $data_dir/outbox/*.eml.
#BROADSHEET_SMTP_URL=smtp://user:password@mail.example.com:587
# A relay whose certificate comes from a private CA: that CA as a PEM file.
#BROADSHEET_SMTP_CA=/etc/broadsheet/smtp-ca.pem
ENV

write_file "$unit_path" 0644 <<UNIT
[Unit]
Description=Broadsheet newsletter service
After=network-online.target
Wants=network-online.target

[Service]
User=$user
Group=$user
EnvironmentFile=/etc/broadsheet/broadsheet.env
ExecStartPre=$prefix/bin/broadsheet migrate
ExecStart=$prefix/bin/broadsheet serve
# SIGTERM: a send finishes the messages in flight (each bounded by the SMTP timeout, 30 s by
# default) and leaves the rest queued; web requests get 10 s. 60 s covers both, so systemd
# never needs to kill -9 it. Raise it with --smtp-timeout-ms.
KillSignal=SIGTERM
TimeoutStopSec=60
# Each HTTP connection is an open file: --max-connections (4,096 by default, each client
# address at most --max-connections-per-client, 64) plus about 1,024 for the database, the
# listeners, SMTP, webhooks and bounce sessions. systemd's default soft limit is 1,024.
LimitNOFILE=65536
Restart=on-failure
RestartSec=2
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
ReadWritePaths=$data_dir

[Install]
WantedBy=multi-user.target
UNIT

if [ "$backups" = 1 ]; then
  # The daily backup: a consistent copy taken while the service runs (one read snapshot), the
  # newest N kept. The names sort by time, so "the newest" needs no clock arithmetic.
  write_file "$destdir$backup_script" 0755 <<'SCRIPT'
#!/bin/sh
# Broadsheet's daily backup (installed by install.sh, run by broadsheet-backup.timer):
#   daily-backup DIR KEEP
# writes DIR/broadsheet-<UTC time>.db with `broadsheet backup` (the data directory comes from
# BROADSHEET_DATA_DIR, as for the service), its images beside it in DIR/broadsheet-<UTC time>.db.media,
# and then deletes all but the newest KEEP backups (each with its images).
set -eu
dir=${1:?usage: daily-backup DIR KEEP}
keep=${2:?usage: daily-backup DIR KEEP}
broadsheet="$(dirname "$0")/../../bin/broadsheet"
mkdir -p "$dir"
"$broadsheet" backup "$dir/broadsheet-$(date -u +%Y%m%dT%H%M%SZ).db"
# Only finished backups match: `backup` writes FILE.partial and renames it when the copy is whole.
ls -1 "$dir" | grep -E '^broadsheet-[0-9]{8}T[0-9]{6}Z\.db$' | sort -r | tail -n +"$((keep + 1))" \
  | while read -r old; do rm -rf -- "$dir/$old" "$dir/$old.media"; echo "removed old backup $old"; done
SCRIPT

  write_file "$backup_unit_path" 0644 <<UNIT
[Unit]
Description=Broadsheet daily backup (keeps the newest $backup_keep in $data_dir/backups)

[Service]
Type=oneshot
User=$user
Group=$user
EnvironmentFile=/etc/broadsheet/broadsheet.env
ExecStart=$backup_script $data_dir/backups $backup_keep
Nice=10
IOSchedulingClass=idle
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
ReadWritePaths=$data_dir
UNIT

  write_file "$backup_timer_path" 0644 <<UNIT
[Unit]
Description=Daily Broadsheet backup

[Timer]
OnCalendar=daily
RandomizedDelaySec=1h
# A machine that was off at the time takes the missed backup when it starts.
Persistent=true

[Install]
WantedBy=timers.target
UNIT
fi

if [ "$start" = 1 ]; then
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    run systemctl daemon-reload
    run systemctl enable --now broadsheet.service
    if [ "$backups" = 1 ]; then
      run systemctl enable --now broadsheet-backup.timer
    fi
    echo "Broadsheet is running: systemctl status broadsheet; logs: journalctl -u broadsheet"
  else
    echo "    systemd is not running here; start it by hand: $prefix/bin/broadsheet serve"
  fi
fi
echo "Done. Open $base_url/signup to create the first account."
