#!/usr/bin/env bash
# gen-mixed.sh — record testdata/src/mixed.c in the shape `faultline record`
# writes: range events without stacks, the malloc entry probe
# opened again with a DWARF stack for some calls. Run as root after gen.sh
# (which rebuilds symfs/ and calls this script at its end):
#
#     sudo testdata/gen-mixed.sh
#
# It
#  1. compiles mixed.c (and launch.c) with gen.sh's flags into the fixed run
#     directory /tmp/faultline-fixtures/bin;
#  2. writes its own uprobes, group fl_mixed (refuses to run when that group
#     exists: it removes at exit only what it created), straight into
#     uprobe_events: malloc (size), malloc%return (ptr, hdr), free (ptr);
#  3. records two files that differ only in the order the events are opened,
#     so the stack sample of a call comes before its range sample in one and
#     after it in the other. The kernel adds a tracepoint's events at the head
#     of its list, so the event opened LAST fires first:
#       stack-first: perf opens the range events, then the stack instances
#       range-first: perf opens the stack instances, then the range events
#     The stack instances are the malloc entry probe again with
#     --call-graph dwarf, filtered `size >= 1048576` (every big allocation,
#     as record's --stack-min) and `size == 266240` (stands in for record's
#     1-in-N sample of smaller calls: perf 6.1 has no per-event period for
#     tracepoints). Re-records (up to 5 times) until nothing is lost;
#  4. writes perf script texts (--no-inline, with callchains), runs the
#     independent checker check_mixed.py on them (its output becomes
#     mixed/<variant>.expect.tsv), installs the binary into symfs and writes
#     mixed/GENERATED.
set -euo pipefail
export LC_ALL=C

TD=$(cd "$(dirname "$0")" && pwd)
BIN=/tmp/faultline-fixtures/bin
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
TRACEFS=/sys/kernel/tracing
GROUP=fl_mixed
OUT=$TD/mixed
MAX_TRIES=5
# shellcheck source=genlib.sh
. "$TD/genlib.sh"

[ "$(id -u)" = 0 ] || die "must run as root (uprobes, perf record -c 1); try: sudo $0"
command -v perf >/dev/null || die "perf not found; install linux-perf"
command -v gcc >/dev/null || die "gcc not found"
[ -d "$TRACEFS/events" ] || die "tracefs not mounted at $TRACEFS (mount -t tracefs nodev $TRACEFS)"
[ -f "$LIBC" ] || die "$LIBC not found (this generator is for x86-64 Debian 12)"
[ -f "$TD/symfs$LIBC" ] || die "testdata/symfs has no libc.so.6: run gen.sh first"
cmp -s "$LIBC" "$TD/symfs$LIBC" || die "$LIBC differs from testdata/symfs's copy: regenerate everything with gen.sh"
[ ! -d "$TRACEFS/events/$GROUP" ] || die "probe group $GROUP exists (another run, or a leftover): remove it with: echo '-:$GROUP/malloc' >> $TRACEFS/uprobe_events (and malloc__return, free)"

# Probe offsets from libc's symbol table (readelf), not hard-coded.
sym_off() { readelf -Ws "$LIBC" | awk -v s="$1" '!done && ($8 == s || $8 ~ "^"s"@@") { print $2; done = 1 }'; }
MALLOC=$(sym_off malloc)
FREE=$(sym_off free)
[ -n "$MALLOC" ] && [ -n "$FREE" ] || die "cannot find malloc/free in $LIBC's symbol table"

BUILD=$(mktemp -d /tmp/faultline-mixed-build.XXXXXX)
ADDED=()
cleanup() {
	local e
	for e in "${ADDED[@]}"; do
		echo "-:$GROUP/$e" >>"$TRACEFS/uprobe_events" || echo "gen-mixed.sh: warning: could not remove $GROUP/$e" >&2
	done
	rm -rf "$BUILD"
}
trap cleanup EXIT

# --- 1. compile (gen.sh's flags) ----------------------------------------------
SRC=$TD/src
CFLAGS=(-O2 -g -fasynchronous-unwind-tables -ffile-prefix-map="$SRC"=. -Wall -Wextra -Werror)
(
	cd "$SRC"
	set -x
	gcc "${CFLAGS[@]}" -static -o "$BUILD/launch" launch.c
	gcc "${CFLAGS[@]}" -o "$BUILD/mixed" mixed.c
)
mkdir -p "$BIN"
install -m 0755 "$BUILD/launch" "$BUILD/mixed" "$BIN/"

# --- 2. probes ------------------------------------------------------------------
add_probe() { # name definition
	echo "$2" >>"$TRACEFS/uprobe_events" || die "uprobe_events refused: $2"
	ADDED+=("$1")
}
add_probe malloc "p:$GROUP/malloc $LIBC:0x$MALLOC size=%di:u64"
add_probe malloc__return "r:$GROUP/malloc__return $LIBC:0x$MALLOC ptr=\$retval hdr=-8(\$retval):u64"
add_probe free "p:$GROUP/free $LIBC:0x$FREE ptr=%di:u64"
grep "$GROUP/" "$TRACEFS/uprobe_events"

