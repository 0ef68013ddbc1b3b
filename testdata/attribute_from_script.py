#!/usr/bin/env python3
"""attribute_from_script.py — per-site fault counts from `perf script` text.

    testdata/attribute_from_script.py [--symfs DIR] [--buildid-dir DIR] [-v] RECORDING.data
    testdata/attribute_from_script.py --text FILE.txt     (output of the perf command below)

An independent attributor for Debian's own binaries (testdata/gen-real.sh):
it reads only perf's decoding and unwinding of a recording,

    perf script -i F --ns --no-inline --show-task-events --show-mmap-events \
        -F comm,pid,tid,time,event,addr,ip,sym,dso,trace

(pipe files: -i - < F), and applies the semantics faultline's tracker
documents (attribute/tracker.go), re-implemented here from that description:

  * live allocation interval: [ptr-8, ptr+size), or [ptr-16, ptr+size) for an
    mmap'd chunk (hdr bit 0x2 when the return probe records hdr=, else an
    anonymous MMAP2 of the process starting at ptr-16 no earlier than the
    entry, among its 16 most recent ones); a new allocation evicts every
    live one it overlaps;
  * entry/return pairing per thread: an entry first abandons in-flight calls
    of the same kind on top of the thread's stack; a return pairs with the
    innermost in-flight call of its kind, abandoning the calls above it, and
    is refused (the call abandoned) when its __probe_ret_ip differs from the
    return address at entry; a return with nothing of its kind in flight is
    ignored. An abandoned call's faults are attributed by address alone;
  * faults during an allocator call on a thread wait for its return: inside
    [ptr-16, ptr+chunksize) (the chunk and the header malloc writes right
    after it; chunksize = hdr & ~7 when the return probe records hdr= and it
    is at least size+8, else glibc's request2size, max(32, (size+8+15) & ~15))
    they are credited to the new allocation; else to the live allocation
    holding their address; else, when the address lies in [heap] or
    anonymous memory (the mapping at the time of the return), to the new
    allocation too ("inside the allocator": its own heap/arena memory); else
    they are unattributed. Other faults go to the live allocation holding
    their address;
  * fork (a new process) copies the parent's live allocations (their faults
    count against the parent's site); exec and the exit of a process's main
    thread end its allocations; a thread's exit settles its calls in flight.

The site of an allocation is the allocation's return address, as
(dso, address relative to the dso's mapping: addr - start + pgoff):
__probe_ret_ip of the return probe (absolute, mapped with the MMAP2 records).
When that address lies in an allocator (operator new calling malloc), the
site is the first non-allocator caller of the entry stack perf unwound
(printed there as return address - 1, so +1 here), as faultline drops
allocator frames from allocation stacks (attribute/report.IsAllocator).

Output, tab-separated: one line per site

    site  DSO  RELADDR(hex)  FAULTS  ALLOCS  BYTES  COMM

and a summary line "total faults=N attributed=N inflight=N allocs=N
entries=N returns=N unpaired_entries=N unpaired_returns=N retip_mismatches=N
unknown_sites=N".
"""
import argparse
import bisect
import collections
import re
import subprocess
import sys

HEADER = re.compile(r"^(?P<comm>.+?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+)\.(?P<frac>\d+):\s+(?P<rest>.*)$")
FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+) (?P<sym>.*) \((?P<dso>[^()]*)\)$")
FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
EXIT = re.compile(r"PERF_RECORD_EXIT\((\d+):(\d+)\):\((\d+):(\d+)\)")
COMM_EXEC = re.compile(r"PERF_RECORD_COMM exec: (.*):(\d+)/(\d+)")
MMAP = re.compile(r"PERF_RECORD_MMAP2? (-?\d+)/(-?\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (?:0x)?([0-9a-f]+)[^\]]*\]: (\S+) (.*)$")
RETPROBE = re.compile(r"\(([0-9a-f]+) <- ([0-9a-f]+)\)")

