#!/bin/sh
# Runs PROGRAM as a container runtime would, for record's tests of a
# process in a mount and PID namespace of its own (record -p from the
# host): a tmpfs mounted at ROOTDIR inside a new mount namespace (so the
# host never sees its files) gets PROGRAM under /srv and the libraries
# ldd names; the script pivot_roots into it, detaches the old root and
# execs /srv/PROGRAM as pid 1 of the new PID namespace. As root:
#
#   unshare --mount --pid --fork sh testdata/record/container.sh /tmp/ctr /tmp/progs/service 2 20000 1000 &
#   sudo faultline record -p "$(pgrep -x service)" --duration 2s
#
# As a user, rootless (a user namespace too), record run inside:
#
#   CONTAINER_FILES="/tmp/faultline /tmp/progs/sitesvc" unshare --user --map-root-user --mount --pid --fork \
#     sh testdata/record/container.sh /tmp/ctr /bin/sh -c 'cd /tmp && /srv/faultline record -- /srv/sitesvc once'
set -eu
R=$1
B=$2
shift 2
mount --make-rprivate /
mount -t tmpfs tmpfs "$R"
mkdir -p "$R/srv" "$R/proc" "$R/old" "$R/tmp"
chmod 1777 "$R/tmp" # as a container image's /tmp
# CONTAINER_FILES: more programs for /srv (with their libraries).
for f in "$B" ${CONTAINER_FILES:-}; do
	cp "$f" "$R/srv/"
	for l in $(ldd "$f" | grep -o '/[^ ]*'); do
		cp --parents -L "$l" "$R"
	done
done
N=$(basename "$B")
# The host's loader and umount, run before the old root is gone: the new
# root holds only PROGRAM's libraries.
ld=$(readlink -f /lib64/ld-linux-x86-64.so.2)
libs=/old$(dirname "$ld"):/old/usr/lib/x86_64-linux-gnu
um=/old$(command -v umount)
cd "$R"
mount -t proc proc proc
pivot_root . old
"/old$ld" --library-path "$libs" "$um" -l /old
exec "/srv/$N" "$@"
