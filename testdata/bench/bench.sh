#!/usr/bin/env bash
# bench.sh: is faultline analyze faster than perf can print the
# same stacks, and is its memory flat in the size of the recording?
#
#   sudo testdata/bench/bench.sh DIR            # record (once) and measure
#   sudo testdata/bench/bench.sh -r DIR         # record again, then measure
#   MEASURE_ONLY=1 testdata/bench/bench.sh DIR  # measure existing recordings
#
# Records two recordings of the same kind of workload into DIR (not
# committed; 1.78 GB and 168 MB here, 10.6x apart: the kernel drops more
# samples when two compiles run at once, so 20 units give ~10x one unit):
#   large.data  make -j2 over 20 units, small.data  the same over 1 unit;
#   a unit compiles a small C file (gcc -O2 -c: the gcc driver forks and
#   execs cc1 and as) and compresses 512 KiB with xz -T2 (two threads).
# with
#   perf record -c 1 -d --call-graph dwarf -m 64M -e probe_libc:malloc \
#       -e probe_libc:malloc__return -e page-faults:u -- make -j2 ...
# then runs, interleaved so that both see the same machine load,
#   faultline analyze -q -o /dev/null FILE
#   perf script --no-inline -F comm,pid,tid,time,event,addr,ip,sym,dso,trace -i FILE >/dev/null
#   perf script             -F comm,pid,tid,time,event,addr,ip,sym,dso,trace -i FILE >/dev/null
# RUNS times each (default 3) and prints the medians, their ratios and the
# peak RSS (/usr/bin/time -f %M) of faultline on both recordings.
#
# perf script with inline frames runs addr2line for the frames it prints:
# on a 2-core VM one run over large.data took 80-85 s on a quiet
# machine and 337 s under load (small.data: 262 s under load). INLINE_RUNS
# (default 3) and INLINE_ON (default large; small or none to save time)
# bound that part.
#
# Environment: FAULTLINE (binary; default: go build ./cmd/faultline into
# DIR), RUNS, SMALL_RUNS (--gcc: runs on the small recording, 9),
# INLINE_RUNS, INLINE_ON (small|large|none), UNITS_LARGE (20),
# UNITS_SMALL (1), RECORD_ONLY=1 (record, do not measure).
#
# With --gcc, the gcc benchmark instead (see gcc_bench below): one
# multi-GB recording of a gcc compile, faultline at GOMAXPROCS 1, 2 and
# all against perf script --no-inline.
set -euo pipefail
export LC_ALL=C

die() { echo "bench.sh: $*" >&2; exit 1; }
REC=0 GCC=0
while [ $# -gt 1 ]; do
	case $1 in
	-r) REC=1 ;;
	--gcc) GCC=1 ;;
	*) break ;;
	esac
	shift
done
[ $# = 1 ] || die "usage: $0 [-r] [--gcc] OUTPUT-DIR"
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-3}
INLINE_RUNS=${INLINE_RUNS:-3}
INLINE_ON=${INLINE_ON:-large}
UNITS_LARGE=${UNITS_LARGE:-20}
UNITS_SMALL=${UNITS_SMALL:-1}
FIELDS=comm,pid,tid,time,event,addr,ip,sym,dso,trace
command -v perf >/dev/null || die "perf not found; install linux-perf"
[ -x /usr/bin/time ] || die "/usr/bin/time not found; apt-get install time"

# --- recording
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
TRACEFS=/sys/kernel/tracing
[ -d "$TRACEFS/events" ] || TRACEFS=/sys/kernel/debug/tracing
ADDED=()
GCC_PROBES=""
cleanup() {
	local p
	for p in "${ADDED[@]}"; do perf probe -q -d "$p" || echo "bench.sh: warning: could not remove probe $p" >&2; done
	if [ -n "$GCC_PROBES" ]; then
		for p in malloc__return malloc; do
			if grep -q "^[pr]:$GCC_PROBES/$p " "$TRACEFS/uprobe_events"; then
				echo "-:$GCC_PROBES/$p" >>"$TRACEFS/uprobe_events" || echo "bench.sh: warning: could not remove probe $GCC_PROBES:$p" >&2
			fi
		done
	fi
}
trap cleanup EXIT
probe_exists() { [ -d "$TRACEFS/events/${1%%:*}/${1#*:}" ]; }
ensure_probe() { # event spec: create only what is missing, remove only that
	probe_exists "$1" && return
	echo "== adding probe $1: $2"
	perf probe -q -x "$LIBC" -a "$2"
	ADDED+=("$1")
}

