#!/usr/bin/env bash
# gen.sh — the exact generator of faultline's perf fixtures.
#
#   sudo testdata/gen.sh            # from anywhere; needs root and perf
#
# What it does, in order (README.md explains every output):
#  1. compiles testdata/src/*.c with pinned flags and installs the binaries
#     in the fixed run directory $BIN (recordings name these absolute paths);
#  2. makes sure the uprobes it needs exist on libc's malloc, calloc and
#     realloc, creating the missing ones (and only removing, at exit, the
#     ones it created);
#  3. records every fixture program in every variant (plain, pipe, z, tp,
#     hdr, allocs) through the launcher (THP off, ASLR off), retrying a
#     recording that lost samples;
#  4. writes the perf script reference texts of each recording (with inline
#     frames, perf's default; with --no-inline; side-band records only);
#  5. copies every binary the recordings reference into testdata/symfs at its
#     recorded path, with the separate debug files, and the vdso and a
#     kallsyms subset into a perf-style build-id cache (testdata/buildid-cache);
#  6. writes testdata/GENERATED (date, tool versions, build IDs, file list)
#     and prints what it wrote.
#
# Idempotent: generated directories (perf/, symfs/, buildid-cache/) are
# rebuilt from scratch on every run; src/, expect/ and the scripts are never
# touched. Recordings differ between runs only in timestamps, pids and
# whatever the kernel does differently (see README.md).
set -euo pipefail
export LC_ALL=C

TD=$(cd "$(dirname "$0")" && pwd)
BIN=/tmp/faultline-fixtures/bin        # fixed run path, recorded in every MMAP2
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
TRACEFS=/sys/kernel/tracing
PROGS=(basic threads forkexec)        # recorded programs (forkexec execs exectarget)
VARIANTS=(plain pipe z tp hdr allocs)
SCRIPT_FIELDS=comm,pid,tid,time,event,addr,ip,sym,dso,trace
MAX_TRIES=5
# Per-CPU ring buffer. perf's default (512 KiB for root) lost 15-209 of ~640
# samples of basic with -z on every try (compression slows the reader);
# 4 MiB lost none in 6 tries, so every variant uses it.
MMAP_SIZE=4M

# shellcheck source=genlib.sh
. "$TD/genlib.sh"

# --- preconditions -----------------------------------------------------------
[ "$(id -u)" = 0 ] || die "must run as root (uprobes, page-fault tracepoint, perf record -c 1); try: sudo $0"
command -v perf >/dev/null || die "perf not found; install linux-perf (Debian: apt-get install linux-perf)"
command -v gcc >/dev/null || die "gcc not found"
command -v readelf >/dev/null || die "readelf (binutils) not found"
[ -f "$LIBC" ] || die "$LIBC not found (this generator is for x86-64 Debian 12)"
[ -d "$TRACEFS/events" ] || [ -d /sys/kernel/debug/tracing/events ] || die "tracefs not mounted at $TRACEFS (mount -t tracefs nodev $TRACEFS)"
[ -d "$TRACEFS/events" ] || TRACEFS=/sys/kernel/debug/tracing
[ -d "$TRACEFS/events/exceptions/page_fault_user" ] || die "no exceptions:page_fault_user tracepoint in this kernel"

# --- 1. compile ----------------------------------------------------------------
# -O2 -g without frame pointers (gcc's default at -O2): the normal case, so
# faultline's CFI unwinder is really exercised. -ffile-prefix-map keeps
# DW_AT_comp_dir and file names independent of where the repo is checked out.
SRC=$TD/src
BUILD=$(mktemp -d /tmp/faultline-fixtures-build.XXXXXX)
trap 'rm -rf "$BUILD"' EXIT
CC=gcc
CFLAGS=(-O2 -g -fasynchronous-unwind-tables -ffile-prefix-map="$SRC"=. -Wall -Wextra -Werror)
echo "== compiling with $($CC --version | head -1)"
(
	cd "$SRC"
	set -x
	$CC "${CFLAGS[@]}" -static -o "$BUILD/launch" launch.c
	$CC "${CFLAGS[@]}" -o "$BUILD/basic" basic.c
	$CC "${CFLAGS[@]}" -pthread -o "$BUILD/threads" threads.c
	$CC "${CFLAGS[@]}" -o "$BUILD/forkexec" forkexec.c
	$CC "${CFLAGS[@]}" -o "$BUILD/exectarget" exectarget.c
)
mkdir -p "$BIN"
for b in launch basic threads forkexec exectarget; do
	install -m 0755 "$BUILD/$b" "$BIN/$b"
