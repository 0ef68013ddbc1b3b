#!/usr/bin/env bash
# bench.sh — issue 10: what recording costs the program, against heaptrack
# (LD_PRELOAD, no kernel traps) on the same program, and the uprobe floor.
#
#   sudo testdata/record/bench.sh [OUTDIR]
#
# Builds testdata/record/src with gen.sh, then for each workload
#   churn 200000     (C, 400k malloc/free calls, natively > 1M calls/s)
#   containers       (C++ containers, 114k mallocs, 8 MiB buffer, 2 threads)
# runs RUNS times each (default 3, interleaved) and prints median wall
# times of:
#   native      the program alone (THP off like record, via faultline's
#               launcher is not possible without probes, so plain)
#   faultline   faultline record -q -o OUT/x.data -- PROG (whole command:
#               probe setup, recording, writing, probe removal)
#   program     the program's own wall time under record (exec to exit, from
#               record's summary)
#   heaptrack   heaptrack -o OUT/x PROG (its recording, not its analysis)
# and the ratios faultline/heaptrack and program/native, plus the cost per
# probe hit, (program − native) / hits: the uprobe-trap floor on this
# machine.
#
# Environment: FAULTLINE (binary; default: go build ./cmd/faultline into
# OUTDIR), RUNS.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
RUNS=${RUNS:-3}
[ "$(id -u)" = 0 ] || { echo "bench.sh: run as root (record adds uprobes)" >&2; exit 1; }
command -v heaptrack >/dev/null || { echo "bench.sh: heaptrack not installed (apt-get install heaptrack)" >&2; exit 1; }
FAULTLINE=${FAULTLINE:-}
if [ -z "$FAULTLINE" ]; then
	(cd "$root" && go build -o "$out/faultline" ./cmd/faultline)
	FAULTLINE=$out/faultline
fi
sh "$here/gen.sh" "$out" >/dev/null

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bench() {
	name=$1; shift
	: >"$out/$name.native"; : >"$out/$name.fl"; : >"$out/$name.prog"; : >"$out/$name.ht"
	hits=0
	for i in $(seq "$RUNS"); do
		t0=$(now); "$@" >/dev/null; t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$out/$name.native"
		t0=$(now)
		"$FAULTLINE" record -o "$out/$name.data" -- "$@" >/dev/null 2>"$out/$name.log"
		t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$out/$name.fl"
		sed -n 's/.* ran \([0-9.]*\) s .* with \([0-9]*\) probe hits.*/\1 \2/p' "$out/$name.log" >"$out/$name.sum"
		read -r prog hits <"$out/$name.sum"
		echo "$hits" >"$out/$name.hits"
		echo "$prog" >>"$out/$name.prog"
		rm -f "$out/$name".ht.*
		t0=$(now); heaptrack -o "$out/$name.ht" "$@" >/dev/null 2>&1; t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$out/$name.ht"
	done
	n=$(median <"$out/$name.native"); f=$(median <"$out/$name.fl")
	p=$(median <"$out/$name.prog"); h=$(median <"$out/$name.ht")
	lost=$(grep -c ' [1-9][0-9]*$' "$out/$name.log" || true)
	printf '%-11s native %.3f s  faultline %.3f s (program %.3f s, %d hits, %s rows with losses)  heaptrack %.3f s\n' \
		"$name" "$n" "$f" "$p" "$hits" "$lost" "$h"
	printf '%-11s faultline/heaptrack %.1fx  program/native %.1fx  per hit %.2f us\n' "" \
		"$(echo "$f / $h" | bc -l)" "$(echo "$p / $n" | bc -l)" "$(echo "($p - $n) * 1000000 / $hits" | bc -l)"
}

bench churn "$out/churn" 200000
bench containers "$out/containers"

# The floor: the same uprobes counted by perf stat (a trap per call, no
# sample written, no ring read) on churn, which calls only malloc and free.
if command -v perf >/dev/null; then
	libc=$(ldd "$out/churn" | awk '/libc\.so/ {print $3}')
	off() { readelf -Ws "$libc" | awk -v s="$1@@GLIBC_2.2.5" '$8 == s {print $2; exit}'; }
	g=flbench_$$
	ev=/sys/kernel/tracing/uprobe_events
	cleanup() { for e in free malloc__return malloc; do echo "-:$g/$e" >>"$ev" 2>/dev/null || true; done; }
	trap cleanup EXIT
	echo "p:$g/malloc $libc:0x$(off malloc) size=%di:u64" >>"$ev"
	echo "r:$g/malloc__return $libc:0x$(off malloc) ptr=\$retval" >>"$ev"
	echo "p:$g/free $libc:0x$(off free) ptr=%di:u64" >>"$ev"
	: >"$out/floor"
	for i in $(seq "$RUNS"); do
		t0=$(now)
		perf stat -x, -o /dev/null -e "$g:malloc,$g:malloc__return,$g:free" -- "$out/churn" 200000
		t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$out/floor"
	done
	fl=$(median <"$out/floor")
	p=$(median <"$out/churn.prog"); n=$(median <"$out/churn.native")
	printf 'floor       churn under perf stat (traps only) %.3f s: %.2f us per hit; record'"'"'s program time is %.2fx the floor\n' \
		"$fl" "$(echo "($fl - $n) * 1000000 / $(cat "$out/churn.hits")" | bc -l)" "$(echo "$p / $fl" | bc -l)"
fi
