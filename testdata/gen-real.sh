#!/usr/bin/env bash
# gen-real.sh — record Debian's own (stripped) programs for faultline tests.
#
#   sudo testdata/gen-real.sh DIR        # e.g. /tmp/faultline-real
#
# Too big to commit (tens of MB each) and not deterministic (ASLR on, lost
# samples); the point is realistic input: stripped binaries without frame
# pointers, deep interpreter and compiler stacks, threads, fork+exec, losses.
#
# Workloads (none may write to stdout: in the pipe variant perf's stdout is
# the recording, and the workload inherits it):
#   python3  /usr/bin/python3 DIR/work/alloc.py   interpreter; objects > 512 B
#            bypass pymalloc and come from malloc
#   xz       xz -T2 -1 -k -f DIR/work/input.bin   2 compression threads over a
#            4 MiB input (2 blocks of 3 MiB at -1)
#   gcc      gcc -O2 -c DIR/work/small.c -o ...   the driver forks and execs
#            cc1 and as
# Variants as in gen.sh: plain, pipe, z, tp (exceptions:page_fault_user),
# hdr (return probe with the chunk header), allocs (+ calloc, realloc probes). -m 64M per CPU; losses remain
# (the probes fire faster than perf can write 8 KB stacks) and are kept:
# LOST_SAMPLES records are normal input.
#
# Writes DIR/<name>.<variant>.data, DIR/<name>.<variant>.noinline.script.txt
# (perf script --no-inline; the inline version is too slow on files this
# size), DIR/<name>.<variant>.stats (perf report --stats), DIR/buildids.txt,
# DIR/README (exact commands, versions, sizes, losses).
set -euo pipefail
export LC_ALL=C

# shellcheck source=genlib.sh
. "$(dirname "$0")/genlib.sh"
[ $# = 1 ] || die "usage: $0 OUTPUT-DIR"
[ "$(id -u)" = 0 ] || die "must run as root (uprobes, tracepoints, perf record -c 1); try: sudo $0 $1"
command -v perf >/dev/null || die "perf not found; install linux-perf"
for p in /usr/bin/python3 /usr/bin/xz /usr/bin/gcc; do [ -x $p ] || die "$p not found"; done
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
TRACEFS=/sys/kernel/tracing
[ -d "$TRACEFS/events" ] || TRACEFS=/sys/kernel/debug/tracing
[ -d "$TRACEFS/events/exceptions/page_fault_user" ] || die "no exceptions:page_fault_user tracepoint (is tracefs mounted?)"

OUT=$(mkdir -p "$1" && cd "$1" && pwd)
WORK=$OUT/work
mkdir -p "$WORK"
TMP=$(mktemp -d /tmp/faultline-real-tmp.XXXXXX)

# --- probes (genlib.sh, as gen.sh: create only what is missing, remove only that)
ADDED=()
cleanup() {
	remove_added_probes
	rm -rf "$TMP"
}
trap cleanup EXIT
ensure_libc_probes

# --- inputs (deterministic on a given machine)
cat >"$WORK/alloc.py" <<'EOF'
# faultline real-program workload: allocations that reach libc malloc
# (CPython's pymalloc serves objects <= 512 bytes itself). Prints nothing.
blocks = [bytearray(4096 * (1 + i % 16)) for i in range(200)]   # 4..64 KiB
big = [bytes(1 << 20) for _ in range(4)]                        # mmap'd
table = {str(i): "x" * (600 + i % 1000) for i in range(1500)}   # > 512 B strings
for b in blocks:
    b[::4096] = b"\1" * len(b[::4096])                           # touch every page
EOF
cat >"$WORK/small.c" <<'EOF'
#include <stdio.h>
struct node { struct node *next; int v; };
static int sum(struct node *n) { int s = 0; for (; n; n = n->next) s += n->v; return s; }
int main(void) { struct node a = {0, 1}, b = {&a, 2}; printf("%d\n", sum(&b)); return 0; }
EOF
# (head closes the pipe early: SIGPIPE on the writers is expected)
{ cat "$LIBC"; seq 1 1000000; } | head -c 4194304 >"$WORK/input.bin" || true
[ "$(stat -c %s "$WORK/input.bin")" = 4194304 ] || die "could not write $WORK/input.bin"

NAMES=(python3 xz gcc)
declare -A CMD=(
	[python3]="/usr/bin/python3 $WORK/alloc.py"
	[xz]="/usr/bin/xz -T2 -1 -k -f $WORK/input.bin"
	[gcc]="/usr/bin/gcc -O2 -c $WORK/small.c -o $WORK/small.o"
)
# gcc (cc1) makes ~8400 malloc calls: with 8 KiB stack copies its pipe
# recording (no losses) was 214 MB, so it copies 4 KiB.
declare -A CALLGRAPH=([python3]=dwarf [xz]=dwarf [gcc]=dwarf,4096)
VARIANTS=(plain pipe z tp hdr allocs)

RECORDED=()
for name in "${NAMES[@]}"; do
	for v in "${VARIANTS[@]}"; do
		f=$OUT/$name.$v.data
		# shellcheck disable=SC2206
		rec=(perf record -m 64M -c 1 -d --call-graph "${CALLGRAPH[$name]}" $(events_for "$v"))
		# shellcheck disable=SC2206
		work=(${CMD[$name]})
		rm -f "$f" "$WORK/input.bin.xz" "$WORK/small.o"
		case $v in
		pipe) line="${rec[*]} -o - -- ${work[*]} > $f"; echo "== $line"; "${rec[@]}" -o - -- "${work[@]}" >"$f" 2>"$TMP/err" ;;
		z) line="${rec[*]} -z -o $f -- ${work[*]}"; echo "== $line"; "${rec[@]}" -z -o "$f" -- "${work[@]}" 2>"$TMP/err" ;;
		*) line="${rec[*]} -o $f -- ${work[*]}"; echo "== $line"; "${rec[@]}" -o "$f" -- "${work[@]}" 2>"$TMP/err" ;;
		esac || { cat "$TMP/err" >&2; die "perf record failed: $line"; }
		chmod 0644 "$f"
		if [ "$v" = pipe ]; then in=(-i -); else in=(-i "$f"); fi
		# perf 6.1's report --stats fails on pipe files with tracing data.
		[ "$v" = pipe ] || perf report "${in[@]}" --stats >"$OUT/$name.$v.stats" 2>/dev/null || true
		perf script "${in[@]}" --no-inline --show-lost-events -F comm,pid,tid,time,event,addr,ip,sym,dso,trace <"$f" \
			>"$OUT/$name.$v.noinline.script.txt" 2>/dev/null || echo "gen-real.sh: warning: perf script failed on $f" >&2
		RECORDED+=("$line")
	done