done

# --- 2. probes ---------------------------------------------------------------
# (genlib.sh: the shared probe_libc probes are created only when missing and
# only those are removed at exit.)
ADDED=()
cleanup() {
	remove_added_probes
	rm -rf "$BUILD"
}
trap cleanup EXIT
ensure_libc_probes

# --- 3. record -----------------------------------------------------------------
OUT=$TD/perf
rm -rf "$OUT" "$TD/symfs" "$TD/buildid-cache"
mkdir -p "$OUT"


RECORD_CMDS=()
record() { # prog variant
	local prog=$1 v=$2 f="$OUT/$1.$2.data"
	# shellcheck disable=SC2046
	local base=(perf record -m "$MMAP_SIZE" -c 1 -d --call-graph dwarf $(events_for "$v"))
	local cmd
	case $v in
	pipe) cmd="${base[*]} -o - -- $BIN/launch $BIN/$prog > $f" ;;
	z) cmd="${base[*]} -z -o $f -- $BIN/launch $BIN/$prog" ;;
	*) cmd="${base[*]} -o $f -- $BIN/launch $BIN/$prog" ;;
	esac
	run() {
		echo "== $cmd"
		case $v in
		pipe) "${base[@]}" -o - -- "$BIN/launch" "$BIN/$prog" >"$f" ;;
		z) "${base[@]}" -z -o "$f" -- "$BIN/launch" "$BIN/$prog" ;;
		*) "${base[@]}" -o "$f" -- "$BIN/launch" "$BIN/$prog" ;;
		esac
	}
	record_until_no_loss "$prog/$v" "$f" errors_on_failure run
	RECORD_CMDS+=("$cmd")
}

for prog in "${PROGS[@]}"; do
	for v in "${VARIANTS[@]}"; do
		record "$prog" "$v"
	done
done

