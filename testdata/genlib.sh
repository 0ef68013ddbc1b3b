# genlib.sh — shell functions shared by the fixture generators (gen.sh,
# gen-real.sh, gen-mixed.sh and heapgrow/, leaf/, mem/, deepstack/ and
# pipeline/ gen.sh), which source it.
# The probe functions want LIBC, TRACEFS and ADDED=(); record_until_no_loss
# wants MAX_TRIES and a lost_count (this one, or the generator's own).

die() { echo "${0##*/}: $*" >&2; exit 1; }

# need_root_and TOOL...: dies unless this runs as root (the generators add
# uprobes and open perf events) with every TOOL in PATH.
need_root_and() {
	[ "$(id -u)" = 0 ] || die "must run as root (uprobes, perf_event_open); try: sudo $0"
	local t
	for t in "$@"; do command -v "$t" >/dev/null || die "$t not found"; done
}

# The repository's root (this file is in its testdata/).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# note_machine: the lines of GENERATED that say what made a fixture
# besides its own tools: this checkout's commit, the kernel and glibc.
note_machine() {
	echo "faultline: $(cd "$ROOT" && git rev-parse HEAD 2>/dev/null || echo unknown)"
	echo "kernel: $(uname -srm)"
	echo "glibc:  $(ldd --version | head -1)"
}

# The recording machine's libc and dynamic loader, at the paths the
# recordings name and the symfs trees hold them.
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
LDSO=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2

# --- compiling -----------------------------------------------------------------
# FIXTURE_FLAGS: the flags heapgrow/, leaf/, mem/, deepstack/ and pipeline/
# compile their programs with (their GENERATED notes print them).
FIXTURE_FLAGS=(-O2 -g -fasynchronous-unwind-tables -Wall -Wextra -Werror)

# compile_in DIR COMPILER ARG...: runs COMPILER FIXTURE_FLAGS ARG... in DIR,
# showing the command, with DIR mapped to "." in the debug info so that the
# binary is the same wherever the checkout is.
compile_in() {
	local dir=$1 cc=$2
	shift 2
	(cd "$dir" && set -x && "$cc" "${FIXTURE_FLAGS[@]}" -ffile-prefix-map="$PWD"=. "$@")
}

# libc_fileoff SYMBOL: the file offset of a $LIBC symbol (what a uprobe
# names): its value mapped through the LOAD segment that holds it.
libc_fileoff() {
	local vaddr typ off va memsz
	vaddr=$((16#$(readelf -Ws "$LIBC" | awk -v s="$1" '$8 ~ "^" s "(@|$)" && !n++ { print $2 }')))
	while read -r typ off va _ _ memsz _; do
		if [ "$typ" = LOAD ] && ((vaddr >= va && vaddr < va + memsz)); then
			printf '0x%x' $((vaddr - va + off))
			return
		fi
	done < <(readelf -lW "$LIBC" | awk '$1 == "LOAD"')
	die "cannot find $1 in $LIBC"
}

# remove_group_probes GROUP EVENT...: removes each uprobe GROUP/EVENT that
# exists, through uprobe_events (for the generators that add their own
# probe group there).
remove_group_probes() {
	local group=$1 e
	shift
	for e in "$@"; do
		if [ -d "$TRACEFS/events/$group/$e" ]; then
			echo "-:$group/$e" >>"$TRACEFS/uprobe_events" || echo "${0##*/}: warning: could not remove probe $group/$e" >&2
		fi
	done
}

# --- perf probe's probe_libc group -------------------------------------------
# probe_libc:malloc and probe_libc:malloc__return are shared with other users
# of this machine, and so may be the calloc/realloc ones: each is created only
# when missing, and remove_added_probes removes, at exit, only those.
probe_exists() { [ -d "$TRACEFS/events/${1%%:*}/${1#*:}" ]; }
ensure_probe() { # event spec
	if probe_exists "$1"; then
		echo "== probe $1 exists: $(grep -E "^[pr]:${1/:/\/} " "$TRACEFS/uprobe_events" || true)"
	else
		echo "== adding probe $1: $2"
		perf probe -q -x "$LIBC" -a "$2"
		probe_exists "$1" || die "perf probe did not create $1 (see perf probe -l)"
		ADDED+=("$1")
	fi
}
remove_added_probes() {
	local p
	for p in "${ADDED[@]}"; do
		perf probe -q -d "$p" || echo "${0##*/}: warning: could not remove probe $p" >&2
	done
}

# ensure_libc_probes: every probe events_for names. probe_libc:malloc_hdr__return
# is the generators' own (a leftover from an interrupted run is reused and
# removed too).
ensure_libc_probes() {
	ensure_probe probe_libc:malloc 'malloc size=%di:u64'
	ensure_probe probe_libc:malloc__return 'malloc%return ptr=$retval'
	if probe_exists probe_libc:malloc_hdr__return; then ADDED+=(probe_libc:malloc_hdr__return); fi
	# perf 6.1 appends "__return" to a return probe's given name too.
	ensure_probe probe_libc:malloc_hdr__return 'probe_libc:malloc_hdr=malloc%return ptr=$retval hdr=-8($retval):u64'
	# calloc and realloc do not go through malloc (glibc 2.36). Probe the
	# __libc_* symbols: "calloc" also matches libc's internal calloc@plt.
	ensure_probe probe_libc:calloc 'probe_libc:calloc=__libc_calloc n=%di:u64 size=%si:u64'
	ensure_probe probe_libc:calloc__return 'probe_libc:calloc=__libc_calloc%return ptr=$retval'
	ensure_probe probe_libc:realloc 'probe_libc:realloc=__libc_realloc oldptr=%di:u64 size=%si:u64'
	ensure_probe probe_libc:realloc__return 'probe_libc:realloc=__libc_realloc%return ptr=$retval'
}

# events_for VARIANT: the -e arguments of a variant.
events_for() {
	case $1 in
	plain | pipe | z) echo "-e probe_libc:malloc -e probe_libc:malloc__return -e page-faults:u" ;;
	tp) echo "-e probe_libc:malloc -e probe_libc:malloc__return -e exceptions:page_fault_user" ;;
	hdr) echo "-e probe_libc:malloc -e probe_libc:malloc_hdr__return -e page-faults:u" ;;
	allocs) echo "-e probe_libc:malloc -e probe_libc:malloc__return -e probe_libc:calloc -e probe_libc:calloc__return -e probe_libc:realloc -e probe_libc:realloc__return -e page-faults:u" ;;
	esac
}

