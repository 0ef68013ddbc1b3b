#!/bin/sh
# Rebuilds the cfi fixtures. Run from this directory: sh build.sh
# Generated with gcc 12.2.0 (Debian 12.2.0-14+deb12u1) and GNU readelf 2.40.
#   frames                  CFI of its own functions in .debug_frame only
#                           (-fno-asynchronous-unwind-tables); crt code in .eh_frame
#   frames.readelf.txt      readelf --debug-dump=frames-interp frames
#   prog.readelf.txt.gz     the same for ../../unwind/testdata/prog (static glibc)
# The golden files can also be refreshed with: go test -run Golden -update
set -eu
gcc -O2 -g -gdwarf-4 -fno-asynchronous-unwind-tables -fno-unwind-tables \
	-ffile-prefix-map="$(pwd)"=. -o frames frames.c
readelf --debug-dump=frames-interp frames > frames.readelf.txt
readelf --debug-dump=frames-interp ../../unwind/testdata/prog | gzip -9n > prog.readelf.txt.gz
