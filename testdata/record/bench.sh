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
# size and bytes per allocator call (compressed, and once more recorded
# with --no-compress: before compression), and the time of `faultline
# record -- true` (setup and teardown alone), back to back and a second
# apart. It ends with the targets the in-process method is held to, each
# with its measured value and whether it holds.
#
# BREAKDOWN=1 also records each workload PROFILES times (default 3) with
# record's Go CPU profile (--cpuprofile) and splits record's CPU per call
# into the drain (reading the shim's rings, making samples), packing
# (perfdata.Packer), compression (zstd) and writing (the write system
# calls), beside the shim's own cost: the program's CPU under record less
# its native CPU, per call. The profile samples 100 times a second: only
# churn 2000000's split has enough samples to go by.
#
# Environment: FAULTLINE (binary; default: go build ./cmd/faultline into
# OUTDIR), RUNS, UPROBE, SNAP, GAP, BREAKDOWN, PROFILES.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
RUNS=${RUNS:-5}
UPROBE=${UPROBE:-1}
SNAP=${SNAP:-1}
BREAKDOWN=${BREAKDOWN:-0}
PROFILES=${PROFILES:-3}
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
	"$FAULTLINE" record -q --no-compress -o "$out/$name.raw.data" -- "$@" >/dev/null 2>&1
	raw=$(stat -c %s "$out/$name.raw.data")
	printf '\n%-15s faultline/heaptrack %.2fx  program/native %.2fx  %.1f MB, %.1f bytes per call (%d calls; %.1f before compression), %d events with losses\n' "" \
		"$(echo "$f / $h" | bc -l)" "$(echo "$p / $n" | bc -l)" "$(echo "$size / 1000000" | bc -l)" \
		"$(echo "$size / $calls" | bc -l)" "$calls" "$(echo "$raw / $calls" | bc -l)" "$lost"
	# For the targets at the end.
	echo "$(echo "$f / $h" | bc -l) $(echo "$p / $n" | bc -l) $size $(echo "$raw / $calls" | bc -l)" >"$out/$name.result"
	if [ "$BREAKDOWN" = 1 ]; then breakdown "$name" "$@"; fi
}

# cpu PROFILE [FOCUS]: the CPU seconds of record's profile, or of the
# samples whose stack matches the regular expression FOCUS.
cpu() {
	go tool pprof -top -nodecount=100000 ${2:+-focus="$2"} "$1" 2>/dev/null |
		awk '/^Showing nodes accounting for/ { v = $5; sub(/,$/, "", v); u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
			print (u == "ms" ? v / 1000 : u == "us" ? v / 1e6 : v); found = 1; exit }
			END { if (!found) print 0 }'
}

# breakdown NAME PROG ARGS...: where record's CPU goes per allocator call
# (medians of PROFILES profiled runs), and the shim's cost: the program's
# user+sys CPU under record less its native user+sys, per call.
breakdown() {
	name=$1; shift
	for k in drain pack zstd write total shim; do : >"$out/$name.bd.$k"; done
	for i in $(seq "$PROFILES"); do
		sleep "$GAP"
		nat=$( { TIMEFORMAT='%3U %3S'; time "$@" >/dev/null 2>&1; } 2>&1 | awk '{print $1 + $2}')
		sleep "$GAP"
		"$FAULTLINE" record --cpuprofile "$out/$name.prof" -o "$out/$name.bd.data" -- "$@" >/dev/null 2>"$out/$name.bd.log"
		read -r calls ucpu scpu < <(sed -n 's/.* ran [0-9.]* s (user \([0-9.]*\) s, sys \([0-9.]*\) s) with \([0-9]*\) allocator calls.*/\3 \1 \2/p' "$out/$name.bd.log")
		prof=$out/$name.prof
		pk=$(cpu "$prof" 'perfdata\.\(\*Packer\)')
		dr=$(cpu "$prof" 'recorder\.\(\*inproc\)\.drain$')
		echo "($dr - $pk) * 1000000000 / $calls" | bc -l >>"$out/$name.bd.drain"
		echo "$pk * 1000000000 / $calls" | bc -l >>"$out/$name.bd.pack"
		echo "$(cpu "$prof" 'klauspost/compress/zstd') * 1000000000 / $calls" | bc -l >>"$out/$name.bd.zstd"
		echo "$(cpu "$prof" 'syscall\.write$|unix\.write$|os\.\(\*File\)\.Write$') * 1000000000 / $calls" | bc -l >>"$out/$name.bd.write"
		echo "$(cpu "$prof") * 1000000000 / $calls" | bc -l >>"$out/$name.bd.total"
		echo "($ucpu + $scpu - $nat) * 1000000000 / $calls" | bc -l >>"$out/$name.bd.shim"
	done
	printf '%-15s ns per call: shim %.0f (the program'"'"'s CPU over native); record %.0f: drain %.0f, packing %.0f, zstd %.0f, write %.0f, the rest %.0f\n' "" \
		"$(median <"$out/$name.bd.shim")" "$(median <"$out/$name.bd.total")" "$(median <"$out/$name.bd.drain")" \
		"$(median <"$out/$name.bd.pack")" "$(median <"$out/$name.bd.zstd")" "$(median <"$out/$name.bd.write")" \
		"$(echo "$(median <"$out/$name.bd.total") - $(median <"$out/$name.bd.drain") - $(median <"$out/$name.bd.pack") - $(median <"$out/$name.bd.zstd") - $(median <"$out/$name.bd.write")" | bc -l)"
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

# target WHAT VALUE OP BOUND: one line of the targets, and whether it holds.
target() {
	if [ "$(echo "$2 $3 $4" | bc -l)" = 1 ]; then ok=holds; else ok="NOT MET"; fi
	printf '  %-52s %8.3f  (%s %g)  %s\n' "$1" "$2" "$3" "$4" "$ok"
}
read -r r200 _ _ _ <"$out/churn200k.result"
read -r r2m _ _ b2m <"$out/churn2M.result"
read -r rc pc sc _ <"$out/containers.result"
echo "targets (medians above; CONTAINERS_BYTES: the containers recording's size to stay within):"
target "churn 2000000: whole record / heaptrack" "$r2m" "<=" 0.5
target "churn 200000: whole record / heaptrack" "$r200" "<=" 0.2
target "containers: whole record / heaptrack" "$rc" "<=" 0.2
target "containers: program under record / native" "$pc" "<=" 2
target "record -- true, a second apart (s)" "$(median <"$out/true.apart")" "<=" 0.1
target "churn 2000000: bytes per call before compression" "$b2m" "<=" 24
if [ -n "${CONTAINERS_BYTES:-}" ]; then target "containers: recording (MB)" "$(echo "$sc / 1000000" | bc -l)" "<=" "$(echo "$CONTAINERS_BYTES / 1000000" | bc -l)"; fi