# allocNames of attribute/analyze/events.go: the probed function's kind.
KINDS = {
    "malloc": "malloc", "__libc_malloc": "malloc", "__malloc": "malloc",
    "calloc": "calloc", "__libc_calloc": "calloc", "__calloc": "calloc",
    "realloc": "realloc", "__libc_realloc": "realloc", "__realloc": "realloc",
    "memalign": "memalign", "__libc_memalign": "memalign", "aligned_alloc": "memalign",
    "posix_memalign": "memalign", "__posix_memalign": "memalign", "valloc": "memalign",
    "__libc_valloc": "memalign", "pvalloc": "memalign", "__libc_pvalloc": "memalign",
}
# Functions whose frames are not allocation sites (report.IsAllocator).
ALLOCATORS = set(KINDS) | {
    "__GI___libc_malloc", "__GI___libc_realloc", "reallocarray", "__libc_reallocarray",
    "_mid_memalign", "tcache_init", "malloc_hook_ini",
    "operator new(unsigned long)", "operator new[](unsigned long)",
    "operator new(unsigned long, std::nothrow_t const&)", "operator new[](unsigned long, std::nothrow_t const&)",
    "operator new(unsigned long, std::align_val_t)", "operator new[](unsigned long, std::align_val_t)",
    "operator new", "operator new[]",  # perf's demangling drops the parameters
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
}
FAULT_EVENTS = ("page-faults:u", "page-faults", "faults", "faults:u", "minor-faults", "minor-faults:u",
                "major-faults", "major-faults:u", "exceptions:page_fault_user")
MAX_IN_FLIGHT = 8
ANON_RING = 16
TRUSTED_FRAMES = 4


def event_name(ev):
    """perf script prints per-event terms in the name:
    page-faults/call-graph=no/u is page-faults:u, G:malloc__return/call-graph=no/
    is G:malloc__return."""
    if "/" not in ev:
        return ev
    name, _, rest = ev.partition("/")
    mods = rest.rpartition("/")[2]
    return name + (":" + mods if mods else "")


def is_allocator(sym):
    return sym.split("@@")[0].split("@")[0] in ALLOCATORS


def probe_kind(ev):
    """('malloc', False) for probe_libc:malloc, ('malloc', True) for
    probe_libc:malloc_hdr__return; None for other events (baseFunc)."""
    name = ev.rpartition(":")[2]
    ret = name.endswith("__return")
    if ret:
        name = name[: -len("__return")]
    fn = name
    while fn not in KINDS:
        i = fn.rfind("_")
        if i <= 0 or not fn[:i].strip("_"):
            return None
        fn = fn[:i]
    return KINDS[fn], ret


def chunk_size(size, hdr):
    """The bytes glibc's chunk spans (x86-64): hdr & ~7 when recorded and
    plausible, else request2size."""
    if hdr is not None:
        cs = hdr & ~7
        if cs >= size + 8 and cs - size < 1 << 30:
            return cs
    return max(32, (size + 8 + 15) & ~15)


def is_heap_or_anon(name):
    """The mapping names faultline classes [heap] or [anon]
    (symbolize.Mapping.Anon)."""
    return name in ("[heap]", "//anon", "") or name.startswith(("/dev/zero", "/anon_hugepage", "/memfd:"))


class Alloc:
    __slots__ = ("site", "size", "ptr", "mmapped")

    def __init__(self, site, size, ptr, mmapped):
        self.site, self.size, self.ptr, self.mmapped = site, size, ptr, mmapped


class Space:
    """One address space: live intervals kept sorted by start."""

    def __init__(self):
        self.starts = []  # sorted
        self.iv = {}      # start -> (end, Alloc)
        self.anon = collections.deque(maxlen=ANON_RING)  # (start, time)

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            end, a = self.iv[self.starts[i]]
            if addr < end:
                return a
        return None

    def insert(self, start, end, a):
        if end <= start:
            end = start + 1
        lo = bisect.bisect_left(self.starts, start)
        if lo > 0 and self.iv[self.starts[lo - 1]][0] > start:
            lo -= 1
        hi = bisect.bisect_left(self.starts, end)
        for s in self.starts[lo:hi]:  # overlapped: freed and handed out again
            del self.iv[s]
        self.starts[lo:hi] = [start]
        self.iv[start] = (end, a)

    def remove(self, start):
        i = bisect.bisect_left(self.starts, start)
        if i < len(self.starts) and self.starts[i] == start:
            del self.starts[i]
            return self.iv.pop(start)[1]
        return None

    def copy(self):
        s = Space()
        s.starts = list(self.starts)
        s.iv = dict(self.iv)
        return s


class Call:
    __slots__ = ("kind", "size", "oldptr", "caller", "time", "frames", "pend_start")


class Thread:
    def __init__(self, pid):
        self.pid = pid
        self.calls = []
        self.pending = []  # (pid, addr)
        # the last return that made an allocation, until the next entry:
        # realloc(NULL, n) jumps into malloc, so one return fires both
        # return probes (malloc's first) with the same ptr and return address
        self.last = None  # (ptr, retip, kind)


