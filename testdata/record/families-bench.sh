#!/bin/bash
# families-bench.sh: what `faultline record` costs a program whose allocator
# is jemalloc, tcmalloc or mimalloc (linked, or in LD_PRELOAD), against the
# same program's glibc build under record and against heaptrack on the same
# binary. Builds testdata/alloc/src/alloc.c (c) and
# testdata/record/src/containers.cpp (cxx) into DIR, then runs, RUNS times
# (default 5), interleaved: for each family the linked and the preloaded
# program and the glibc build under record, then heaptrack on the first
# two, the families in an order that turns from run to run. Prints the
# medians of the wall times and their ratios.
#
#   testdata/record/families-bench.sh FAULTLINE DIR [RUNS]
#
# Needs libjemalloc-dev, libgoogle-perftools-dev, libmimalloc-dev,
# heaptrack, gcc and g++. Run it as the user to measure (root or not).
set -euo pipefail
FL=$(realpath "$1"); DIR=$(mkdir -p "$2" && cd "$2" && pwd); RUNS=${3:-5}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
L=/usr/lib/x86_64-linux-gnu
declare -A pre=([je]=$L/libjemalloc.so.2 [tc]=$L/libtcmalloc_minimal.so.4 [mi]=$L/libmimalloc.so.2)
declare -A lib=([je]=-ljemalloc [tc]=-ltcmalloc_minimal [mi]=-lmimalloc)
for p in c:gcc:$REPO/testdata/alloc/src/alloc.c cxx:g++:$REPO/testdata/record/src/containers.cpp; do
	n=${p%%:*} r=${p#*:}; cc=${r%%:*} src=${r#*:}
	$cc -O2 -g -pthread -o "$DIR/$n-glibc" "$src"
	for f in je tc mi; do $cc -O2 -g -pthread -o "$DIR/$n-$f" "$src" "${lib[$f]}"; done
done
cd "$DIR"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
declare -A T
fams=(je tc mi)
for run in $(seq "$RUNS"); do
	# The families' order turns with each run: the first recording after
	# heaptrack's runs is the slowest of a run, whichever program it is.
	order="${fams[*]:run%3} ${fams[*]:0:run%3}"
	for p in c cxx; do
		for f in $order; do
			T[$p-$f-linked-rec]+=" $(t "$FL" record -q -o o.data -- ./$p-$f)"
			T[$p-$f-preload-rec]+=" $(t env LD_PRELOAD=${pre[$f]} "$FL" record -q -o o.data -- ./$p-glibc)"
			T[$p-glibc-rec]+=" $(t "$FL" record -q -o o.data -- ./$p-glibc)"
		done
		for f in je tc mi; do
			T[$p-$f-linked-ht]+=" $(t heaptrack -o ht ./$p-$f)"
			T[$p-$f-preload-ht]+=" $(t env LD_PRELOAD=${pre[$f]} heaptrack -o ht ./$p-glibc)"
			rm -f ht*
		done
		sleep 1
	done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for p in c cxx; do
	g=$(med "${T[$p-glibc-rec]}")
	printf '%s glibc build under record: %.3f s\n' $p "$g"
	for f in je tc mi; do for m in linked preload; do
		r=$(med "${T[$p-$f-$m-rec]}") h=$(med "${T[$p-$f-$m-ht]}")
		printf '%s %s %-8s record %.3f s (%.2fx the glibc build)  heaptrack %.3f s (record %.2fx)\n' \
			$p $f $m "$r" "$(echo "$r/$g" | bc -l)" "$h" "$(echo "$r/$h" | bc -l)"
	done; done
done
