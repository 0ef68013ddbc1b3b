#!/usr/bin/env python3
"""check_expect.py — check testdata/expect/expect.tsv against recordings.

    testdata/check_expect.py [-v] [--symfs testdata/symfs] RECORDING.data...

An independent, deliberately simple attributor built on `perf script`
(perf's own decoder and unwinder, not faultline's). For each recording it runs

    perf script -i F --no-inline --show-task-events \
        -F comm,pid,tid,time,event,addr,ip,sym,dso,trace

and walks the time-ordered output:

  * allocator entry (probe_libc:malloc, and in the "allocs" variant
    probe_libc:calloc and probe_libc:realloc): pushes size (calloc: n*size)
    and the allocation site, the symbol of the caller (callchain frame 1,
    physical frames only) on the thread's stack of open calls;
  * allocator return (probe_libc:<call>__return, or malloc_hdr__return, with
    ptr=): pops the call; the allocation [ptr, ptr+size) now exists in the
    process (the hdr= field, if recorded, gives IS_MMAPPED = bit 0x2);
  * fault (page-faults:u addr, or exceptions:page_fault_user address=): if the
    thread is inside an allocator call, the fault is counted as "in alloc"
    for the innermost one; otherwise it goes to the most recent
    allocation of the process whose range holds the address; a fault no
    allocation holds is "unattributed" and counted under the symbol of the
    fault's first user frame;
  * PERF_RECORD_FORK of a new process copies the parent's allocations;
    PERF_RECORD_COMM exec empties the process's allocations (new address
    space).

Every row of expect.tsv for the recording's program is compared with what
was observed; every observed allocation site inside a fixture binary must
have a row. Prints a table and exits 1 on any mismatch.

expect.tsv columns (tab-separated, '#' comments):
  prog     recorded program (basic, threads, forkexec)
  comm     process name when the faults happen (after exec: the new name)
  forked   0 = the process perf started, 1 = a forked child
  site     function that called the allocator (ELF symbol, inlined callers
           folded into it); for unprobed calls the function whose code
           faults on the block
  call     malloc | calloc | realloc | inherited (block of the parent,
           written by the child)
  size     bytes requested (calloc: n*size; realloc: the new size)
  count    number of calls seen by the probes at this site and size (0 for
           inherited)
  in_alloc page faults taken inside those calls (between entry and return
           probe)
  in_block of those, the ones faultline credits to the allocation: the
           address lies in [ptr-16, ptr+chunksize) -- the chunk and the
           header malloc writes right after it (the new top's size word when
           it splits the top chunk; chunksize = hdr & ~7 when recorded, else
           max(32, (size+8+15) & ~15)) -- or, outside any earlier allocation,
           in [heap] or anonymous memory (the allocator's own: sysmalloc's
           top, a thread arena's heap_info, tcache setup)
  faults   faults after return inside [ptr, ptr+size)
  flags    comma list: fast (size <= 120, fastbin/tcache), mmap (IS_MMAPPED
           chunk), zero (calloc, or memset before any other touch), not-malloc (calloc/realloc: invisible to the
           malloc probes), moved (realloc), cow, inline, reuse, exec-overlap

calloc and realloc rows are checked fully only in recordings that probe
them (the "allocs" variant). Elsewhere only `faults` is checked, as the
number of unattributed faults whose first user frame is `site` (the
fixtures arrange that no other unattributed fault has its IP there).
  note     free text
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE_DIR = "/tmp/faultline-fixtures/bin/"
ENTRY = {"probe_libc:malloc": "malloc", "probe_libc:calloc": "calloc", "probe_libc:realloc": "realloc"}

HEADER = re.compile(r"^(?P<comm>.+?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+\.\d+):\s+(?P<rest>.*)$")
FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+) (?P<sym>.*) \((?P<dso>[^()]*)\)$")
FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
COMM_EXEC = re.compile(r"PERF_RECORD_COMM exec: (.*):(\d+)/(\d+)")
MMAP = re.compile(r"PERF_RECORD_MMAP2? (-?\d+)/(-?\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ [^\]]*\]: \S+ (.*)$")


def chunk_size(size, hdr):
    """glibc x86-64: the chunk's size from its header, else request2size."""
    if hdr is not None and (hdr & ~7) >= size + 8:
        return hdr & ~7
    return max(32, (size + 8 + 15) & ~15)


def heap_or_anon(maps, addr):
    """Whether addr lies in [heap] or anonymous memory (latest mapping wins)."""
    for start, end, name in reversed(maps):
        if start <= addr < end:
            return name in ("[heap]", "//anon", "") or name.startswith(("/dev/zero", "/anon_hugepage", "/memfd:"))
    return False


class Alloc:
    __slots__ = ("ptr", "size", "key", "hdr")

    def __init__(self, ptr, size, key, hdr):
        self.ptr, self.size, self.key, self.hdr = ptr, size, key, hdr


