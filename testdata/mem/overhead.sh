#!/usr/bin/env bash
# overhead.sh — what recording the memory-map calls costs: the wall time of
# faultline record with them (the default) and without (--no-map-calls),
# interleaved, RUNS times each, on testdata/record/src/containers.cpp and on
# python3 building a dict and a list; prints every run's wall time, the
# medians of wall and of CPU time (user + sys of faultline and the program:
# less sensitive to a loaded machine), and the load average before and
# after.
#
#   sudo testdata/mem/overhead.sh [OUTDIR]     # RUNS=5 METHOD=inproc PROGS="containers python3"
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
TIMEFORMAT='%R %U %S'
for prog in ${PROGS:-containers python3}; do
	if [ "$prog" = containers ]; then cmd=("$out/containers"); else cmd=("${py[@]}"); fi
	: >"$out/$prog.with" && : >"$out/$prog.without"
	for ((i = 1; i <= RUNS; i++)); do
		for v in with without; do
			flag=()
			[ "$v" = without ] && flag=(--no-map-calls)
			t=$({ time "$out/faultline" record -q --method "$METHOD" "${flag[@]}" -o "$out/$prog.$v.data" -- "${cmd[@]}" >/dev/null 2>&1; } 2>&1)
			read -r real user sys <<<"$t"
			echo "$real" >>"$out/$prog.$v"
			echo "$user + $sys" | bc >>"$out/$prog.$v.cpu"
		done
	done
	w=$(median <"$out/$prog.with")
	wo=$(median <"$out/$prog.without")
	cw=$(median <"$out/$prog.with.cpu")
	cwo=$(median <"$out/$prog.without.cpu")
	echo "$prog ($METHOD): wall with map calls $(tr '\n' ' ' <"$out/$prog.with")-> median $w s; without $(tr '\n' ' ' <"$out/$prog.without")-> median $wo s; added $(echo "scale=1; 100 * ($w - $wo) / $wo" | bc)%"
	echo "$prog ($METHOD): CPU with $(tr '\n' ' ' <"$out/$prog.with.cpu")-> median $cw s; without $(tr '\n' ' ' <"$out/$prog.without.cpu")-> median $cwo s; added $(echo "scale=1; 100 * ($cw - $cwo) / $cwo" | bc)%"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
