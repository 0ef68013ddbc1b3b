#!/usr/bin/env bash
# stackbench.sh — what complete stacks cost: two faultline builds (say,
# before and after a change to the stack copy) recording the same programs
# with their defaults, interleaved, RUNS times each (default 5).
#
#   sudo FAULTLINE_A=/tmp/old/faultline FAULTLINE_B=/tmp/new/faultline \
#       testdata/record/stackbench.sh [OUTDIR]
#
# Workloads:
#   sqlite3   the sqlite3 shell running 5000 INSERTs into a new database
#             (one statement each, autocommit; synchronous=OFF and the
#             journal in memory, so the disk does not set the time), from
#             a script generated here
#   deep      testdata/record/src/deep.c: allocations at every level of a
#             200-frame recursion in two threads
# For each build it prints the medians of the whole record command's wall
# time and CPU time (user + system, record and the program together), the
# recording's size, and analyze's count of stacks that reached the root
# frame (its "Stacks:" line), from the last run.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
RUNS=${RUNS:-5}
A=${FAULTLINE_A:?set FAULTLINE_A and FAULTLINE_B to the two faultline binaries}
B=${FAULTLINE_B:?set FAULTLINE_A and FAULTLINE_B to the two faultline binaries}
command -v sqlite3 >/dev/null || { echo "stackbench.sh: sqlite3 not installed (apt-get install sqlite3)" >&2; exit 1; }
sh "$here/gen.sh" "$out" >/dev/null

sql=$out/inserts.sql
{
	echo 'PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY;'
	echo 'CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, b BLOB);'
	echo 'CREATE INDEX ti ON t(name);'
	for i in $(seq 0 4999); do
		printf "INSERT INTO t(name, v, b) VALUES('name-%d-%s', %d.5, randomblob(%d));\n" \
			"$i" "$(printf '%*s' $((i % 50)) '' | tr ' ' x)" "$i" $((16 + i % 200))
	done
} >"$sql"

# bash's own `time`, to the millisecond: wall, user and system seconds of
# the command and its children.
TIMEFORMAT='%3R %3U %3S'

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run BUILD NAME CMD...: one recording, its wall and CPU seconds appended
# to OUT/NAME.BUILD.{wall,cpu}.
run() {
	local fl=$1 name=$2
	shift 2
	rm -f "$out/db.sqlite"
	{ time "$fl" record -q -o "$out/$name.data" -- "$@" <"$sql" >/dev/null; } 2>"$out/time"
	read -r wall user sys <"$out/time"
	echo "$wall" >>"$out/$name.wall"
	echo "$user + $sys" | bc >>"$out/$name.cpu"
}

bench() {
	local name=$1
	shift
	for b in A B; do : >"$out/$name.$b.wall"; : >"$out/$name.$b.cpu"; done
	for i in $(seq "$RUNS"); do
		run "$A" "$name.A" "$@"
		run "$B" "$name.B" "$@"
	done
	for b in A B; do
		fl=$A
		[ "$b" = B ] && fl=$B
		stacks=$("$fl" analyze -o /dev/null "$out/$name.$b.data" 2>&1 | awk '/^Stacks:/ && !n {print; n = 1}')
		printf '%-8s %s  wall %.3f s  cpu %.3f s  %.1f MB  %s\n' "$name" "$b" \
			"$(median <"$out/$name.$b.wall")" "$(median <"$out/$name.$b.cpu")" \
			"$(echo "$(stat -c %s "$out/$name.$b.data") / 1000000" | bc -l)" "$stacks"
	done
}

bench sqlite3 sqlite3 "$out/db.sqlite"
bench deep "$out/deep" 200 100
