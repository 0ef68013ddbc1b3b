#!/usr/bin/env bash
# memrun.sh — record's own memory over a long `record -p PID --every`
# run: does it stay flat?
#
#   sudo testdata/record/memrun.sh [OUTDIR]
#
# Builds testdata/record/src with gen.sh, starts `attachsvc WORKERS RATE`
# (default 2 threads, 200000 allocator calls a second in all), attaches
# `faultline record -p PID --every EVERY --duration SECS -o OUTDIR/windows`
# (default 10s for 600 s) and reads record's /proc/PID/status every second:
# VmRSS and RssAnon. It prints the first minute's median RSS, then each
# later minute's median and max, and the bar: every later minute's median
# within ±10% of the first minute's. The samples are in OUTDIR/rss.tsv
# (seconds since record started, VmRSS kB, RssAnon kB), record's log in
# OUTDIR/record.log.
#
# Environment: FAULTLINE (binary; default: go build ./cmd/faultline into
# OUTDIR), SECS (600), EVERY (10s), WORKERS (2), RATE (200000), ARGS (more
# record flags, e.g. --push URL).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
SECS=${SECS:-600}
EVERY=${EVERY:-10s}
WORKERS=${WORKERS:-2}
RATE=${RATE:-200000}
ARGS=${ARGS:-}
if [ -z "${FAULTLINE:-}" ]; then
	(cd "$root" && go build -o "$out/faultline" ./cmd/faultline)
	FAULTLINE=$out/faultline
fi
sh "$here/gen.sh" "$out/progs" >/dev/null

"$out/progs/attachsvc" "$WORKERS" "$RATE" >"$out/service.log" &
svc=$!
rpid=
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null || true
	kill "$svc" 2>/dev/null || true
}
trap cleanup EXIT
sleep 2
rm -rf "$out/windows"
# shellcheck disable=SC2086
"$FAULTLINE" record -p "$svc" --every "$EVERY" --duration "${SECS}s" -o "$out/windows" $ARGS 2>"$out/record.log" &
rpid=$!
: >"$out/rss.tsv"
start=$SECONDS
while kill -0 "$rpid" 2>/dev/null; do
	if st=$(cat "/proc/$rpid/status" 2>/dev/null); then
		rss=$(awk '/^VmRSS:/ {print $2}' <<<"$st")
		anon=$(awk '/^RssAnon:/ {print $2}' <<<"$st")
		# The seconds since record started, by the clock: a loaded
		# machine makes each turn of this loop take longer than 1 s.
		[ -n "$rss" ] && printf '%d\t%s\t%s\n' "$((SECONDS - start))" "$rss" "$anon" >>"$out/rss.tsv"
	fi
	sleep 1
done
status=0
wait "$rpid" || status=$?
rpid=
echo "record exited $status; $(ls "$out/windows" | wc -l) window profiles; uptime:$(uptime | sed 's/.*load/ load/')"
grep -i 'lost\|note\|warn' "$out/record.log" | head -5 || true

# Minute m holds the samples of seconds [60m, 60m+60).
awk -F'\t' '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{ m = int($1 / 60); n[m]++; rss[m, n[m]] = $2; anon[m, n[m]] = $3; if (m > last) last = m }
END {
	for (m = 0; m <= last; m++) {
		if (n[m] < 30) continue # a partial last minute (or one of few samples)
		delete a; delete b; mx = 0; amx = 0
		for (i = 1; i <= n[m]; i++) { a[i] = rss[m, i]; b[i] = anon[m, i]; if (a[i] > mx) mx = a[i]; if (b[i] > amx) amx = b[i] }
		med = median(a, n[m]); amed = median(b, n[m])
		if (m == 0) { first = med; printf "minute 1: RSS median %.1f MB max %.1f MB (RssAnon median %.1f MB)\n", med/1024, mx/1024, amed/1024; continue }
		d = (med - first) / first * 100
		printf "minute %d: RSS median %.1f MB (%+.1f%%) max %.1f MB (%+.1f%%) (RssAnon median %.1f MB max %.1f MB)\n", m+1, med/1024, d, mx/1024, (mx-first)/first*100, amed/1024, amx/1024
		if (d > 10 || d < -10) bad++
	}
	if (bad) { printf "NOT MET: %d later minutes have their median outside ±10%% of the first minute\n", bad; exit 1 }
	print "met: every later minute has its median within ±10% of the first minute"
}' "$out/rss.tsv"
