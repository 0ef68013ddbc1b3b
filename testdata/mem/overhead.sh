#!/usr/bin/env bash
# overhead.sh — what recording the memory-map calls costs: the wall time of
# faultline record with them (the default) and without (--no-map-calls),
# interleaved, RUNS times each, on testdata/record/src/containers.cpp and on
# python3 building a dict and a list; prints every run, the medians and the
# machine's load average before and after.
#
#   sudo testdata/mem/overhead.sh [OUTDIR]     # RUNS=5 METHOD=inproc by default
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
RUNS=${RUNS:-5}
METHOD=${METHOD:-inproc}
[ "$(id -u)" = 0 ] || { echo "overhead.sh: run as root" >&2; exit 1; }
mkdir -p "$out"
(cd "$root" && go build -o "$out/faultline" ./cmd/faultline)
g++ -O2 -g -o "$out/containers" "$root/testdata/record/src/containers.cpp"
py=(python3 -c 'd = {i: str(i) for i in range(1000000)}; l = [x for x in range(2000000)]')
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for prog in containers python3; do
	if [ "$prog" = containers ]; then cmd=("$out/containers"); else cmd=("${py[@]}"); fi
	: >"$out/$prog.with" && : >"$out/$prog.without"
	for ((i = 1; i <= RUNS; i++)); do
		for v in with without; do
			flag=()
			[ "$v" = without ] && flag=(--no-map-calls)
			s=$(date +%s.%N)
			"$out/faultline" record -q --method "$METHOD" "${flag[@]}" -o "$out/$prog.$v.data" -- "${cmd[@]}" >/dev/null
			e=$(date +%s.%N)
			echo "$e - $s" | bc >>"$out/$prog.$v"
		done
	done
	w=$(median <"$out/$prog.with")
	wo=$(median <"$out/$prog.without")
	echo "$prog ($METHOD): with map calls $(tr '\n' ' ' <"$out/$prog.with")-> median $w s; without $(tr '\n' ' ' <"$out/$prog.without")-> median $wo s; added $(echo "scale=1; 100 * ($w - $wo) / $wo" | bc)%"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