def perf_script(path, symfs):
    cmd = ["perf"]
    if symfs:
        # Use only testdata's files: perf's own ~/.debug cache stays out.
        cmd += ["--buildid-dir", os.path.join(HERE, "buildid-cache")]
    cmd += ["script", "--no-inline", "--show-task-events", "--show-mmap-events",
            "-F", "comm,pid,tid,time,event,addr,ip,sym,dso,trace"]
    if symfs:
        cmd += ["--symfs", symfs]
    if path.endswith(".pipe.data"):
        cmd += ["-i", "-"]
        stdin = open(path, "rb")
    else:
        cmd += ["-i", path]
        stdin = subprocess.DEVNULL
    out = subprocess.run(cmd, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, check=True).stdout
    return out.decode("utf-8", "replace").splitlines()


def events(lines):
    """Yields (header dict, [frames]) for each sample or side-band line."""
    cur, frames = None, []
    for line in lines:
        if not line.strip():
            continue
        if line.startswith((" ", "\t")):
            m = FRAME.match(line)
            if m and cur is not None:
                frames.append((int(m["ip"], 16), m["sym"], m["dso"]))
            continue
        m = HEADER.match(line)
        if not m:
            continue
        if cur is not None:
            yield cur, frames
        cur, frames = m.groupdict(), []
    if cur is not None:
        yield cur, frames


def first_user_frame(frames):
    for f in frames:
        if f[2] != "[kernel.kallsyms]":
            return f
    return None


def analyse(path, symfs):
    allocs = collections.defaultdict(list)     # pid -> [Alloc] in allocation order
    open_calls = collections.defaultdict(list)  # tid -> stack of [call, size, key, in_alloc, dso]
    probed = set()                             # allocator calls this recording probes
    forked = {}                                # pid -> 0/1
    comm_of = {}
    maps = collections.defaultdict(list)       # pid -> [(start, end, name)]
    root = None
    obs = collections.defaultdict(lambda: {"count": 0, "in_alloc": 0, "in_block": 0, "faults": 0, "mmap": set()})
    unattributed = collections.Counter()
    nfaults = 0
    for h, frames in events(perf_script(path, symfs)):
        pid, tid, rest = int(h["pid"]), int(h["tid"]), h["rest"]
        if rest.startswith("PERF_RECORD_"):
            m = MMAP.search(rest)
            if m:
                start = int(m[3], 16)
                maps[int(m[1])].append((start, start + int(m[4], 16), m[5]))
            m = FORK.search(rest)
            if m:
                child, parent = int(m[1]), int(m[3])
                if child != parent:                 # a process, not a thread
                    allocs[child] = list(allocs[parent])
                    maps[child] = list(maps[parent])
                    forked[child] = 1
            m = COMM_EXEC.search(rest)
            if m:
                p = int(m[2])
                allocs[p] = []
                maps[p] = []
                comm_of[p] = m[1]
                if root is None:
                    root = p
            continue
        forked.setdefault(pid, 0)
        comm_of[pid] = h["comm"]
        ev, _, trace = rest.partition(": ")
        ev = ev.strip()
        proc = (comm_of[pid], forked[pid])
        if ev in ENTRY:
            call = ENTRY[ev]
            probed.add(call)
            if call == "calloc":
                m = re.search(r"n=(\d+) size=(\d+)", trace)
                size = int(m[1]) * int(m[2])
            else:
                size = int(re.search(r"size=(\d+)", trace)[1])
            site = frames[1][1] if len(frames) > 1 else "[unknown]"
            dso = frames[1][2] if len(frames) > 1 else ""
            open_calls[tid].append([call, size, proc + (site, call, size), [], dso])
        elif ev.startswith("probe_libc:") and ev.endswith("__return"):
            call = ev[len("probe_libc:"):-len("__return")]
            call = "malloc" if call == "malloc_hdr" else call
            stack = open_calls[tid]
            i = len(stack) - 1
            while i >= 0 and stack[i][0] != call:
                i -= 1
            m = re.search(r"ptr=0x([0-9a-f]+)", trace)
            if i < 0 or m is None:        # entry lost (or never probed)
                continue
            _, size, key, in_addrs, dso = stack[i]
            del stack[i:]
            hdr = re.search(r"hdr=(\d+)", trace)
            a = Alloc(int(m[1], 16), size, key, int(hdr[1]) if hdr else None)
            end = a.ptr + chunk_size(size, a.hdr)
            o = obs[key]
            o["count"] += 1
            o["in_alloc"] += len(in_addrs)
            o["in_block"] += sum(1 for x in in_addrs if a.ptr - 16 <= x < end or (
                not any(b.ptr <= x < b.ptr + b.size for b in allocs[pid]) and heap_or_anon(maps[pid], x)))
            allocs[pid].append(a)
            o["dso"] = dso
            if a.hdr is not None:
                o["mmap"].add(bool(a.hdr & 2))
        elif ev in ("page-faults:u", "exceptions:page_fault_user"):
            nfaults += 1
            if ev == "page-faults:u":
                addr = int(trace.split()[0], 16)
            else:
                addr = int(re.search(r"address=0x([0-9a-f]+)", trace)[1], 16)
            if open_calls[tid]:
                open_calls[tid][-1][3].append(addr)
                continue
            for a in reversed(allocs[pid]):
                if a.ptr <= addr < a.ptr + a.size:
                    if a.key[:2] != proc:          # block inherited through fork
                        k = proc + (a.key[2], "inherited", a.size)
                        obs[k]["dso"] = obs[a.key].get("dso", "")
                        obs[k]["faults"] += 1
                    else:
                        obs[a.key]["faults"] += 1
                    break
            else:
                f = first_user_frame(frames)
                unattributed[proc + (f[1] if f else "[unknown]", f[2] if f else "")] += 1
    return obs, unattributed, nfaults, probed


