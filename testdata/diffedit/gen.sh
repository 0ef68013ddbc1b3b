#!/usr/bin/env bash
# gen.sh — the exact generator of faultline diff's edit fixtures
# (testdata/diffedit) and of the measurement in GENERATED.
#
#   sudo testdata/diffedit/gen.sh            # needs root, gcc, go
#
# It builds src/ci.c and ten behaviour-preserving edits of it (edit below:
# lines inserted or removed above and between the allocation calls,
# functions reordered, a function moved to another file, the file renamed,
# locals renamed), records three runs of the original (base1..3) and one of
# each edit with `faultline record`, plus the original and the "moved" edit
# with their table grown 4× (argument 4), and analyzes each to a profile.
# Then it runs `faultline diff` of every edit and growth against base1 and
# against base1 base2 base3 and writes the exit codes and verdicts to
# GENERATED (0 wanted for the edits, 1 naming make_table for the growth).
#
# Kept in this directory: every profile, which
# attribute/diff/edit_test.go diffs without root.
set -euo pipefail
export LC_ALL=C

TD=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$TD/../.." && pwd)
RUN=/tmp/faultline-diffedit      # fixed run path, recorded in every MMAP2

die() { echo "gen.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (faultline record); try: sudo $0"
for t in gcc go; do command -v $t >/dev/null || die "$t not found"; done

WORK=$(mktemp -d /tmp/faultline-diffedit-gen.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
(cd "$ROOT" && go build -o "$WORK/faultline" ./cmd/faultline)
FL=$WORK/faultline
rm -rf "$RUN" && mkdir -p "$RUN/bin" "$RUN/profiles"

# block BEGIN END FILE: the lines from marker BEGIN to marker END
block() { sed -n "/$1/,/$2/p" "$3"; }
# noblock BEGIN END FILE: FILE without them
noblock() { sed "/$1/,/$2/d" "$3"; }

# edit NAME: writes the edited sources into $WORK/v/NAME (ci.c unless said)
edit() {
	local d=$WORK/v/$1 s=$TD/src/ci.c
	mkdir -p "$d"
	case $1 in
	orig) cp "$s" "$d/ci.c" ;;
	top-comment) # a comment and a blank line above the first function
		sed '/EDIT-TOP/a\/* a comment added above everything */\n' "$s" >"$d/ci.c" ;;
	top-lines) # three lines above the first function
		sed '/EDIT-TOP/a\#define UNUSED_ONE 1\n#define UNUSED_TWO 2\n#define UNUSED_THREE 3' "$s" >"$d/ci.c" ;;
	removed) # the five-line header comment cut to one line
		sed '1,5c\/* ci.c, its header comment cut to one line */' "$s" >"$d/ci.c" ;;
	in-function) # two lines inside make_nodes, above its malloc
		sed '/EDIT-IN-NODES/a\		/* two lines added\n		 * inside the loop */' "$s" >"$d/ci.c" ;;
	between) # four lines between make_rows's two mallocs
		sed '/EDIT-BETWEEN/a\	/*\n	 * four lines added between\n	 * two allocation calls\n	 */' "$s" >"$d/ci.c" ;;
	reordered) # make_table and make_rows swapped, make_rows above make_nodes
		{
			sed '/EDIT-NODES-BEGIN/,$d' "$s"
			block EDIT-ROWS-BEGIN EDIT-ROWS-END "$s"
			echo
			block EDIT-TABLE-BEGIN EDIT-TABLE-END "$s"
			echo
			block EDIT-NODES-BEGIN EDIT-NODES-END "$s"
			sed '1,/EDIT-ROWS-END/d' "$s"
		} >"$d/ci.c" ;;
	moved) # make_rows moved to a file of its own
		{
			echo '#include <stdlib.h>'
			echo '#include <string.h>'
			echo 'void *must(void *p);'
			block EDIT-ROWS-BEGIN EDIT-ROWS-END "$s" | sed 's/^static char \*\*make_rows/char **make_rows/'
		} >"$d/rows.c"
		noblock EDIT-ROWS-BEGIN EDIT-ROWS-END "$s" |
			sed 's/^static void \*must/void *must/; /EDIT-TOP/a\char **make_rows(int rows, size_t len);' >"$d/ci.c" ;;
	renamed) # the file renamed
		cp "$s" "$d/gate.c" ;;
	locals) # locals renamed: the allocation lines get longer
		sed 's/\btable\b/the_big_table/g; s/\bindex\b/row_index/g; s/\bbuf\b/growing_buffer/g' "$s" >"$d/ci.c" ;;
	helper) # a new function between make_nodes and make_table
		sed '/EDIT-NODES-END/a\static long __attribute__((unused)) count_nodes(const struct node *n)\n{\n	long c = 0;\n	for (; n != NULL; n = n->next)\n		c++;\n	return c;\n}' "$s" >"$d/ci.c" ;;
	*) die "unknown edit $1" ;;
	esac
	(cd "$d" && set -x && gcc -O2 -g -ffile-prefix-map="$d"=. -o "$RUN/bin/$1" ./*.c)
}

EDITS=(top-comment top-lines removed in-function between reordered moved renamed locals helper)
# record NAME BIN ARGS...: record and analyze to $RUN/profiles/NAME.pb.gz
record() {
	local name=$1
	shift
	"$FL" record -q -o "$WORK/$name.data" -- "$@" >/dev/null
	"$FL" analyze -q -o "$RUN/profiles/$name.pb.gz" "$WORK/$name.data"
	rm -f "$WORK/$name.data"
}
# diffline NEW BASES...: faultline diff's exit status and verdict
diffline() {
	local new=$1 code=0 args=()
	shift
	for b in "$@"; do args+=("$RUN/profiles/$b.pb.gz"); done
	[ $# -gt 1 ] && args+=(--)
	"$FL" diff "${args[@]}" "$RUN/profiles/$new.pb.gz" >"$WORK/diff.txt" 2>&1 || code=$?
	echo "exit $code: $(grep -m1 -E '^(OK|REGRESSION)' "$WORK/diff.txt" || head -1 "$WORK/diff.txt")"
	grep ' ! ' "$WORK/diff.txt" | sed 's/^/      /' || true
}

edit orig
for e in "${EDITS[@]}"; do edit "$e"; done
for i in 1 2 3; do record base$i "$RUN/bin/orig" 1; done
for e in "${EDITS[@]}"; do record "$e" "$RUN/bin/$e" 1; done
record grown "$RUN/bin/orig" 4
record moved-grown "$RUN/bin/moved" 4

{
	echo "Generated by testdata/diffedit/gen.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "kernel $(uname -r); $(gcc --version | head -1)"
	echo "faultline from $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && git diff --quiet HEAD -- . 2>/dev/null || echo ' with uncommitted changes')"
	echo
	echo "faultline diff against base1, then against base1 base2 base3:"
	for v in "${EDITS[@]}" grown moved-grown; do
		echo "  $v:"
		echo "    one:   $(diffline "$v" base1)"
		echo "    three: $(diffline "$v" base1 base2 base3)"
	done
} >"$WORK/GENERATED"
rm -f "$TD"/*.pb.gz
cp "$RUN"/profiles/*.pb.gz "$TD/"
cp "$WORK/GENERATED" "$TD/GENERATED"
cat "$TD/GENERATED"
