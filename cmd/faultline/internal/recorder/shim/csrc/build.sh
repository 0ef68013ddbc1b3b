#!/bin/sh
# build.sh — builds the allocator shim objects that faultline embeds
# (x86-64) from the C files and headers here and the entry stubs of the
# architecture (stubs-x86_64.S), deterministically:
# the same compiler gives the same bytes (no paths, no dates; the build id
# is a hash of the contents). The compiler's version is kept beside the
# object, in shim.gcc, because another compiler gives other bytes.
# -mprfchw lets begin() (ring.h) ask for ring lines to write (PREFETCHW): every
# x86-64 CPU of AMD has it, Intel's from Broadwell, and older ones run it
# as a no-op.
#
# One object per allocator family, so that a program sees only its own
# family's symbols (record preloads the one for the program's allocator):
#   libfaultline-shim.so           glibc's malloc and any other: the C
#                                  names, and libstdc++'s operator new
#   libfaultline-shim-FAMILY.so    jemalloc, tcmalloc, mimalloc: the C
#                                  names and the family's own entry points
#                                  (family.c, entrypoints.h)
#
#   sh build.sh           rebuild the objects and shim.gcc
#   sh build.sh --check   fail unless the committed objects are what the
#                         sources build to with the committed compiler version
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-gcc}
# The parts, in a fixed order (the order is part of the bytes).
common="boot.c clock.c resolve.c ring.c stack.c writer.c alloc.c mapcalls.c launch.c attach.c"
families="jemalloc tcmalloc mimalloc"
# build OUT SONAME [FAMILY]
build() {
	if [ -n "${3:-}" ]; then
		fam=$(echo "$3" | tr a-z A-Z)
		set -- "$1" "$2" -DFL_FAMILY=FL_FAM_$fam $common family.c stubs-x86_64.S
	else
		set -- "$1" "$2" $common new.c stubs-x86_64.S
	fi
	out=$1 soname=$2
	shift 2
	(cd "$here" && "$CC" -std=gnu11 -O2 -mprfchw -g0 -fPIC -shared -fvisibility=hidden \
		-fno-omit-frame-pointer -fno-stack-protector -fno-ident \
		-Wall -Wextra -Werror \
		-ffile-prefix-map="$here"=. \
		-Wl,--build-id=sha1 -Wl,-z,now -Wl,-z,relro -Wl,--hash-style=gnu \
		-Wl,-soname,"$soname" -Wl,-e,fl_launch_start \
		-o "$out" "$@" -ldl)
}
# all DIR builds every object into DIR.
all() {
	build "$1/libfaultline-shim.so" libfaultline-shim.so
	for f in $families; do
		build "$1/libfaultline-shim-$f.so" "libfaultline-shim-$f.so" "$f"
	done
}
version=$("$CC" --version | head -n1)
if [ "${1:-}" = "--check" ]; then
	want=$(cat "$here/shim.gcc")
	if [ "$version" != "$want" ]; then
		echo "build.sh: the committed shim was built by '$want'; this machine has '$version'. Rebuild with that compiler, or run sh $0 and commit the objects and shim.gcc" >&2
		exit 1
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	all "$tmp"
	for o in "$tmp"/*.so; do
		if ! cmp -s "$o" "$here/$(basename "$o")"; then
			echo "build.sh: $here/$(basename "$o") does not match its sources; run sh $0 and commit the objects" >&2
			exit 1
		fi
	done
	echo "build.sh: the shim objects match their sources ($version)"
	exit 0
fi
all "$here"
echo "$version" >"$here/shim.gcc"