def load_expect(path):
    rows = []
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            f = line.split("\t")
            if f[0] == "prog":
                continue
            rows.append(dict(prog=f[0], comm=f[1], forked=int(f[2]), site=f[3], call=f[4],
                             size=int(f[5]), count=int(f[6]), in_alloc=int(f[7]),
                             in_block=int(f[8]), faults=int(f[9]), flags=set(filter(None, f[10].split(","))),
                             note=f[11] if len(f) > 11 else ""))
    return rows


def check(path, rows, symfs, verbose):
    prog = os.path.basename(path).split(".")[0]
    obs, unattr, nfaults, probed = analyse(path, symfs)
    bad = 0
    seen = set()
    print(f"{path}: {nfaults} faults")
    fmt = "  {:4} {:12} {:1} {:18} {:9} {:>8} {:>5} {:>8} {:>6}  {}"
    print(fmt.format("", "comm", "f", "site", "call", "size", "count", "in_alloc", "faults", "flags"))
    for r in rows:
        if r["prog"] != prog:
            continue
        key = (r["comm"], r["forked"], r["site"], r["call"], r["size"])
        if r["call"] in probed or r["call"] == "inherited":
            o = obs.get(key, {"count": 0, "in_alloc": 0, "in_block": 0, "faults": 0, "mmap": set()})
            got = (o["count"], o["in_alloc"], o["faults"], o["in_block"])
            seen.add(key)
            if "mmap" in r["flags"] and o["mmap"] == {False} or "mmap" not in r["flags"] and o["mmap"] == {True}:
                got += ("hdr says mmap=%s" % o["mmap"],)
        else:  # calloc/realloc in a recording that does not probe them
            got = (0, 0, unattr.get((r["comm"], r["forked"], r["site"], FIXTURE_DIR + r["comm"]), 0))
        want = (r["count"], r["in_alloc"], r["faults"], r["in_block"])
        if r["call"] not in probed and r["call"] != "inherited":
            got, want = ("-", "-") + got[2:3], ("-", "-", r["faults"])
        ok = got == want
        bad += not ok
        print(fmt.format("ok" if ok else "FAIL", r["comm"], r["forked"], r["site"], r["call"], r["size"],
                         got[0], got[1], got[2], ",".join(sorted(r["flags"])))
              + ("" if ok else f"   want count={want[0]} in_alloc={want[1]} faults={want[2]} in_block={want[3:]}"))
    for key, o in sorted(obs.items()):
        if key in seen or not o.get("dso", "").startswith(FIXTURE_DIR):
            if verbose and key not in seen:
                print("  (libc) {} count={} in_alloc={} faults={}".format(key, o["count"], o["in_alloc"], o["faults"]))
            continue
        bad += 1
        print("  EXTRA {} count={} in_alloc={} faults={}  (no row in expect.tsv)".format(
            key, o["count"], o["in_alloc"], o["faults"]))
    if verbose:
        for key, n in sorted(unattr.items()):
            print(f"  (unattributed) {key}: {n}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="also list libc-internal sites and unattributed faults")
    ap.add_argument("--symfs", help="pass --symfs DIR (e.g. testdata/symfs) and --buildid-dir testdata/buildid-cache to perf")
    ap.add_argument("--expect", default=os.path.join(HERE, "expect", "expect.tsv"))
    ap.add_argument("recordings", nargs="+")
    args = ap.parse_args()
    if args.symfs and not os.path.isdir(args.symfs):
        ap.error(f"--symfs {args.symfs}: no such directory")
    rows = load_expect(args.expect)
    bad = sum(check(p, rows, args.symfs, args.verbose) for p in args.recordings)
    print("FAIL: %d mismatches" % bad if bad else "all expectations hold")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