# --- 3. record ----------------------------------------------------------------------
RANGE=(-e "$GROUP:malloc/call-graph=no/" -e "$GROUP:malloc__return/call-graph=no/" -e "$GROUP:free/call-graph=no/" -e 'page-faults/call-graph=no/u')
STACKS=(-e "$GROUP:malloc" --filter 'size >= 1048576' -e "$GROUP:malloc" --filter 'size == 266240')
rm -rf "$OUT"
mkdir -p "$OUT"
CMDS=()
record() { # variant events...
	local v=$1 f="$OUT/$1.data"
	shift
	local cmd=(perf record -m 4M -c 1 -d --call-graph dwarf "$@" -o "$f" -- "$BIN/launch" "$BIN/mixed")
	run() {
		echo "== ${cmd[*]}"
		"${cmd[@]}"
	}
	record_until_no_loss "$v" "$f" errors_on_failure run
	CMDS+=("${cmd[*]}")
}
record stack-first "${RANGE[@]}" "${STACKS[@]}"
record range-first "${STACKS[@]}" "${RANGE[@]}"

# lossy: the old way (a DWARF stack on every sample) in a ring of 2 pages,
# so the kernel drops most samples: LOST records per ring and, at the end,
# LOST_SAMPLES per event. For the loss-reporting tests; its losses vary
# from run to run, the .stats.txt and .lost.txt next to it are its truth.
LOSSY=(perf record -m 2 -c 1 -d --call-graph dwarf -e "$GROUP:malloc" -e "$GROUP:malloc__return" -e page-faults:u
	-o "$OUT/lossy.data" -- "$BIN/launch" "$BIN/mixed")
echo "== ${LOSSY[*]}"
"${LOSSY[@]}" 2>"$BUILD/perf.err" || { cat "$BUILD/perf.err" >&2; die "perf record failed"; }
[ "$(lost_count "$OUT/lossy.data")" != 0 ] || die "lossy.data lost nothing; shrink its ring"
chmod 0644 "$OUT/lossy.data"
CMDS+=("${LOSSY[*]}")

# --- 4. texts, check, symfs, provenance -------------------------------------------------
install -D -m 0755 "$BIN/mixed" "$TD/symfs$BIN/mixed"
cmp -s "$BIN/launch" "$TD/symfs$BIN/launch" || install -D -m 0755 "$BIN/launch" "$TD/symfs$BIN/launch"
# LOST and LOST_SAMPLES summed separately (perf report --stats counts LOST
# records, not what they lost).
perf script -D -i "$OUT/lossy.data" 2>/dev/null |
	awk '/PERF_RECORD_LOST: / { sub(/.*lost:/, ""); n += $1; r++ }
	     /PERF_RECORD_LOST_SAMPLES: / { sub(/.*lost samples :/, ""); m += $1 }
	     END { printf "LOST\t%d records\t%d lost\nLOST_SAMPLES\t%d lost\n", r, n, m }' >"$OUT/lossy.lost.txt"
for f in "$OUT"/*.data; do
	perf script -i "$f" --no-inline --show-mmap-events -F comm,pid,tid,time,event,addr,ip,sym,dso,trace \
		2>"$BUILD/script.err" >"${f%.data}.script.txt"
	grep -v -e "not valid for .* events. Ignoring." "$BUILD/script.err" >&2 || true
	[ "$f" = "$OUT/lossy.data" ] || "$TD/check_mixed.py" --symfs "$TD/symfs" "${f%.data}.script.txt" >"${f%.data}.expect.tsv"
	perf report --stats -i "$f" 2>/dev/null | sed -n '/Aggregated stats/,$p' >"${f%.data}.stats.txt"
	chmod 0644 "${f%.data}".*
done
{
	echo "generated by testdata/gen-mixed.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "gcc:    $(gcc --version | head -1)"
	echo "perf:   $(perf --version)"
	echo "kernel: $(uname -srm)"
	echo "glibc:  $(ldd --version | head -1)"
	echo "probes: $(grep "$GROUP/" "$TRACEFS/uprobe_events" | tr '\n' ';')"
	echo
	note_commands "recording commands:" "${CMDS[@]/$TD/testdata}"
	echo "build IDs: mixed $(buildid_of "$BIN/mixed"), launch $(buildid_of "$BIN/launch")"
	echo
	echo "files (bytes, sha256):"
	(cd "$TD" && find mixed "symfs$BIN/mixed" -type f ! -name GENERATED -print0 | sort -z | xargs -0 sha256sum |
		while read -r sum name; do printf '  %10d %s %s\n' "$(stat -c %s "$name")" "${sum:0:16}" "$name"; done)
} >"$OUT/GENERATED"
cat "$OUT/GENERATED"
