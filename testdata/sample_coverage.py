#!/usr/bin/env python3
"""sample_coverage.py — how many allocation sites would a 1-in-N stack sample miss?

    perf record -c 1 -e GRP:malloc -e GRP:malloc__return -- PROG   (range events, no stacks)
    perf script -F comm,pid,tid,cpu,event,trace | testdata/sample_coverage.py [--stack-min 4096] N...

Replays the recording's malloc calls as faultline record's stack events would
take them: every call of at least --stack-min bytes gets a stack; of the
smaller ones, each perf event instance (one per thread and CPU: inherited
per-CPU events count on their own) takes every N-th (the kernel's
sample_period counter, first sample at the N-th hit). A site is a leaf: the
return probe's __probe_ret_ip in one process. Prints, per N, the sites with
at least 64 calls and how many of them got no stack at all, and the share
of calls at sites without any stack (faultline analyze can only give those
their exact leaf, label stack=leaf).
"""
import argparse
import collections
import re
import sys

HEADER = re.compile(r"^\s*(\S+)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\S+):\s*(.*)$")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack-min", type=int, default=4096)
    ap.add_argument("N", type=int, nargs="+")
    args = ap.parse_args()
    calls, open_call = [], {}
    for line in sys.stdin:
        m = HEADER.match(line)
        if not m:
            continue
        comm, pid, tid, cpu, ev, rest = m.groups()
        if ev.endswith(":malloc"):
            open_call[tid] = (cpu, int(re.search(r"size=(\d+)", rest).group(1)))
        elif ev.endswith(":malloc__return") and tid in open_call:
            cpu, size = open_call.pop(tid)
            ret = re.search(r"<- ([0-9a-f]+)\)", rest).group(1)
            calls.append(((comm, pid, ret), tid, cpu, size))
    for n in args.N:
        counter, ncalls, nstacks = collections.Counter(), collections.Counter(), collections.Counter()
        for site, tid, cpu, size in calls:
            ncalls[site] += 1
            if size >= args.stack_min:
                nstacks[site] += 1
                continue
            counter[(tid, cpu)] += 1
            if counter[(tid, cpu)] % n == 0:
                nstacks[site] += 1
        busy = [s for s in ncalls if ncalls[s] >= 64]
        missed = sorted(ncalls[s] for s in busy if nstacks[s] == 0)
        bare = sum(ncalls[s] for s in ncalls if nstacks[s] == 0)
        print("N=%d: %d calls at %d sites; %d sites with >= 64 calls, %d of them without a stack (their calls: %s); "
              "%.2f%% of all calls at sites without a stack"
              % (n, len(calls), len(ncalls), len(busy), len(missed), missed, 100 * bare / max(1, len(calls))))


if __name__ == "__main__":
    sys.exit(main())
