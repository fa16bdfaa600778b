#!/bin/bash
# docs_serve.sh BINARY serve ARGS...: how tests/e2e/docs_test.sh runs a docs block's `./attnviz serve`.
# The server runs as written (plus --port 0 when no --port is given: any free port, so that it
# never meets another server on this machine) until the URL it prints answers: the page, the
# model list, and a run of the first model on a short text; then it is stopped (SIGTERM) and must
# exit 0. With --open, the URL xdg-open was given ($DOCS_XDG_LOG, written by the test's stand-in)
# must be the printed one. Exit 0 when all of that held, else 1 with the reason and the server's output.
set -u
real=$1
shift
args=("$@")
port=0 open=0
for a in "$@"; do
    case $a in --port | --port=*) port=1 ;; --open) open=1 ;; esac
done
[ $port -eq 1 ] || args+=(--port 0)
log=$(mktemp)
trap 'rm -f "$log" "$log.err" "$log.page" "$log.models" "$log.run"' EXIT
"$real" "${args[@]}" >"$log" 2>"$log.err" &
pid=$!
die() {
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "docs_serve: $*" >&2
    sed 's/^/    server: /' "$log" "$log.err" >&2
    exit 1
}
url=""
for _ in $(seq 1 1200); do # the models load before the URL is printed: up to 120 s
    url=$(grep -o 'http://[^ ]*?token=[0-9a-f]*' "$log" | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$url" ] || die "attnviz serve printed no URL"
base=${url%%/?token=*}
token=${url##*token=}
curl -fsS --max-time 60 "$url" -o "$log.page" || die "GET $url failed"
grep -qi '<!doctype html' "$log.page" || die "GET $url: not the page"
curl -fsS --max-time 60 -H "X-Attnviz-Token: $token" "$base/api/models" -o "$log.models" || die "GET /api/models failed"
grep -q '"models"' "$log.models" || die "/api/models: $(head -c 200 "$log.models")"
body='{"model":0,"text":"the cat sat on the mat"}'
grep -q '"id":0,[^}]*"enc_dec":true' "$log.models" && body='{"model":0,"text":"the cat sat on the mat","decoder_text":"a cat"}'
curl -fsS --max-time 120 -H "X-Attnviz-Token: $token" -H 'Content-Type: application/json' -d "$body" \
    "$base/api/run" -o "$log.run" || die "POST /api/run failed"
grep -q '"run"' "$log.run" || die "/api/run: $(head -c 200 "$log.run")"
if [ $open -eq 1 ]; then
    for _ in $(seq 1 50); do [ -s "${DOCS_XDG_LOG:-/nonexistent}" ] && break; sleep 0.1; done
    grep -qxF "$url" "${DOCS_XDG_LOG:-/nonexistent}" 2>/dev/null || die "--open: xdg-open was not given $url"
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
[ $rc -eq 0 ] || die "attnviz serve exited $rc on SIGTERM"
echo "docs_serve: $url answered: the page, $(grep -o '"id":' "$log.models" | wc -l) model(s), a run; stopped"
cat "$log.err" >&2
exit 0