done

for f in "$OUT"/*.plain.data "$OUT"/*.tp.data "$OUT"/*.hdr.data; do
	echo "# $(basename "$f")"
	perf buildid-list -i "$f" 2>/dev/null
done >"$OUT/buildids.txt"

{
	echo "Recordings of Debian's own binaries for faultline tests."
	echo "generated by testdata/gen-real.sh $OUT on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "perf: $(perf --version); kernel: $(uname -srm); $(ldd --version | head -1)"
	echo "python3: $(readlink -f /usr/bin/python3) $(/usr/bin/python3 --version 2>&1); xz: $(xz --version | head -1); gcc: $(gcc --version | head -1)"
	echo "ASLR on, THP as configured ($(cat /sys/kernel/mm/transparent_hugepage/enabled)), no launcher."
	echo
	echo "workloads (inputs in $WORK):"
	for name in "${NAMES[@]}"; do echo "  $name: ${CMD[$name]}"; done
	echo
	echo "exact commands:"
	printf '  %s\n' "${RECORDED[@]}"
	echo
	echo "per recording: size, samples (sample lines in the script text), PERF_RECORD_LOST records,"
	echo "samples lost by LOST_SAMPLES (sum over events; perf report --stats, not for pipe files):"
	for name in "${NAMES[@]}"; do
		for v in "${VARIANTS[@]}"; do
			s=$OUT/$name.$v.stats
			if [ -f "$s" ]; then
				lost=$(awk '/^ *LOST events:/ { print $3; exit }' "$s")
				lostsamples=$(awk '/^ *LOST_SAMPLES events:/ && !/%/ { n += $3 } END { print n + 0 }' "$s")
			else
				lost=$(grep -c 'PERF_RECORD_LOST' "$OUT/$name.$v.noinline.script.txt" || true)
				lostsamples=n/a
			fi
			printf '  %-20s %6s MB  samples %-7s lost-records %-4s lost-samples %s\n' "$name.$v.data" \
				"$(( $(stat -c %s "$OUT/$name.$v.data") / 1000000 ))" \
				"$(grep -v 'PERF_RECORD_LOST' "$OUT/$name.$v.noinline.script.txt" | grep -c '^[^[:space:]]' || true)" \
				"${lost:-0}" "$lostsamples"
		done
	done
	echo
	echo "Per-event split of the losses: <name>.<variant>.stats. Build IDs: buildids.txt."
	echo "Script texts: perf script --no-inline --show-lost-events -F comm,pid,tid,time,event,addr,ip,sym,dso,trace"
	echo "(-i - < F for the pipe files). The binaries are this machine's: /usr/bin/python3.11, /usr/bin/xz,"
	echo "/usr/bin/x86_64-linux-gnu-gcc-12, /usr/lib/gcc/x86_64-linux-gnu/12/cc1, /usr/bin/x86_64-linux-gnu-as,"
	echo "libc, ld.so, liblzma, libgmp/mpfr/mpc/isl, libbfd... (all in buildids.txt); python3.11 has libpython"
	echo "linked in. Only libc and ld.so have separate debug files installed (libc6-dbg)."
	echo "Made by the committed script testdata/gen-real.sh in the faultline repo: sudo testdata/gen-real.sh $OUT"
} >"$OUT/README"

echo
echo "== wrote:"
ls -la "$OUT"
cat "$OUT/README"
