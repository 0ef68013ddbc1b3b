#!/usr/bin/env bash
# bench.sh — what recording costs, against heaptrack (LD_PRELOAD, lossless
# stacks) on the same programs.
#
#   sudo testdata/record/bench.sh [OUTDIR]
#
# Builds testdata/record/src with gen.sh, then for each workload
#   churn 200000     (C, 400k malloc/free calls)
#   churn 2000000    (C, 4M calls)
#   containers       (C++ containers, 114k mallocs, 2 threads)
# runs RUNS times (default 5), interleaved, and prints the median wall
# times of:
#   native      the program alone
#   faultline   faultline record -q -o OUT/x.data -- PROG: the whole command,
#               with the default (in-process) method
#   program     the program's own wall time under that record (exec to exit,
#               from record's summary)
#   heaptrack   heaptrack -o OUT/x PROG (its recording, not its analysis)
#   uprobe      faultline record --method uprobe (whole command); UPROBE=0
#               skips it (it takes about a minute on churn 2000000)
#   nosnap      faultline record --resident-every=0 --no-exit-snapshots:
#               without the page-table reads, for what they cost (and the
#               CPU time record says they took); SNAP=0 skips it
# with the ratios faultline/heaptrack and program/native, the recording's
# size and bytes per allocator call, and the time of `faultline record --
# true` (setup and teardown alone), back to back and a second apart.
#
# Environment: FAULTLINE (binary; default: go build ./cmd/faultline into
# OUTDIR), RUNS, UPROBE, SNAP, GAP.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
RUNS=${RUNS:-5}
UPROBE=${UPROBE:-1}
SNAP=${SNAP:-1}
[ "$(id -u)" = 0 ] || { echo "bench.sh: run as root (the uprobe method adds uprobes)" >&2; exit 1; }
command -v heaptrack >/dev/null || { echo "bench.sh: heaptrack not installed (apt-get install heaptrack)" >&2; exit 1; }
FAULTLINE=${FAULTLINE:-}
if [ -z "$FAULTLINE" ]; then
	(cd "$root" && go build -o "$out/faultline" ./cmd/faultline)
	FAULTLINE=$out/faultline
fi
sh "$here/gen.sh" "$out" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Every timed run of the workloads starts GAP seconds after the previous
# one ended: a recording's teardown goes on in the kernel after it exits
# (its syscall tracepoints are unregistered, one RCU grace period each),
# and a run started within it waits for it. That cost is measured on its
# own below (record -- true back to back). GAP=0 runs them back to back.
GAP=${GAP:-0.5}
# Wall times come from bash's own `time` (fork, exec and wait of the
# command, to the millisecond), not from two date processes around it,
# whose own start (about 1.6 ms here) would be counted as the command's.
TIMEFORMAT=%3R
elapsed() { { time "$@" >/dev/null 2>&1; } 2>&1; }

bench() {
	name=$1; shift
	for k in native fl prog ht up ns snapcpu; do : >"$out/$name.$k"; done
	for i in $(seq "$RUNS"); do
		sleep "$GAP"
		elapsed "$@" >>"$out/$name.native"
		sleep "$GAP"
		{ time "$FAULTLINE" record -o "$out/$name.data" -- "$@" >/dev/null 2>"$out/$name.log"; } 2>>"$out/$name.fl"
		sed -n 's/.* ran \([0-9.]*\) s .* with \([0-9]*\) allocator calls.*/\1 \2/p' "$out/$name.log" >"$out/$name.sum"
		read -r prog calls <"$out/$name.sum"
		echo "$prog" >>"$out/$name.prog"
		sed -n 's/.*page tables.*: \([0-9.]*\) ms of CPU/\1/p' "$out/$name.log" >>"$out/$name.snapcpu"
		if [ "$SNAP" = 1 ]; then
			sleep "$GAP"
			elapsed "$FAULTLINE" record -q --resident-every=0 --no-exit-snapshots -o "$out/$name.ns.data" -- "$@" >>"$out/$name.ns"
		fi
		rm -f "$out/$name".ht.*
		sleep "$GAP"
		elapsed heaptrack -o "$out/$name.ht" "$@" >>"$out/$name.ht"
		if [ "$UPROBE" = 1 ]; then
			sleep "$GAP"
			elapsed "$FAULTLINE" record -q --method uprobe -o "$out/$name.up.data" -- "$@" >>"$out/$name.up"
		fi
	done
	n=$(median <"$out/$name.native"); f=$(median <"$out/$name.fl")
	p=$(median <"$out/$name.prog"); h=$(median <"$out/$name.ht")
	size=$(stat -c %s "$out/$name.data")
	lost=$(awk '$NF ~ /^[1-9][0-9]*$/ && NF >= 3' "$out/$name.log" | wc -l)
	printf '%-15s native %.3f s  faultline %.3f s (program %.3f s)  heaptrack %.3f s' "$name" "$n" "$f" "$p" "$h"
	if [ "$UPROBE" = 1 ]; then printf '  uprobe %.3f s' "$(median <"$out/$name.up")"; fi
	if [ "$SNAP" = 1 ] && [ -s "$out/$name.snapcpu" ]; then
		ns=$(median <"$out/$name.ns"); sc=$(median <"$out/$name.snapcpu")
		printf '\n%-15s page-table reads: faultline %.3f s with them, %.3f s without (%+.1f%%); their CPU %.1f ms (%.1f%% of faultline)' "" \
			"$f" "$ns" "$(echo "100 * ($f - $ns) / $ns" | bc -l)" "$sc" "$(echo "$sc / 10 / $f" | bc -l)"
	fi
	printf '\n%-15s faultline/heaptrack %.2fx  program/native %.2fx  %.1f MB, %.1f bytes per call (%d calls), %d events with losses\n' "" \
		"$(echo "$f / $h" | bc -l)" "$(echo "$p / $n" | bc -l)" "$(echo "$size / 1000000" | bc -l)" \
		"$(echo "$size / $calls" | bc -l)" "$calls" "$lost"
}

bench churn200k "$out/churn" 200000
bench churn2M "$out/churn" 2000000
bench containers "$out/containers"

: >"$out/true"
: >"$out/true.apart"
for i in $(seq "$RUNS"); do elapsed "$FAULTLINE" record -q -o "$out/true.data" -- true >>"$out/true"; done
# A run that follows another within a fraction of a second waits for the
# kernel to unregister the earlier run's syscall tracepoints (one RCU
# grace period each, under the lock that opening and describing
# tracepoints takes): measured both ways.
for i in $(seq "$RUNS"); do sleep 1; elapsed "$FAULTLINE" record -q -o "$out/true.data" -- true >>"$out/true.apart"; done
printf '%-15s faultline record -- true %.3f s back to back, %.3f s a second apart\n' "true" "$(median <"$out/true")" "$(median <"$out/true.apart")"