# --- GENERATED notes -----------------------------------------------------------
# note_commands HEADING COMMAND...: the block of a GENERATED note that lists
# the recording commands, one indented line each, then a blank line.
note_commands() {
	echo "$1"
	shift
	printf '  %s\n' "$@"
	echo
}

# note_file FILE: the GENERATED line that pins a recording: its name, size
# and full sha256.
note_file() { echo "${1##*/}: $(stat -c %s "$1") bytes, sha256 $(sha256sum "$1" | cut -c1-64)"; }

# buildid_of FILE: the GNU build ID of an ELF file (readelf -n).
buildid_of() { readelf -n "$1" 2>/dev/null | awk '/Build ID:/ { print $3; exit }'; }

# --- losses -------------------------------------------------------------------
# is_pipe FILE: pipe-mode recordings (*.pipe.data) are read by perf on stdin.
is_pipe() { [[ $1 == *.pipe.data ]]; }

lost_count() { # FILE -> number of samples lost (PERF_RECORD_LOST + LOST_SAMPLES)
	# perf report --stats would be simpler but perf 6.1 fails on pipe files
	# holding tracing data ("failed to process type"); perf script -D works.
	local f=$1
	if is_pipe "$f"; then perf script -D -i - <"$f"; else perf script -D -i "$f"; fi 2>/dev/null |
		awk '/PERF_RECORD_LOST: / { sub(/.*lost:/, ""); n += $1 }
		     /PERF_RECORD_LOST_SAMPLES: / { sub(/.*lost samples :/, ""); n += $1 }
		     END { print n + 0 }'
}

# lost_by_info FILE: samples lost, every event (LOST_SAMPLES, as perf report
# --stats), as `faultline info --json` of the faultline built at
# $WORK/faultline counts them; generators that record with faultline
# define lost_count with it.
lost_by_info() {
	"$WORK/faultline" info --json "$1" | python3 -c 'import json,sys; print(sum(e["lost"] for e in json.load(sys.stdin)["events"]))'
}

# symfs_install FILE...: copies each FILE (a binary a recording maps) into
# $TD/symfs at the path the recording names.
symfs_install() {
	local f
	for f in "$@"; do install -D -m 0755 "$f" "$TD/symfs$f"; done
}

# errors_on_failure COMMAND...: runs COMMAND with its standard error held
# back, shown only if COMMAND fails.
errors_on_failure() {
	local err rc=0
	err=$(mktemp)
	"$@" 2>"$err" || rc=$?
	[ "$rc" = 0 ] || cat "$err" >&2
	rm -f "$err"
	return "$rc"
}

# record_until_no_loss NAME FILE COMMAND...: runs COMMAND (which writes FILE)
# again until lost_count says FILE lost nothing, at most MAX_TRIES times.
record_until_no_loss() {
	local name=$1 f=$2 try lost
	shift 2
	for ((try = 1; try <= MAX_TRIES; try++)); do
		rm -f "$f"
		"$@" || die "recording $name failed"
		lost=$(lost_count "$f")
		[ "$lost" = 0 ] && break
		echo "${0##*/}: $name lost $lost samples (try $try of $MAX_TRIES)" >&2
	done
	[ "$lost" = 0 ] || die "$name still lost $lost samples after $MAX_TRIES tries"
	chmod 0644 "$f"
}
