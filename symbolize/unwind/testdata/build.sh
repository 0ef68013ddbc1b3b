#!/bin/sh
# Rebuilds the unwinder fixtures. Run from this directory:
#   sh build.sh
# Generated with gcc 12.2.0 (Debian 12.2.0-14+deb12u1) and perf 6.1 on x86-64, as root
# (or with kernel.perf_event_paranoid <= 1).
#   prog         static, -O2 (no frame pointers, symbols kept), CFI in .eh_frame
#   prog.data    perf record --call-graph dwarf of ./prog, page faults only
#   prog.script  perf script's view of the same samples (perf 6.1's libdw
#                unwinder stops after the first frame on this static binary;
#                the test checks the stacks against prog.c's call structure)
set -eu
gcc -O2 -static -pthread -ffile-prefix-map="$(pwd)"=. -o prog prog.c
perf record -q -o prog.data --call-graph dwarf -e page-faults:u -c 1 -- ./prog
rm -f prog.data.old
chmod 644 prog.data
perf script -i prog.data --ns --no-inline -F comm,pid,tid,time,event,ip,sym,dso > prog.script
