#!/bin/sh
# Builds the recorder's live-test and acceptance programs from
# testdata/record/src into OUTDIR (default: a new directory printed on
# stdout). Debian 12: gcc/g++ 12. -g for analyze's names, -O2 as a release
# build, -fno-omit-frame-pointer so perf's fallback unwinder agrees,
# -ffile-prefix-map for stable paths.
#
#   sh testdata/record/gen.sh /tmp/progs
#   sudo faultline record -o churn.data -- /tmp/progs/churn 3000000
#   sudo faultline record -o c1.data -- /tmp/progs/containers
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
CC=${CC:-cc}
CXX=${CXX:-c++}
flags="-g -O2 -fno-omit-frame-pointer -ffile-prefix-map=$here/src=/src"
$CC $flags -o "$out/churn" "$here/src/churn.c"
$CC $flags -o "$out/faults" "$here/src/faults.c"
$CC $flags -o "$out/rounds" "$here/src/rounds.c"
$CC $flags -o "$out/phases" "$here/src/phases.c"
$CXX $flags -pthread -o "$out/containers" "$here/src/containers.cpp"
$CC $flags -pthread -o "$out/lifecycle" "$here/src/lifecycle.c"
$CXX $flags -o "$out/cxxnew" "$here/src/cxxnew.cpp"
$CXX $flags -fPIC -shared -o "$out/libcxxplugin.so" "$here/src/cxxplugin.cpp"
$CXX $flags -fPIC -shared -static-libstdc++ -o "$out/libcxxplugin-static.so" "$here/src/cxxplugin.cpp"
$CC $flags -o "$out/dlopener" "$here/src/dlopener.c" -ldl
$CC $flags -pthread -o "$out/clocks" "$here/src/clocks.c"
$CC $flags -o "$out/resident" "$here/src/resident.c"
$CC $flags -o "$out/daemon" "$here/src/daemon.c"
$CC $flags -o "$out/unshimmed" "$here/src/unshimmed.c"
$CC $flags -pthread -o "$out/rawmaps" "$here/src/rawmaps.c"
$CC $flags -pthread -o "$out/service" "$here/src/service.c"
$CC $flags -pthread -o "$out/attachsvc" "$here/src/attachsvc.c" -ldl
# Static: record -p cannot inject into it (no loader), and says so. (ld
# warns that a static program's dlopen needs the same glibc at run time.)
$CC $flags -static -pthread -o "$out/attachsvc-static" "$here/src/attachsvc.c" -ldl 2>/dev/null
$CC $flags -pthread -o "$out/sitesvc" "$here/src/sitesvc.c"
$CC $flags -pthread -o "$out/stalestack" "$here/src/stalestack.c"
$CC $flags -pthread -o "$out/deep" "$here/src/deep.c"
$CC $flags -o "$out/otherstacks" "$here/src/otherstacks.c"
echo "$out"
