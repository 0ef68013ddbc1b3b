#!/usr/bin/env python3
"""check_mixed.py — an independent attributor for testdata/mixed recordings.

    testdata/check_mixed.py [--symfs testdata/symfs] mixed/VARIANT.script.txt > mixed/VARIANT.expect.tsv

Reads the text of

    perf script -i F --no-inline --show-mmap-events -F comm,pid,tid,time,event,addr,ip,sym,dso,trace

(perf's decoder and unwinder, not faultline's) of a recording in faultline
record's shape: range events without stacks (malloc entry, malloc return with
ptr/hdr and __probe_ret_ip, free, page faults with -d addresses) and the
malloc entry probe opened again with a DWARF stack for some calls. It:

  * pairs each stack sample with the call it belongs to: the open call of its
    thread with the same size, or the next entry of that thread (perf prints
    a stack sample with its callchain on the following lines; a range sample
    has none);
  * names a call's leaf from the return probe's __probe_ret_ip, the address
    the allocator returns to, with addr2line on the symfs copy of the binary
    at ret_ip - 1 (the call instruction), outermost function of the inline
    chain; for a stacked call the caller is the frame above the leaf in
    perf's callchain;
  * attributes faults as faultline does: a fault inside a call (between entry
    and return on its thread) goes to the returned chunk when its address is
    in [ptr-16, ptr+chunksize) (the chunk and the header malloc writes right
    after it; chunksize = hdr & ~7), else to the live allocation holding it,
    else, when it lies in [heap] or anonymous memory (the MMAP records, at
    the return), to the returned chunk too (the allocator's own memory),
    else it is unattributed; after return, to the live
    allocation whose [ptr-8, ptr+size) (mmap'd: [ptr-16, ...)) holds it;
    free ends an allocation;
  * splits the allocations without a stack over the callers sampled at the
    same leaf in proportion to the sampled calls (largest remainder).

Output (tab-separated): one row per (leaf, caller, stack kind) with allocs,
faults and bytes, where stack kind is sampled (the call had its own stack),
inferred (split as above) or leaf (no stack sampled at that leaf); then
`unattributed freed N` (faults in memory freed and not reused) and
`unattributed other N`.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HEADER = re.compile(r"^\s*(?P<comm>\S+)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+(?P<time>\d+\.\d+):\s+(?P<event>\S+):\s*(?P<rest>.*)$")
FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+) (?P<sym>.*) \((?P<dso>[^()]*)\)$")
MMAP = re.compile(r"PERF_RECORD_MMAP2? (\d+)/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ [^\]]*\]: \S+ (.*)$")
EXE = "/tmp/faultline-fixtures/bin/mixed"
PIE_BASE = 0x555555554000  # launch turns ASLR off


def records(lines):
    rec = None
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        m = MMAP.search(line)
        if m:
            if rec:
                yield rec
            rec = None
            start = int(m.group(2), 16)
            yield {"event": "mmap", "tid": None, "pid": int(m.group(1)),
                   "map": (start, start + int(m.group(3), 16), m.group(4))}
            continue
        m = HEADER.match(line)
        if m:
            if rec:
                yield rec
            rec = {**m.groupdict(), "frames": []}
            continue
        f = FRAME.match(line)
        if f and rec:
            rec["frames"].append(f.groupdict())
    if rec:
        yield rec


def field(rest, name):
    m = re.search(r"\b" + name + r"=(0x[0-9a-f]+|\d+)", rest)
    return int(m.group(1), 0) if m else None


class Namer:
    def __init__(self, symfs):
        self.exe = os.path.join(symfs, EXE.lstrip("/"))
        self.cache = {}

    def leaf(self, ret_ip):
        if not PIE_BASE <= ret_ip < PIE_BASE + 0x100000:
            return "[outside %s]" % os.path.basename(EXE)
        if ret_ip not in self.cache:
            out = subprocess.run(["addr2line", "-f", "-i", "-e", self.exe, "%#x" % (ret_ip - 1 - PIE_BASE)],
                                 check=True, capture_output=True, text=True).stdout.split("\n")
            funcs = out[0::2][:-1] if len(out) > 1 else out
            self.cache[ret_ip] = [f for f in funcs if f][-1]
        return self.cache[ret_ip]


def analyse(lines, namer):
    open_call = {}      # tid -> call dict
    held_stack = {}     # tid -> (size, caller, leaf ip) of a stack sample waiting for its entry
    live = []           # [start, end, alloc]
    freed = []          # [start, end) freed and not reused
    allocs = []
    unattributed = collections.Counter()
    maps = []           # (start, end, name) of the recorded process, latest last

    def heap_or_anon(addr):
        for s, e, name in reversed(maps):
            if s <= addr < e:
                return name in ("[heap]", "//anon", "") or name.startswith(("/dev/zero", "/anon_hugepage", "/memfd:"))
        return False

    def by_address(addr):
        for s, e, a in reversed(live):
            if s <= addr < e:
                a["faults"] += 1
                return
        for s, e in freed:
            if s <= addr < e:
                unattributed["freed"] += 1
                return
        unattributed["other"] += 1

    for r in records(lines):
        ev, tid = r["event"], r["tid"]
        if ev == "mmap":
            maps.append(r["map"])
            continue
        if ev.endswith(":malloc"):
            size = field(r["rest"], "size")
            if r["frames"]:  # the stack instance
                caller = r["frames"][2]["sym"] if len(r["frames"]) > 2 else "[unknown]"
                c = open_call.get(tid)
                if c and c["stack"] is None and c["size"] == size:
                    c["stack"] = caller
                else:
                    held_stack[tid] = (size, caller)
                continue
            c = {"size": size, "stack": None, "pending": []}
            h = held_stack.pop(tid, None)
            if h and h[0] == size:
                c["stack"] = h[1]
            open_call[tid] = c
        elif ev.endswith(":malloc__return"):
            c = open_call.pop(tid, None)
            m = re.search(r"<- ([0-9a-f]+)\)", r["rest"])
            ptr, hdr = field(r["rest"], "ptr"), field(r["rest"], "hdr")
            if c is None or not ptr:
                continue
            a = {"leaf": namer.leaf(int(m.group(1), 16)), "ret": int(m.group(1), 16), "size": c["size"],
                 "stack": c["stack"], "faults": 0}
            allocs.append(a)
            start = ptr - 16 if hdr & 2 else ptr - 8
            end = ptr + c["size"]
            live[:] = [x for x in live if x[1] <= start or x[0] >= end]
            freed[:] = [x for x in freed if x[1] <= start or x[0] >= end]
            live.append([start, end, a])
            chunk_end = ptr + (hdr & ~7 if hdr is not None and (hdr & ~7) >= c["size"] + 8
                               else max(32, (c["size"] + 8 + 15) & ~15))
            for addr in c["pending"]:
                if ptr - 16 <= addr < chunk_end:
                    a["faults"] += 1
                elif any(s <= addr < e for s, e, _ in live):
                    by_address(addr)
                elif heap_or_anon(addr):
                    a["faults"] += 1
                else:
                    by_address(addr)
        elif ev.endswith(":free"):
            ptr = field(r["rest"], "ptr")
            for x in live:
                if x[2]["size"] is not None and x[0] in (ptr - 8, ptr - 16) and x[1] == ptr + x[2]["size"]:
                    live.remove(x)
                    freed.append((x[0], x[1]))
                    break
        elif ev.startswith("page-faults"):
            addr = int(r["rest"].split()[0], 16)
            if tid in open_call:
                open_call[tid]["pending"].append(addr)
            else:
                by_address(addr)
    return allocs, unattributed


def split(total, weights):
    """Largest-remainder split of total over weights (list of (key, w)),
    ties to the larger weight, then the earlier key."""
    W = sum(w for _, w in weights)
    shares = [(k, total * w // W, total * w % W, w, i) for i, (k, w) in enumerate(weights)]
    left = total - sum(s[1] for s in shares)
    order = sorted(range(len(shares)), key=lambda i: (-shares[i][2], -shares[i][3], shares[i][4]))
    out = {k: q for k, q, _, _, _ in shares}
    for i in order[:left]:
        out[shares[i][0]] += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--symfs", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "symfs"))
    ap.add_argument("script")
    args = ap.parse_args()
    with open(args.script) as f:
        allocs, unattributed = analyse(f, Namer(args.symfs))
    rows = collections.defaultdict(lambda: [0, 0, 0])
    weights = collections.defaultdict(collections.Counter)  # ret -> caller -> sampled calls
    first = {}
    for a in allocs:
        if a["stack"] is not None:
            weights[a["ret"]][a["stack"]] += 1
            first.setdefault((a["ret"], a["stack"]), len(first))
            row = rows[(a["leaf"], a["stack"], "sampled")]
            row[0] += 1
            row[1] += a["faults"]
            row[2] += a["size"]
    bare = collections.defaultdict(lambda: [0, 0, 0])  # (leaf, ret) -> totals of stackless calls
    for a in allocs:
        if a["stack"] is None:
            v = bare[(a["leaf"], a["ret"])]
            v[0] += 1
            v[1] += a["faults"]
            v[2] += a["size"]
    for (leaf, ret), v in bare.items():
        if not weights[ret]:
            row = rows[(leaf, "-", "leaf")]
            for i in range(3):
                row[i] += v[i]
            continue
        ws = sorted(weights[ret].items(), key=lambda kv: first[(ret, kv[0])])
        for i in range(3):
            for caller, n in split(v[i], ws).items():
                rows[(leaf, caller, "inferred")][i] += n
    print("# leaf\tcaller\tstack\tallocs\tfaults\tbytes   (check_mixed.py over %s)" % os.path.basename(args.script))
    for (leaf, caller, kind), (n, faults, size) in sorted(rows.items()):
        print("%s\t%s\t%s\t%d\t%d\t%d" % (leaf, caller, kind, n, faults, size))
    print("unattributed\tfreed\t%d" % unattributed["freed"])
    print("unattributed\tother\t%d" % unattributed["other"])


if __name__ == "__main__":
    sys.exit(main())