FL=${FAULTLINE:-}
build_fl() {
	if [ -z "$FL" ]; then
		FL=$OUT/faultline
		(cd "$REPO" && go build -o "$FL" ./cmd/faultline)
	fi
}
# timed LABEL CMD...: runs CMD, appends "LABEL wall_s rss_kb" to $OUT/times.
# timed LABEL CMD...: appends "LABEL wall_s peak_rss_kb" to $OUT/times. The
# wall time is taken to the millisecond around /usr/bin/time (whose %e has
# 10 ms steps: a tenth of a small recording's run).
timed() {
	local label=$1 t0 t1
	shift
	t0=$(date +%s%N)
	/usr/bin/time -o "$OUT/.time" -f "%M" "$@" >/dev/null 2>"$OUT/.err" || { cat "$OUT/.err" >&2; die "failed: $*"; }
	t1=$(date +%s%N)
	echo "$label $(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.3f", d / 1e9}') $(cat "$OUT/.time")" >>"$OUT/times"
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v l="$1" -v c="$2" '$1==l {print $c}' "$OUT/times"; }
size_mb() { echo "$(($(stat -c %s "$1") / 1000000))"; }

# --- one gcc compile, recorded whole (--gcc)
#
#   sudo testdata/bench/bench.sh --gcc DIR       # record (once) and measure
#   MEASURE_ONLY=1 testdata/bench/bench.sh --gcc DIR
#
# large.data  perf record -c 1 -d --call-graph dwarf -m 64M with malloc
#             entry and return probes and page-faults:u on gcc -O1 -c of a
#             generated C file of LINES (12000) lines: several GB
# small.data  the same kind on a one-function file, with --call-graph
#             dwarf,4096 and the return probe without stacks: under 50 MB
# The probes are this script's own group (PROBE_GROUP, default fl_bench),
# written to uprobe_events directly and removed at exit. Then, in one
# sitting and interleaved, RUNS (3) pairs per file of
#   faultline analyze -q -o /dev/null FILE     (GOMAXPROCS unset: all CPUs)
#   perf script --no-inline -i FILE >/dev/null
# and RUNS runs of analyze at GOMAXPROCS=1 and 2, and prints the medians,
# the ratio faultline/perf, the speedup 1→2 and peak RSS. The recordings
# stay in DIR (keep it out of the repository: they are large).
gcc_bench() {
	local lines=${LINES:-12000} group=${PROBE_GROUP:-fl_bench} f pairs i n
	local events=$TRACEFS/uprobe_events
	gen_c() { # gen_c LINES: independent functions, each a loop, a switch and struct accesses
		awk -v LINES="$1" 'BEGIN {
			print "struct s { int a, b; long c; double d; struct s *next; };"
			print "extern int ext(int, long);"
			for (n = 0; n < LINES; n += 20) {
				f = n / 20
				printf "int f%d(struct s *p, int x, long y) {\n", f
				printf "\tint r = x * %d + (int)(y >> %d);\n", f % 97 + 3, f % 7 + 1
				printf "\tfor (int i = 0; i < x; i++) {\n"
				printf "\t\tr += p->a * i - p->b + ext(i, y + %d);\n", f
				printf "\t\tif (r > %d) r ^= (int)p->c; else r -= i * %d;\n", f * 13, f % 11 + 2
				printf "\t\tp = p->next ? p->next : p;\n"
				printf "\t}\n"
				printf "\tswitch (r & 7) {\n"
				for (k = 0; k < 8; k++) printf "\tcase %d: r += ext(r, %d) * %d; break;\n", k, k + f, k + 1
				printf "\t}\n"
				printf "\tp->d = p->d * %d.5 + r;\n", f % 5
				printf "\treturn r + (int)p->d;\n"
				printf "}\n"
			}
		}'
	}
	if [ "$REC" = 1 ] || [ ! -f "$OUT/large.data" ] || [ ! -f "$OUT/small.data" ]; then
		[ -z "${MEASURE_ONLY:-}" ] || die "no recordings in $OUT"
		[ "$(id -u)" = 0 ] || die "recording needs root (uprobes, perf record -c 1); try: sudo $0 --gcc $OUT"
		[ -w "$events" ] || die "$events is not writable: no uprobe events in this kernel?"
		! grep -q "^[pr]:$group/" "$events" || die "probe group $group exists already (not ours): set PROBE_GROUP"
		# malloc's file offset in libc: its symbol value moved from its
		# PT_LOAD segment's address to the segment's file offset.
		local v off="" po pv fs
		v=$((16#$(readelf -sW --dyn-syms "$LIBC" | awk '$4 == "FUNC" && $8 ~ /^malloc@/ && !seen {print $2; seen = 1}')))
		while read -r _ po pv _ fs _; do
			if ((v >= pv && v < pv + fs)); then off=$(printf '0x%x' $((v - pv + po))); fi
		done < <(readelf -lW "$LIBC" | awk '$1 == "LOAD"')
		[ -n "$off" ] || die "cannot place malloc in $LIBC"
		echo "p:$group/malloc $LIBC:$off size=%di:u64" >>"$events"
		GCC_PROBES="$group"
		echo "r:$group/malloc__return $LIBC:$off ptr=\$retval" >>"$events"
		mkdir -p "$OUT/work"
		gen_c "$lines" >"$OUT/work/gen.c"
		gen_c 20 >"$OUT/work/one.c"
		rm -f "$OUT/large.data" "$OUT/small.data"
		local cmd=(perf record -q -c 1 -d --call-graph dwarf -m 64M -e "$group:malloc" -e "$group:malloc__return" -e page-faults:u -o "$OUT/large.data" -- gcc -O1 -c "$OUT/work/gen.c" -o "$OUT/work/gen.o")
		echo "== ${cmd[*]}"
		"${cmd[@]}"
		cmd=(perf record -q -c 1 -d --call-graph dwarf,4096 -m 64M -e "$group:malloc" -e "$group:malloc__return/call-graph=no/" -e page-faults:u -o "$OUT/small.data" -- gcc -O1 -c "$OUT/work/one.c" -o "$OUT/work/one.o")
		echo "== ${cmd[*]}"
		"${cmd[@]}"
		chmod 0644 "$OUT/large.data" "$OUT/small.data"
		{
			echo "generated by testdata/bench/bench.sh --gcc on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
			echo "perf: $(perf version); kernel: $(uname -srm); $(gcc --version | head -1)"
			echo "large: gcc -O1 -c of $(wc -l <"$OUT/work/gen.c") lines; small: of $(wc -l <"$OUT/work/one.c") lines"
		} >"$OUT/README"
	fi
	[ -z "${RECORD_ONLY:-}" ] || return 0
	build_fl
	: >"$OUT/times"
	local runs
	for f in large small; do
		cat "$OUT/$f.data" >/dev/null # page cache warm for both tools
		runs=$RUNS
		[ "$f" = large ] || runs=${SMALL_RUNS:-9} # 0.2 s runs: more of them
		for _ in $(seq 1 "$runs"); do
			timed "fl-$f" "$FL" analyze -q -o /dev/null "$OUT/$f.data"
			timed "noinline-$f" perf script --no-inline -i "$OUT/$f.data"
			timed "fl1-$f" env GOMAXPROCS=1 "$FL" analyze -q -o /dev/null "$OUT/$f.data"
			timed "fl2-$f" env GOMAXPROCS=2 "$FL" analyze -q -o /dev/null "$OUT/$f.data"
		done
	done
	echo
	echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-6s %7s %9s %9s %9s %9s %8s %8s %12s\n' file MB "perf s" "fl s" "fl@1 s" "fl@2 s" "fl/perf" "1→2" "fl peak RSS"
	for f in large small; do
		local ni fl fl1 fl2 rss
		ni=$(col "noinline-$f" 2 | median); fl=$(col "fl-$f" 2 | median)
		fl1=$(col "fl1-$f" 2 | median); fl2=$(col "fl2-$f" 2 | median)
		rss=$(cat <(col "fl-$f" 3) <(col "fl1-$f" 3) <(col "fl2-$f" 3) | sort -n | tail -1)
		printf '%-6s %7s %9s %9s %9s %9s %8.3f %8.2f %9d KB\n' "$f" "$(size_mb "$OUT/$f.data")" "$ni" "$fl" "$fl1" "$fl2" \
			"$(echo "$fl / $ni" | bc -l)" "$(echo "$fl1 / $fl2" | bc -l)" "$rss"
	done
	echo "medians of $RUNS runs (large) and ${SMALL_RUNS:-9} (small) each, interleaved; fl = GOMAXPROCS unset ($(nproc) CPUs); all runs: $OUT/times (label wall_s rss_kb)"
	# The CPU profile by pipeline stage (labels stage=read|walk|track):
	# read and track are serial, walk runs on every core.
	GOMAXPROCS=2 "$FL" analyze -q -o /dev/null --cpuprofile "$OUT/large.cpu" "$OUT/large.data" 2>/dev/null
	echo
	echo "CPU by stage at GOMAXPROCS=2 ($OUT/large.cpu; go tool pprof -tagfocus=stage=read $FL $OUT/large.cpu):"
	go tool pprof -tags "$FL" "$OUT/large.cpu" 2>/dev/null | sed -n '/stage:/,/^$/p'
}

if [ "$GCC" = 1 ]; then
	gcc_bench
	exit 0
fi

# record NAME UNITS: make -j2 over UNITS units in DIR/work-NAME.
record() {
	local name=$1 units=$2 work=$OUT/work-$1 i
	rm -rf "$work"
	mkdir -p "$work"
	{ cat "$LIBC"; seq 1 200000; } | head -c 524288 >"$work/input.bin" || true
	{
		echo "all:"
		for i in $(seq 1 "$units"); do
			# Distinct sources, so make runs each compile.
			cat >"$work/u$i.c" <<-C
				#include <stdio.h>
				struct node$i { struct node$i *next; int v; };
				static int sum$i(struct node$i *n) { int s = 0; for (; n; n = n->next) s += n->v; return s; }
				int f$i(void) { struct node$i a = {0, $i}, b = {&a, 2}; printf("%d\n", sum$i(&b)); return 0; }
			C
			printf 'all: u%d.o u%d.xz\nu%d.o: u%d.c\n\tgcc -O2 -c u%d.c -o u%d.o\n' "$i" "$i" "$i" "$i" "$i" "$i"
			printf 'u%d.xz: input.bin\n\txz -T2 -1 -c input.bin > u%d.xz\n' "$i" "$i"
		done
	} >"$work/Makefile"
	local cmd=(perf record -q -c 1 -d --call-graph dwarf -m 64M -e probe_libc:malloc -e probe_libc:malloc__return -e page-faults:u -o "$OUT/$name.data" -- make -s -j2 -C "$work")
	echo "== ${cmd[*]}"
	rm -f "$OUT/$name.data" "$OUT/$name.data.old"
	"${cmd[@]}" >/dev/null
	chmod 0644 "$OUT/$name.data"
}

if [ "$REC" = 1 ] || [ ! -f "$OUT/large.data" ] || [ ! -f "$OUT/small.data" ]; then
	[ -z "${MEASURE_ONLY:-}" ] || die "no recordings in $OUT"
	[ "$(id -u)" = 0 ] || die "recording needs root (uprobes, perf record -c 1); try: sudo $0 $*"
	ensure_probe probe_libc:malloc 'malloc size=%di:u64'
	ensure_probe probe_libc:malloc__return 'malloc%return ptr=$retval'
	record small "$UNITS_SMALL"
	record large "$UNITS_LARGE"
	{
		echo "generated by testdata/bench/bench.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "perf: $(perf version); kernel: $(uname -srm); $(gcc --version | head -1)"
		echo "small: $UNITS_SMALL unit(s), large: $UNITS_LARGE units (see work-*/Makefile)"
	} >"$OUT/README"
fi

[ -z "${RECORD_ONLY:-}" ] || exit 0

# --- measuring
build_fl

: >"$OUT/times"
for f in large small; do
	file=$OUT/$f.data
	for _ in $(seq 1 "$RUNS"); do
		timed "fl-$f" "$FL" analyze -q -o /dev/null "$file"
		timed "noinline-$f" perf script --no-inline -F "$FIELDS" -i "$file"
	done
done
if [ "$INLINE_ON" != none ]; then
	for _ in $(seq 1 "$INLINE_RUNS"); do
		timed "inline-$INLINE_ON" perf script -F "$FIELDS" -i "$OUT/$INLINE_ON.data"
	done
fi

fl_l=$(col fl-large 2 | median); fl_s=$(col fl-small 2 | median)
ni_l=$(col noinline-large 2 | median); ni_s=$(col noinline-small 2 | median)
rss_l=$(col fl-large 3 | sort -n | tail -1); rss_s=$(col fl-small 3 | sort -n | tail -1)
echo
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %8s %22s %26s %8s %12s\n' file MB "faultline s (median)" "perf --no-inline s (median)" ratio "fl peak RSS"
printf '%-6s %8s %22s %26s %8.3f %9d KB\n' large "$(size_mb "$OUT/large.data")" "$fl_l" "$ni_l" "$(echo "$fl_l / $ni_l" | bc -l)" "$rss_l"
printf '%-6s %8s %22s %26s %8.3f %9d KB\n' small "$(size_mb "$OUT/small.data")" "$fl_s" "$ni_s" "$(echo "$fl_s / $ni_s" | bc -l)" "$rss_s"
echo "runs each: $RUNS (interleaved); size large/small: $(echo "$(stat -c %s "$OUT/large.data") / $(stat -c %s "$OUT/small.data")" | bc -l | cut -c1-5); peak RSS large/small: $(echo "$rss_l / $rss_s" | bc -l | cut -c1-5)"
if [ "$INLINE_ON" != none ]; then
	in=$(col "inline-$INLINE_ON" 2 | median)
	fl=$fl_l
	[ "$INLINE_ON" = small ] && fl=$fl_s
	echo "perf script (inline) on $INLINE_ON: $in s (median of $INLINE_RUNS); faultline/perf-inline: $(echo "$fl / $in" | bc -l | cut -c1-6)"
fi
echo "all runs: $OUT/times (label wall_s rss_kb)"
