#!/usr/bin/env bash
# Lighthouse (accessibility, best practices, SEO) and axe-core over the public site (home, an
# issue, the archive, a reader's sign-in, a signup form's page) and the account pages (sign-up, sign-in, the
# dashboard), on the built
# binary started with a temporary data directory and some content. Fails when a score is below
# LIGHTHOUSE_MIN_SCORE (100) or axe finds any violation. npm's `lighthouse` and `@axe-core/cli`
# are installed into target/npm; Chromium is Debian's (CHROME_PATH, chromedriver on PATH).
# axe-core cannot sign in here: the signed-in dashboard pages are checked with axe-core inside
# the Chromium tests instead (tests/it/accessibility.rs, `cargo test --test it accessibility`),
# and so are a signed-in reader's account page and the paywall (tests/it/stripe_memberships.rs).
#
#   scripts/lighthouse.sh            # builds target/debug/broadsheet when missing
#   BROADSHEET_BIN=path scripts/lighthouse.sh
set -euo pipefail
cd "$(dirname "$0")/.."

min=${LIGHTHOUSE_MIN_SCORE:-100}
npm_dir=target/npm
out=target/lighthouse
mkdir -p "$out" "$npm_dir"

say() { printf '\n== %s\n' "$*"; }

say "tools"
if [ ! -x "$npm_dir/node_modules/.bin/lighthouse" ] || [ ! -x "$npm_dir/node_modules/.bin/axe" ]; then
  # chromedriver's npm package would download its own driver: Debian's is used instead.
  CHROMEDRIVER_SKIP_DOWNLOAD=true PUPPETEER_SKIP_DOWNLOAD=true \
    npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error lighthouse@12 @axe-core/cli@4
fi
export CHROME_PATH=${CHROME_PATH:-$(command -v chromium)}
chromedriver=$(command -v chromedriver)
[ -x "${BROADSHEET_BIN:-target/debug/broadsheet}" ] || cargo build
"$CHROME_PATH" --version 2>/dev/null

say "a server with some content"
# shellcheck source=scripts/lib/server.sh
. scripts/lib/server.sh
start_server "$out/server.log" --default-tier paid
sign_up_owner lighthouse@example.com lighthouse-password
id=$(create_newsletter "Harbour Notes" "Letters from a small port, every week")
key=$(create_api_key "$id" lighthouse read write)
api() { curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
subdomain=$(api "$base/api/v1/newsletter" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.subdomain))')
api -X PATCH "$base/api/v1/newsletter" -d '{"accent_color":"#0f766e","author_name":"Morgan Quay",
  "about_markdown":"Harbour Notes is a weekly letter from a small port.\n\n## Who writes it\n\nMorgan, who has watched the boats come and go for twenty years."}' >/dev/null
issue_path=""
for n in 1 2 3; do
  body=$(node -e 'console.log(JSON.stringify({issue:{subject:`Harbour notes, week ${process.argv[1]}`,status:"approved",
    content_markdown:"## At the quay\n\nThe ferry ran late twice this week, and the fish market moved indoors. Here is what else happened along the water.\n\n> The tide waits for no one.\n\n- Boats in: 14\n- Boats out: 12",
    articles:[{title:"Tide tables for the month",url:"https://example.com/tides",summarized_article:"When to sail, and when to stay ashore."}]}}))' "$n")
  issue=$(api -X POST "$base/api/v1/issues" -d "$body")
  iid=$(printf '%s' "$issue" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))')
  published=$(api -X POST "$base/api/v1/issues/$iid/publish" -d '{}')
  issue_path=$(printf '%s' "$published" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(new URL(JSON.parse(s).web_url).pathname))')
done
# A sequence of two steps: its page shows the steps, the readers' forms and the editor.
sequence=$(api -X POST "$base/api/v1/sequences" -d '{"sequence":{"name":"Onboarding","trigger":"confirmed",
  "steps":[{"subject":"Start here","body_markdown":"Hello, and welcome aboard.","delay_amount":0,"delay_unit":"minutes"},
  {"subject":"A week in","body_markdown":"What the regulars read.","delay_amount":7,"delay_unit":"days","at_hour":9}]}}')
sequence_id=$(printf '%s' "$sequence" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))')
# A signup form (made on the dashboard's Forms page): its own page on the site.
form_page=$(post "/newsletters/$id/forms" "/newsletters/$id/forms" "form[name]=Sidebar" \
  "form[ask_name]=yes" "form[button_text]=Subscribe" "form[success_message]=Check your inbox." \
  "form[pow_cost]=50000")
form_id=$(get "${form_page#"$base"}" | grep -o '/f/[0-9a-f]\{16\}' | head -n 1)
site="http://$subdomain.localhost:$port"
cookie=$(awk '!/^#/ || /^#HttpOnly_/ { if (NF >= 7) printf "%s=%s; ", $6, $7 }' "$jar")

public_pages=("$site/" "$site$issue_path" "$site/archive" "$site/about" "$site/subscribe"
  "$site/subscribe/confirm/lighthouse-token" "$site/signin" "$site/signin/lighthouse-token"
  "$site$form_id" "$base/signup" "$base/session/new")
account_pages=("$base/newsletters" "$base/newsletters/$id" "$base/newsletters/$id/settings"
  "$base/newsletters/$id/forms" "$base/newsletters/$id/fields" "$base/newsletters/$id/topics"
  "$base/newsletters/$id/feed" "$base/newsletters/$id/sequences" "$base/newsletters/$id/sequences/$sequence_id")

say "Lighthouse (accessibility, best practices, SEO; at least $min each)"
failed=0
lighthouse() {
  local url=$1 name=$2; shift 2
  "$npm_dir/node_modules/.bin/lighthouse" "$url" --quiet \
    --only-categories=accessibility,best-practices,seo --output=json --output-path="$out/$name.json" \
    --chrome-flags="--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage" "$@" >/dev/null 2>&1 || true
  node -e '
    const r = require(process.argv[1]); const min = Number(process.argv[2]);
    let ok = true; const parts = [];
    for (const [id, c] of Object.entries(r.categories || {})) {
      const score = Math.round((c.score || 0) * 100); parts.push(`${id} ${score}`);
      if (score < min) { ok = false;
        for (const ref of c.auditRefs) { const a = r.audits[ref.id];
          if (ref.weight > 0 && a.score !== null && a.score < 1) console.log(`   - ${id}: ${a.id}: ${a.title}`); } }
    }
    if (!parts.length) { console.log("   no result"); ok = false; }
    console.log(`${ok ? "ok  " : "FAIL"} ${process.argv[3]}: ${parts.join(", ")}`);
    process.exit(ok ? 0 : 1);' "$PWD/$out/$name.json" "$min" "$url" || failed=1
}
i=0
for url in "${public_pages[@]}"; do i=$((i+1)); lighthouse "$url" "public-$i"; done
i=0
for url in "${account_pages[@]}"; do
  i=$((i+1)); lighthouse "$url" "account-$i" --extra-headers="{\"Cookie\":\"$cookie\"}"
done

say "axe-core (every rule; no violation allowed)"
"$npm_dir/node_modules/.bin/axe" "${public_pages[@]}" --chromedriver-path "$chromedriver" \
  --chrome-options="headless=new,no-sandbox,disable-gpu,disable-dev-shm-usage" --exit || failed=1

if [ "$failed" != 0 ]; then
  echo "Lighthouse or axe found problems; reports in $out/" >&2
  exit 1
fi
echo "all pages pass"
