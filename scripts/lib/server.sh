# Sourced by the scripts beside it (bash, `set -euo pipefail`): starts the built binary on a
# random port with a temporary data directory, and walks the sign-up and onboarding over HTTP
# as a browser would, up to an API key. Needs curl, sed and python3 (for a free port).
#
#   start_server LOG [serve flags...]   sets $base, $port, $server (pid), $data; the server is
#                                       stopped and $data removed on exit
#   sign_up_owner EMAIL PASSWORD        signs up, follows the mailed link, signs in
#   create_newsletter NAME TAGLINE      prints the new newsletter's id (weekly, preferences set)
#   create_api_key ID NAME PERMISSION...  prints the full key
# `$bin` is the binary (default target/debug/broadsheet); `$jar` is the session's cookie jar.

bin=${BROADSHEET_BIN:-target/debug/broadsheet}

start_server() {
  local log=$1; shift
  server_log=$log
  data=$(mktemp -d)
  jar=$(mktemp)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base="http://localhost:$port"
  BROADSHEET_DATA_DIR="$data" "$bin" serve --listen "127.0.0.1:$port" --base-url "$base" \
    --public-host "localhost:$port" "$@" >"$log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true; rm -rf "$data" "$jar"' EXIT
  for _ in $(seq 100); do curl -fs "$base/up" >/dev/null && return 0; sleep 0.1; done
  echo "the server did not come up; its log:" >&2
  cat "$log" >&2
  return 1
}

get() { curl -fsS -b "$jar" -c "$jar" "$base$1"; }
form_token() { sed -n 's/.*name="authenticity_token" value="\([^"]*\)".*/\1/p' | head -n 1; }

# POSTs a form of $1 (the page it is on) to $2 with the fields that follow, plus its token;
# prints where the answer redirects.
post() {
  local page=$1 action=$2; shift 2
  local t; t=$(get "$page" | form_token)
  local args=(--data-urlencode "authenticity_token=$t")
  for field in "$@"; do args+=(--data-urlencode "$field"); done
  curl -sS -o /dev/null -w '%{redirect_url}' -b "$jar" -c "$jar" "${args[@]}" "$base$action"
}

sign_up_owner() {
  local email=$1 password=$2
  post /signup /signup "user[email_address]=$email" "user[password]=$password" \
    "user[password_confirmation]=$password" >/dev/null
  # The confirmation mail is written by a job: the server's log names its link once it is.
  local link=""
  for _ in $(seq 100); do
    link=$(grep -o "$base/email_confirmations/[A-Za-z0-9_-]*" "$server_log" | head -n 1 || true)
    [ -n "$link" ] && break; sleep 0.1
  done
  [ -n "$link" ] || { echo "no confirmation link in the server's log" >&2; return 1; }
  curl -fsS -o /dev/null -b "$jar" -c "$jar" "$link"
  post /signup /session "email_address=$email" "password=$password" >/dev/null || true
}

create_newsletter() {
  local name=$1 tagline=$2
  local created id
  created=$(post /newsletters/new /newsletters "newsletter[name]=$name" \
    "newsletter[tagline]=$tagline" "newsletter[from_name]=$name" \
    "newsletter[from_email]=desk@example.com")
  id=$(printf '%s' "$created" | sed -n 's#.*/newsletters/\([0-9]*\)/.*#\1#p')
  [ -n "$id" ] || { echo "creating the newsletter did not redirect to it: '$created'" >&2; return 1; }
  post "/newsletters/$id/setup_frequency" "/newsletters/$id/apply_frequency" "frequency=weekly" >/dev/null
  post "/newsletters/$id/preference/edit" "/newsletters/$id/preference" \
    "newsletter_preference[target_audience]=Sailors" "newsletter_preference[content_tone]=friendly" \
    "newsletter_preference[newsletter_length]=medium" >/dev/null
  printf '%s\n' "$id"
}

create_api_key() {
  local id=$1 name=$2; shift 2
  local t; t=$(get "/newsletters/$id/api_keys/new" | form_token)
  local args=(--data-urlencode "authenticity_token=$t" --data-urlencode "api_key[name]=$name")
  for permission in "$@"; do args+=(--data-urlencode "api_key[permissions][]=$permission"); done
  curl -fsS -b "$jar" -c "$jar" "${args[@]}" "$base/newsletters/$id/api_keys" | tr '\n' ' ' \
    | sed -n 's/.*id="api-key"[^>]*>[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p'
}
