#!/bin/sh
# Regenerates testdata/crafted (hostile inputs for the bounds tests; see README.md).
# Needs python3, zstd, gzip, gcc, objcopy. Run from anywhere; writes only into this directory.
set -eu
cd "$(dirname "$0")"
python3 gen.py

# ELF inputs from one tiny program (src/tiny.c), built like testdata/gen.sh builds its fixtures.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CFLAGS="-O2 -g -ffile-prefix-map=$PWD=."
gcc $CFLAGS -Wl,--build-id=none -o "$tmp/tiny" src/tiny.c
python3 gen.py dwarfbomb "$tmp/tiny"

# .gnu_debuglink pairs: stripped binaries naming a separate debug file, one
# pair with build IDs and one without (then only the CRC can vouch for it).
mkdir -p debuglink
for v in id noid; do
	bid=--build-id=sha1
	[ $v = noid ] && bid=--build-id=none
	gcc $CFLAGS -Wl,$bid -o "$tmp/prog-$v" src/tiny.c
	objcopy --only-keep-debug "$tmp/prog-$v" "debuglink/prog-$v.debug"
	objcopy --strip-debug --add-gnu-debuglink="debuglink/prog-$v.debug" "$tmp/prog-$v" "debuglink/prog-$v"
done
ls -l dwarfbomb.debug debuglink
