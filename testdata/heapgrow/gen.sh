#!/usr/bin/env bash
# gen.sh — the exact generator of testdata/heapgrow (issue 11's recordings).
#
#   sudo testdata/heapgrow/gen.sh      # from anywhere; needs root, perf, gcc, g++
#
# What it does, in order (README.md explains every output):
#  1. compiles src/heapgrow.c, src/containers.cpp and ../src/launch.c with
#     pinned flags and installs them in the fixed run directory $BIN (the
#     recordings name these absolute paths);
#  2. adds its own uprobes, group $GROUP (malloc's entry with the size, its
#     return with the pointer and the chunk header), removed at exit;
#  3. records each program through the launcher (THP off, ASLR off) with
#     perf: a small DWARF stack copy on the malloc entry only (enough to
#     reach the allocating function), no stacks on returns and faults, -z;
#     a recording that lost samples is made again;
#  4. copies the binaries the allocation stacks pass through into symfs/ at
#     their recorded paths, and writes GENERATED.
#
# Idempotent: *.data, symfs/ and GENERATED are rewritten; src/ and this
# script are never touched.
set -euo pipefail
export LC_ALL=C

TD=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../genlib.sh
. "$TD/../genlib.sh"
BIN=/tmp/faultline-heapgrow/bin
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
LIBSTDCXX=$(readlink -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
LDSO=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
GROUP=fl_heapgrow
MAX_TRIES=5
# Stack bytes copied per malloc entry. heapgrow makes 100000 calls: 256
# bytes reach many_small and main and keep the file at ~2 MB with -z.
# containers' stacks pass through operator new and the inlined std::map
# and std::vector code: 2048 bytes reach main.
STACK_heapgrow=256
STACK_containers=2048

[ "$(id -u)" = 0 ] || die "must run as root (uprobes, perf record -c 1); try: sudo $0"
for t in perf gcc g++ readelf; do command -v $t >/dev/null || die "$t not found"; done
TRACEFS=/sys/kernel/tracing
[ -d "$TRACEFS/events" ] || die "tracefs not mounted at $TRACEFS"

# --- 1. compile ----------------------------------------------------------------
WORK=$(mktemp -d /tmp/faultline-heapgrow-gen.XXXXXX)
ADDED=0
cleanup() {
	if [ "$ADDED" = 1 ]; then
		for e in malloc__return malloc; do
			if [ -d "$TRACEFS/events/$GROUP/$e" ]; then
				echo "-:$GROUP/$e" >>"$TRACEFS/uprobe_events" || echo "gen.sh: warning: could not remove probe $GROUP/$e" >&2
			fi
		done
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
FLAGS=(-O2 -g -fasynchronous-unwind-tables -Wall -Wextra -Werror)
(
	cd "$TD/src"
	set -x
	gcc "${FLAGS[@]}" -ffile-prefix-map="$TD/src"=. -o "$WORK/heapgrow" heapgrow.c
	g++ "${FLAGS[@]}" -ffile-prefix-map="$TD/src"=. -o "$WORK/containers" containers.cpp
	cd "$TD/../src"
	gcc "${FLAGS[@]}" -ffile-prefix-map="$PWD"=. -static -o "$WORK/launch" launch.c
)
mkdir -p "$BIN"
for b in launch heapgrow containers; do install -m 0755 "$WORK/$b" "$BIN/$b"; done

# --- 2. probes -------------------------------------------------------------------
# Written to uprobe_events directly: perf probe 6.1 refuses an event name
# that exists in any group (other users' malloc probes), and appends
# __return to a return probe's name itself.
if [ -d "$TRACEFS/events/$GROUP" ]; then
	die "probe group $GROUP exists (a leftover?): remove it with: echo '-:$GROUP/malloc' >> $TRACEFS/uprobe_events (and malloc__return)"
fi
# malloc's file offset: its symbol value mapped through the LOAD segment
# that holds it.
MALLOC_OFF=
vaddr=$((16#$(readelf -Ws "$LIBC" | awk '$8 ~ /^malloc(@|$)/ && !n++ { print $2 }')))
while read -r typ off va _ _ memsz _; do
	if [ "$typ" = LOAD ] && ((vaddr >= va && vaddr < va + memsz)); then
		MALLOC_OFF=$(printf '0x%x' $((vaddr - va + off)))
		break
	fi
done < <(readelf -lW "$LIBC" | awk '$1 == "LOAD"')
[ -n "$MALLOC_OFF" ] || die "cannot find malloc in $LIBC"
ADDED=1
echo "p:$GROUP/malloc $LIBC:$MALLOC_OFF size=%di:u64" >>"$TRACEFS/uprobe_events"
echo "r:$GROUP/malloc__return $LIBC:$MALLOC_OFF ptr=\$retval hdr=-8(\$retval):u64" >>"$TRACEFS/uprobe_events"

# --- 3. record ---------------------------------------------------------------------
CMDS=()
record() { # prog
	local prog=$1 stack f
	stack=STACK_$1
	f=$WORK/$prog.data
	local cmd=(perf record -q -m 4M -c 1 -d -z --call-graph "dwarf,${!stack}"
		-e "$GROUP:malloc" -e "$GROUP:malloc__return/call-graph=no/" -e "page-faults/call-graph=no/u"
		-o "$f" -- "$BIN/launch" "$BIN/$prog")
	run() { (set -x && "${cmd[@]}"); }
	record_until_no_loss "$prog" "$f" run
	install -m 0644 "$f" "$TD/$prog.data"
	CMDS+=("${cmd[*]/$f/$prog.data}")
}
record heapgrow
record containers

# --- 4. symfs and GENERATED -----------------------------------------------------------
# Git stores libc and ld.so once: they are the same files as testdata/symfs's
# when the machine's libc is the same build.
rm -rf "$TD/symfs"
for b in launch heapgrow containers; do install -D -m 0755 "$BIN/$b" "$TD/symfs$BIN/$b"; done
install -D -m 0755 "$LIBC" "$TD/symfs$LIBC"
install -D -m 0755 "$LDSO" "$TD/symfs$LDSO"
install -D -m 0644 "$LIBSTDCXX" "$TD/symfs$LIBSTDCXX"
bid=$(buildid_of "$LIBC")
dbg=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
if [ -f "$dbg" ]; then install -D -m 0644 "$dbg" "$TD/symfs$dbg"; fi
{
	echo "generated by testdata/heapgrow/gen.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "gcc:    $(gcc --version | head -1)"
	echo "perf:   $(perf version)"
	echo "kernel: $(uname -srm)"
	echo "glibc:  $(ldd --version | head -1)"
	echo "flags:  ${FLAGS[*]} -ffile-prefix-map=\$SRC=. (cwd \$SRC=testdata/heapgrow/src; launch: testdata/src, -static)"
	echo "probes: $(grep "^[pr]:$GROUP/" "$TRACEFS/uprobe_events" | tr '\n' ';')"
	for b in launch heapgrow containers; do
		echo "$b: $BIN/$b, build id $(buildid_of "$BIN/$b")"
	done
	echo "libc:   $LIBC, build id $bid"
	echo "libstdc++: $LIBSTDCXX, build id $(buildid_of "$LIBSTDCXX")"
	echo
	note_commands "recording commands (cwd testdata/heapgrow):" "${CMDS[@]}"
	for prog in heapgrow containers; do
		note_file "$TD/$prog.data"
		perf report --stats -i "$TD/$prog.data" 2>/dev/null | grep -E "SAMPLE events|LOST" | sed 's/^ */  /'
	done
} >"$TD/GENERATED"
cat "$TD/GENERATED"