class Maps:
    """Per-process mappings from MMAP/MMAP2 records, for naming addresses."""

    def __init__(self):
        self.procs = collections.defaultdict(list)  # pid -> [(start, end, pgoff, file)]

    def add(self, pid, start, length, pgoff, name):
        self.procs[pid].append((start, start + length, pgoff, name))

    def lookup(self, pid, addr):
        for start, end, pgoff, name in reversed(self.procs.get(pid, ())):
            if start <= addr < end:
                return name, addr - start + pgoff
        return "[unknown]", addr


class Attributor:
    def __init__(self, anon_mmap_events=True):
        self.anon_events = anon_mmap_events
        self.spaces = {}
        self.threads = {}
        self.maps = Maps()
        self.started = False
        self.faults = collections.Counter()  # site -> faults
        self.allocs = collections.Counter()
        self.bytes = collections.Counter()
        self.comm_of_site = {}
        self.comm = {}
        self.st = collections.Counter()

    # -- address spaces and threads
    def space(self, pid):
        sp = self.spaces.get(pid)
        if sp is None:
            sp = self.spaces[pid] = Space()
        return sp

    def thread(self, pid, tid):
        th = self.threads.get(tid)
        if th is None:
            th = self.threads[tid] = Thread(pid)
        elif th.pid != pid:  # tid reused by another process
            self.drop_thread(th)
            th.pid = pid
        return th

    def drop_thread(self, th):
        while th.calls:
            self.abandon_top(th)

    def abandon_top(self, th):
        self.st["unpaired_entries"] += 1
        c = th.calls.pop()
        for pid, addr in th.pending[c.pend_start:]:
            self.attribute(pid, addr)
        del th.pending[c.pend_start:]

    # -- crediting
    def attribute(self, pid, addr):
        sp = self.spaces.get(pid)
        a = sp.find(addr) if sp is not None else None
        if a is None:
            self.st["unattributed"] += 1
            return
        self.credit(a)

    def credit(self, a):
        self.st["attributed"] += 1
        self.faults[a.site] += 1

    # -- events
    def entry(self, pid, tid, time, kind, size, oldptr, frames):
        self.st["entries"] += 1
        th = self.thread(pid, tid)
        th.last = None
        while th.calls and th.calls[-1].kind == kind:
            self.abandon_top(th)
        if len(th.calls) == MAX_IN_FLIGHT:
            self.st["unpaired_entries"] += 1
            del th.calls[0]
        c = Call()
        c.kind, c.size, c.oldptr, c.time, c.frames = kind, size, oldptr, time, frames
        # The return address at entry: perf prints the caller frame as
        # return address - 1, relative to its dso. perf's libdw unwinder
        # sometimes gets even this first step wrong at the malloc uprobe (on
        # gcc.plain: 205 of 11685 cc1 entries gave a caller in free, [heap] or
        # //anon where __probe_ret_ip and the stack's top word agree), and
        # then stops after one or two more frames; in the same recording no
        # stack of four or more frames had a wrong caller. So the caller is
        # trusted, and the return's __probe_ret_ip checked against it, only
        # when perf unwound at least four frames.
        c.caller = None
        if len(frames) >= TRUSTED_FRAMES and frames[1][2] != "[unknown]":
            c.caller = (frames[1][2], frames[1][0] + 1)
        elif len(frames) > 1 and frames[1][2] == "[unknown]":
            # A probed function that tail-calls malloc (realloc(NULL, n)
            # jumps to malloc) left the uretprobe trampoline as the return
            # address on the stack; perf prints it, minus one, unmapped.
            # The real return address is unknown here: no check.
            pass
        c.pend_start = len(th.pending)
        th.calls.append(c)

    def site(self, pid, call, retip, retframes):
        key = self.maps.lookup(pid, retip)
        # The function returned into: the return probe's frame 0, or, when
        # the return was recorded without a stack, the entry's caller frame.
        if retframes:
            into = retframes[0][1]
        elif len(call.frames) > 1:
            into = call.frames[1][1]
        else:
            into = ""
        if not is_allocator(into):
            return key
        # operator new → malloc: the site is operator new's caller, from the
        # return probe's stack (its frame 0 is __probe_ret_ip), else from
        # the entry's.
        for frames in (retframes, call.frames[1:]):
            for rel, sym, dso in frames[1:]:
                if not is_allocator(sym):
                    return (dso, rel + 1)
        self.st["unknown_sites"] += 1
        return ("[allocator]",) + key

    def ret(self, pid, tid, time, kind, ptr, retip, retframes, hdr):
        self.st["returns"] += 1
        th = self.thread(pid, tid)
        i = len(th.calls) - 1
        while i >= 0 and th.calls[i].kind != kind:
            i -= 1
        if i < 0:
            self.st["unpaired_returns"] += 1
            return
        while len(th.calls) - 1 > i:
            self.abandon_top(th)
        c = th.calls[-1]
        if retip is not None and c.caller is not None and self.maps.lookup(pid, retip) != c.caller:
            self.st["retip_mismatches"] += 1
            self.st["unpaired_returns"] += 1
            self.abandon_top(th)
            return
        th.calls.pop()
        pend = th.pending[c.pend_start:]
        del th.pending[c.pend_start:]
        if ptr and retip is not None and th.last is not None and th.last[:2] == (ptr, retip) and th.last[2] != kind:
            self.st["chained"] += 1
            for p, addr in pend:
                self.attribute(p, addr)
            return
        th.last = (ptr, retip, kind)
        if ptr == 0:
            for p, addr in pend:
                self.attribute(p, addr)
            return
        sp = self.space(pid)
        if kind == "realloc" and c.oldptr:
            old = sp.find(c.oldptr - 8)
            if old is not None and old.ptr == c.oldptr:
                sp.remove(c.oldptr - (16 if old.mmapped else 8))
        site = self.site(pid, c, retip, retframes) if retip is not None else ("[no ret ip]",)
        chunk = ptr - 16
        if hdr is not None:
            mmapped = bool(hdr & 2)
        elif self.anon_events:
            mmapped = any(s == chunk and t >= c.time for s, t in sp.anon)
        else:
            mmapped = c.size >= 128 << 10
        a = Alloc(site, c.size, ptr, mmapped)
        self.allocs[site] += 1
        self.bytes[site] += c.size
        self.comm_of_site.setdefault(site, self.comm.get(pid, "?"))
        sp.insert(chunk if mmapped else ptr - 8, ptr + c.size, a)
        end = ptr + chunk_size(c.size, hdr)
        for p, addr in pend:
            if chunk <= addr < end:
                self.st["inflight"] += 1
                self.credit(a)
            elif sp.find(addr) is not None:
                self.credit(sp.find(addr))
            elif is_heap_or_anon(self.maps.lookup(p, addr)[0]):
                self.st["inflight"] += 1
                self.st["in_allocator"] += 1
                self.credit(a)
            else:
                self.st["unattributed"] += 1

    def fault(self, pid, tid, addr):
        self.st["faults"] += 1
        th = self.thread(pid, tid)
        if th.calls:
            th.pending.append((pid, addr))
        else:
            self.attribute(pid, addr)

    def fork(self, parent, child):
        if child == parent:
            return
        self.spaces.pop(child, None)
        if parent in self.spaces:
            self.spaces[child] = self.spaces[parent].copy()

    def exec_(self, pid):
        self.spaces.pop(pid, None)
        for tid in sorted(self.threads):
            th = self.threads[tid]
            if th.pid == pid:
                self.drop_thread(th)

    def exit(self, pid, tid):
        th = self.threads.pop(tid, None)
        if th is not None:
            self.drop_thread(th)
        if pid == tid:
            self.spaces.pop(pid, None)

    def close(self):
        for tid in sorted(self.threads):
            self.drop_thread(self.threads[tid])

    # -- the text
    def sideband(self, h, rest):
        m = MMAP.search(rest)
        if m:
            pid = int(m[1])
            if pid < 0:
                return  # the kernel's own map
            start, length, pgoff, name = int(m[3], 16), int(m[4], 16), int(m[5], 16), m[7]
            self.maps.add(pid, start, length, pgoff, name)
            if self.started and (name == "//anon" or name.startswith(("/dev/zero", "/anon_hugepage"))):
                self.space(pid).anon.append((start, h["t"]))
            return
        m = FORK.search(rest)
        if m:
            child, parent = int(m[1]), int(m[3])
            if child != parent:
                self.maps.procs[child] = list(self.maps.procs.get(parent, ()))
            if self.started:
                self.fork(parent, child)
            return
        m = COMM_EXEC.search(rest)
        if m:
            pid = int(m[2])
            self.maps.procs[pid] = []
            self.comm[pid] = m[1]
            if self.started:
                self.exec_(pid)
            return
        m = EXIT.search(rest)
        if m and self.started:
            self.exit(int(m[1]), int(m[2]))

    def sample(self, h, frames):
        self.started = True
        pid, tid, t, rest = int(h["pid"]), int(h["tid"]), h["t"], h["rest"]
        self.comm.setdefault(pid, h["comm"])
        ev, _, trace = rest.partition(": ")
        ev = event_name(ev.strip())
        if ev in FAULT_EVENTS:
            if ev == "exceptions:page_fault_user":
                addr = int(re.search(r"address=0x([0-9a-f]+)", trace)[1], 16)
            else:
                addr = int(trace.split()[0], 16)
            self.fault(pid, tid, addr)
            return
        pk = probe_kind(ev)
        if pk is None:
            return
        kind, isret = pk
        if not isret:
            if kind == "calloc":
                m = re.search(r"\bn(?:memb)?=(\d+) size=(\d+)", trace)
                size = int(m[1]) * int(m[2])
            else:
                size = int(re.search(r"\bsize=(\d+)", trace)[1])
            m = re.search(r"\boldptr=(?:0x)?([0-9a-f]+)", trace)
            oldptr = int(m[1], 16 if "oldptr=0x" in trace else 10) if m else 0
            self.entry(pid, tid, t, kind, size, oldptr, frames)
            return
        m = re.search(r"\bptr=0x([0-9a-f]+)", trace)
        ptr = int(m[1], 16) if m else 0
        m = RETPROBE.search(trace)
        retip = int(m[2], 16) if m else None
        m = re.search(r"\bhdr=(\d+)", trace)
        hdr = int(m[1]) if m else None
        self.ret(pid, tid, t, kind, ptr, retip, frames, hdr)

    def feed(self, lines):
        cur, frames = None, []
        for line in lines:
            # perf indents a sample's line when it has no callchain: a
            # header is told from a frame by its "pid/tid time:" part.
            if line.startswith((" ", "\t")) and not HEADER.match(line.lstrip()):
                fm = FRAME.match(line)
                if fm and cur is not None:
                    frames.append((int(fm["ip"], 16), fm["sym"], fm["dso"]))
                continue
            if not line.strip():
                continue
            m = HEADER.match(line.lstrip())
            if not m:
                continue
            if cur is not None:
                self.dispatch(cur, frames)
            cur, frames = m.groupdict(), []
            cur["t"] = int(cur["time"]) * 10**9 + int(cur["frac"].ljust(9, "0")[:9])
        if cur is not None:
            self.dispatch(cur, frames)
        self.close()

    def dispatch(self, h, frames):
        if h["rest"].startswith("PERF_RECORD_"):
            self.sideband(h, h["rest"])
        else:
            self.sample(h, frames)


