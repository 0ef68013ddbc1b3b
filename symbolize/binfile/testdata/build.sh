#!/bin/sh
# Rebuilds binfile's fixture binaries and the addr2line golden files.
# Generated files: inline, inline.stripped, inline.debug, cxx.
# Used: gcc/g++ (Debian 12.2.0-14+deb12u1) 12.2.0, GNU binutils 2.40 (Debian 12).
set -eu
cd "$(dirname "$0")"
MAP="-ffile-prefix-map=$PWD=/fixture"
gcc -O2 -g -gdwarf-5 -fno-omit-frame-pointer $MAP -Wl,--build-id=sha1 -o inline inline.c inline2.c
g++ -O2 -g -gdwarf-4 $MAP -Wl,--build-id=sha1 -o cxx cxx.cc
# A Debian-style split: stripped binary + separate debug file with debuglink.
objcopy --only-keep-debug inline inline.debug
objcopy --strip-all --add-gnu-debuglink=inline.debug inline inline.stripped
# The addr2line golden files (*.addr2line) are written by the tests:
#   go test -run 'TestFixtureAgreesWithAddr2line|TestLibcAgreesWithAddr2line' -update .
# (libc's needs ../../testdata/symfs or FAULTLINE_TEST_SYMFS=/); each file's
# header holds the exact addr2line command.
