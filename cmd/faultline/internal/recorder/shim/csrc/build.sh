#!/bin/sh
# build.sh — builds the allocator shim that faultline embeds
# (libfaultline-shim.so, x86-64) from the C files and headers here and
# the entry stubs of the architecture (stubs-x86_64.S), deterministically:
# the same compiler gives the same bytes (no paths, no dates; the build id
# is a hash of the contents). The compiler's version is kept beside the
# object, in shim.gcc, because another compiler gives other bytes.
# -mprfchw lets begin() (ring.h) ask for ring lines to write (PREFETCHW): every
# x86-64 CPU of AMD has it, Intel's from Broadwell, and older ones run it
# as a no-op.
#
#   sh build.sh           rebuild libfaultline-shim.so and shim.gcc
#   sh build.sh --check   fail unless the committed object is what the
#                         sources build to with the committed compiler version
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-gcc}
out=$here/libfaultline-shim.so
# The parts, in a fixed order (the order is part of the bytes).
srcs="boot.c clock.c resolve.c ring.c writer.c alloc.c new.c mapcalls.c launch.c stubs-x86_64.S"
build() {
	# shellcheck disable=SC2086 # srcs is a list of plain names
	(cd "$here" && "$CC" -std=gnu11 -O2 -mprfchw -g0 -fPIC -shared -fvisibility=hidden \
		-fno-omit-frame-pointer -fno-stack-protector -fno-ident \
		-Wall -Wextra -Werror \
		-ffile-prefix-map="$here"=. \
		-Wl,--build-id=sha1 -Wl,-z,now -Wl,-z,relro -Wl,--hash-style=gnu \
		-Wl,-soname,libfaultline-shim.so -Wl,-e,fl_launch_start \
		-o "$1" $srcs -ldl)
}
version=$("$CC" --version | head -n1)
if [ "${1:-}" = "--check" ]; then
	want=$(cat "$here/shim.gcc")
	if [ "$version" != "$want" ]; then
		echo "build.sh: the committed shim was built by '$want'; this machine has '$version'. Rebuild with that compiler, or run sh $0 and commit both files" >&2
		exit 1
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/shim.so"
	if ! cmp -s "$tmp/shim.so" "$out"; then
		echo "build.sh: $out does not match its sources; run sh $0 and commit the object" >&2
		exit 1
	fi
	echo "build.sh: libfaultline-shim.so matches its sources ($version)"
	exit 0
fi
build "$out"
echo "$version" >"$here/shim.gcc"