# --- 4. reference text ---------------------------------------------------------
# perf complains that 'trace' is not valid for the software event and
# 'addr' (etc.) for others; those notes are dropped, anything else is shown.
script() { # FILE OUT [extra perf script args]
	local f=$1 o=$2
	shift 2
	if is_pipe "$f"; then
		perf script -i - -F "$SCRIPT_FIELDS" "$@" <"$f" >"$o" 2>"$BUILD/script.err"
	else
		perf script -i "$f" -F "$SCRIPT_FIELDS" "$@" >"$o" 2>"$BUILD/script.err"
	fi
	grep -v -e "not valid for .* events. Ignoring." "$BUILD/script.err" >&2 || true
	chmod 0644 "$o"
}
for f in "$OUT"/*.data; do
	echo "== perf script $f"
	script "$f" "${f%.data}.script.txt"
	script "$f" "${f%.data}.noinline.script.txt" --no-inline
	# Side-band records only (COMM, FORK, EXIT, MMAP2, LOST...), for decoder tests.
	script "$f" "${f%.data}.sideband.tmp" --no-inline --show-task-events --show-mmap-events --show-lost-events
	grep -F 'PERF_RECORD_' "${f%.data}.sideband.tmp" >"${f%.data}.sideband.txt" || true
	rm -f "${f%.data}.sideband.tmp"
	chmod 0644 "${f%.data}.sideband.txt"
done

# --- 5. symfs and build-id cache -----------------------------------------------
declare -A SEEN=()
# Build IDs come from the file-mode recordings with a HEADER_BUILD_ID:
# perf 6.1 fails on pipe files ("failed to process type") and -z files have
# no BUILD_ID feature (perf buildid-list prints their paths without IDs).
for f in "$OUT"/*.data; do
	case $f in *.pipe.data | *.z.data) continue ;; esac
	perf buildid-list -i "$f"
done | awk 'NF == 2' | sort -u >"$BUILD/buildids"
VDSO_BID= KERNEL_BID=
while read -r bid path; do
	case $path in
	"[vdso]") VDSO_BID=$bid; continue ;;
	"[kernel.kallsyms]") KERNEL_BID=$bid; continue ;;
	"["*) continue ;;
	esac
	[ -n "${SEEN[$path]:-}" ] && continue
	SEEN[$path]=1
	[ -f "$path" ] || die "recording references $path, which is gone"
	have=$(buildid_of "$path")
	[ "$have" = "$bid" ] || die "$path has build ID $have, recording says $bid"
	install -D -m 0644 "$path" "$TD/symfs$path"
	[ -x "$path" ] && chmod 0755 "$TD/symfs$path"
	dbg=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
	if [ -f "$dbg" ]; then install -D -m 0644 "$dbg" "$TD/symfs$dbg"; fi
done <"$BUILD/buildids"
if [ -n "$VDSO_BID" ]; then
	src=$HOME/.debug/[vdso]/$VDSO_BID/vdso
	[ -f "$src" ] || die "vdso $VDSO_BID not in perf's build-id cache ($src)"
	install -D -m 0644 "$src" "$TD/buildid-cache/[vdso]/$VDSO_BID/vdso"
	mkdir -p "$TD/buildid-cache/.build-id/${VDSO_BID:0:2}"
	ln -sfn "../../[vdso]/$VDSO_BID" "$TD/buildid-cache/.build-id/${VDSO_BID:0:2}/${VDSO_BID:2}"
fi

# Kernel: only the tp recordings have kernel frames (the tracepoint fires in
# the kernel's fault handler). Ship a subset of kallsyms: _text/_stext/_etext
# and every symbol the reference texts name, each followed by the next
# symbol so its end is right. perf needs --kallsyms FILE to use it together
# with --symfs (see README.md).
if [ -n "$KERNEL_BID" ]; then
	[ "$(perf buildid-list -k 2>/dev/null)" = "$KERNEL_BID" ] || die "recordings are of kernel $KERNEL_BID, running kernel differs; kallsyms would not match"
	ksyms=$(awk '/ \(\[kernel\.kallsyms\]\)$/ { print $2 }' "$OUT"/*.tp.script.txt | sort -u | grep -v '^\[unknown\]$' || true)
	kdir="$TD/buildid-cache/[kernel.kallsyms]/$KERNEL_BID"
	mkdir -p "$kdir" "$TD/buildid-cache/.build-id/${KERNEL_BID:0:2}"
	printf '%s\n' _text _stext _etext $ksyms |
		awk 'NR == FNR { want[$1] = 1; next }
			{ printed = next_too; if (next_too) print; next_too = 0 }
			want[$3] { if (!printed) print; next_too = 1 }' - /proc/kallsyms |
		sort -u >"$kdir/kallsyms"
	chmod 0644 "$kdir/kallsyms"
	ln -sfn "../../[kernel.kallsyms]/$KERNEL_BID" "$TD/buildid-cache/.build-id/${KERNEL_BID:0:2}/${KERNEL_BID:2}"
fi

# --- 6. provenance -------------------------------------------------------------
{
	echo "generated by testdata/gen.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "gcc:    $($CC --version | head -1)"
	echo "perf:   $(perf --version)"
	echo "kernel: $(uname -srm)"
	echo "glibc:  $(ldd --version | head -1)"
	echo "cflags: ${CFLAGS[*]/$SRC/\$SRC}  (launch: + -static, threads: + -pthread; cwd \$SRC=testdata/src)"
	echo "run path: $BIN (binaries launched as $BIN/launch $BIN/<prog>)"
	echo
	note_commands "recording commands:" "${RECORD_CMDS[@]/$TD/testdata}"
	echo "build IDs referenced (perf buildid-list):"
	sed 's/^/  /' "$BUILD/buildids"
	echo
	echo "files (bytes, sha256):"
	(cd "$TD" && find perf symfs buildid-cache -type f -print0 | sort -z | xargs -0 sha256sum |
		while read -r sum name; do printf '  %10d %s %s\n' "$(stat -c %s "$name")" "${sum:0:16}" "$name"; done)
} >"$TD/GENERATED"

echo
echo "== wrote:"
(cd "$TD" && find perf symfs buildid-cache GENERATED \( -type f -o -type l \) -print0 | sort -z | xargs -0 ls -la)
echo "total: $(du -sh --apparent-size "$TD/perf" "$TD/symfs" "$TD/buildid-cache" | awk '{print $1}' | paste -sd+ -) (perf + symfs + buildid-cache)"

# --- 7. recordings of faultline record's shape (range events + stack instances) ---
# gen-mixed.sh adds testdata/mixed and the mixed binary to the symfs rebuilt above.
"$TD/gen-mixed.sh"