def perf_lines(path, symfs=None, buildid_dir=None):
    cmd = ["perf"]
    if buildid_dir:
        cmd += ["--buildid-dir", buildid_dir]
    cmd += ["script", "--ns", "--no-inline", "--show-task-events", "--show-mmap-events",
            "-F", "comm,pid,tid,time,event,addr,ip,sym,dso,trace"]
    if symfs:
        cmd += ["--symfs", symfs]
    stdin = subprocess.DEVNULL
    if path.endswith(".pipe.data"):
        cmd += ["-i", "-"]
        stdin = open(path, "rb")
    else:
        cmd += ["-i", path]
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, errors="replace", bufsize=1 << 20)
    yield from p.stdout
    if p.wait() != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {p.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--symfs")
    ap.add_argument("--buildid-dir")
    ap.add_argument("--text", action="store_true", help="the argument is perf script text, not a recording")
    ap.add_argument("--no-anon-mmap", action="store_true",
                    help="the recording has no anonymous mmap events (recorded without -d): judge mmap'd chunks by size")
    ap.add_argument("recording")
    args = ap.parse_args()
    lines = open(args.recording, errors="replace") if args.text else perf_lines(args.recording, args.symfs, args.buildid_dir)
    at = Attributor(anon_mmap_events=not args.no_anon_mmap)
    at.feed(l.rstrip("\n") for l in lines)
    out = sys.stdout
    for site in sorted(set(at.faults) | set(at.allocs), key=str):
        dso, rel = (site[0], site[1]) if len(site) == 2 else ("|".join(map(str, site[:-1])), site[-1] if len(site) > 1 else 0)
        out.write(f"site\t{dso}\t{rel:x}\t{at.faults[site]}\t{at.allocs[site]}\t{at.bytes[site]}\t{at.comm_of_site.get(site, '?')}\n")
    s = at.st
    out.write("total " + " ".join(f"{k}={s[k]}" for k in (
        "faults", "attributed", "inflight", "in_allocator", "unattributed", "entries", "returns", "unpaired_entries",
        "unpaired_returns", "retip_mismatches", "unknown_sites")) + f" allocs={sum(at.allocs.values())}\n")


if __name__ == "__main__":
    main()
