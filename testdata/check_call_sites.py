#!/usr/bin/env python3
"""check_call_sites.py — are a script text's caller frames real call sites?

    faultline script --no-inline F.data > ours.txt
    testdata/check_call_sites.py [--symfs DIR] [--comm cc1] ours.txt [perf.txt]

Independent of any unwinder: for every pair of adjacent user frames
(callee, caller) of every sample in `perf script`-style text (caller printed
as return address - 1, addresses relative to the dso = file offsets), it
reads the caller's dso file and checks

  * that the bytes just before the return address decode as a call
    instruction (E8 rel32; FF /2 register or memory forms), and
  * for a direct call, that its target is where the callee's function
    starts: the pc_begin of the .eh_frame FDE holding the callee's PC
    (`readelf --debug-dump=frames`), or a PLT stub (`objdump -d -j .plt
    -j .plt.sec` names it) for the callee's symbol. A direct call to some
    other function is counted apart: a tail call in between (X calls F, F
    jumps to G) gives that legitimately.

Prints, per text, how many pairs pass each check. The first frame (the
sampled IP) is not a return address and is only used as a callee. Frames in
[unknown] dsos, //anon, [vdso], [uprobes] or the kernel are skipped.
"""
import argparse
import bisect
import collections
import os
import re
import struct
import subprocess
import sys

FRAME = re.compile(r"^\s+([0-9a-f]+) (.*) \(([^()]*)\)$")


class Binary:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        self.loads = self._loads()
        self.fdes = self._fdes()
        self.plt = self._plt()

    def _loads(self):
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2:
            raise ValueError(f"{self.path}: not a 64-bit ELF file")
        phoff, = struct.unpack_from("<Q", d, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", d, 0x36)
        out = []
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", d, phoff + i * phentsize)
            if p_type == 1:  # PT_LOAD
                out.append((p_offset, p_vaddr, p_filesz))
        return out

    def off_to_vaddr(self, off):
        for o, v, n in self.loads:
            if o <= off < o + n:
                return off - o + v
        return None

    def _fdes(self):
        out = subprocess.run(["readelf", "--debug-dump=frames", self.path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        r = sorted((int(a, 16), int(b, 16)) for a, b in re.findall(r" FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out))
        self.fde_starts = [a for a, _ in r]
        return r

    def fde(self, vaddr):
        i = bisect.bisect_right(self.fde_starts, vaddr) - 1
        if i >= 0 and self.fdes[i][0] <= vaddr < self.fdes[i][1]:
            return self.fdes[i]
        return None

    def _plt(self):
        out = subprocess.run(["objdump", "-d", "-j", ".plt", "-j", ".plt.sec", self.path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        return {int(a, 16): n for a, n in re.findall(r"^([0-9a-f]+) <(.+)>:$", out, re.M)}

    def call_before(self, off):
        """(kind, target vaddr or None) of a call instruction ending at file
        offset off, or (None, None)."""
        d = self.data
        if off >= 5 and d[off - 5] == 0xE8:
            rel, = struct.unpack_from("<i", d, off - 4)
            v = self.off_to_vaddr(off)
            return "direct", (v + rel) & (2**64 - 1) if v is not None else None
        # FF /2: modrm mod/reg/rm; lengths 2 (reg), 3 (disp8 or SIB), 6 (disp32/rip), 7 (SIB+disp32), + REX prefix
        for n in range(2, 9):
            i = off - n
            if i < 0:
                break
            j = i
            if 0x40 <= d[j] <= 0x4F:
                j += 1
            if j + 1 >= off or d[j] != 0xFF:
                continue
            modrm = d[j + 1]
            if (modrm >> 3) & 7 != 2:
                continue
            mod, rm = modrm >> 6, modrm & 7
            length = 2 + (j - i)
            if mod != 3 and rm == 4:
                length += 1  # SIB
                sib_base = d[j + 2] & 7
                if mod == 0 and sib_base == 5:
                    length += 4
            if mod == 1:
                length += 1
            elif mod == 2 or (mod == 0 and rm == 5):
                length += 4
            if length == n:
                return "indirect", None
        return None, None


def samples(path):
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    yield cur
                cur = None
                continue
            if not line.startswith("\t"):
                cur = (line, []) if "PERF_RECORD" not in line else None
                continue
            m = FRAME.match(line)
            if m and cur is not None:
                cur[1].append((int(m[1], 16), m[2], m[3]))
    if cur:
        yield cur


def check(path, symfs, comm, verbose):
    bins = {}

    def binary(dso):
        if dso not in bins:
            p = (symfs or "") + dso
            try:
                bins[dso] = Binary(p) if dso.startswith("/") and os.path.exists(p) else None
            except (OSError, ValueError):
                bins[dso] = None
        return bins[dso]

    c = collections.Counter()
    seen = {}
    shown = 0
    for hdr, frames in samples(path):
        if comm and not hdr.startswith(comm + " "):
            continue
        user = [f for f in frames if "kernel" not in f[2]]
        for i in range(len(user) - 1):
            callee, caller = user[i], user[i + 1]
            key = (callee[0] + (1 if i > 0 else 0), callee[2], caller[0], caller[2])
            if key in seen:
                c[seen[key]] += 1
                c["pairs"] += 1
                continue
            bc, be = binary(caller[2]), binary(callee[2])
            res = "skipped (no file)"
            if bc is not None and be is not None:
                ret = caller[0] + 1  # perf prints return address - 1
                kind, target = bc.call_before(ret)
                if kind is None:
                    res = "NOT after a call"
                elif kind == "indirect":
                    res = "indirect call"
                else:
                    # The callee's PC: the sampled IP, or its own return address - 1.
                    cv = be.off_to_vaddr(callee[0])
                    fde = be.fde(cv) if cv is not None else None
                    if be is bc and fde is not None and fde[0] == target:
                        res = "direct call to the callee's function"
                    elif target in bc.plt:
                        name = bc.plt[target].split("@")[0]
                        res = ("direct call via PLT to the callee's symbol" if name == callee[1].split("@")[0]
                               else "direct call via PLT to another symbol")
                    else:
                        res = "direct call to another function (tail call?)"
                if res == "NOT after a call" and verbose and shown < 10:
                    shown += 1
                    print(f"  {hdr}\n    callee {callee}\n    caller {caller}: no call before {ret:#x}")
            seen[key] = res
            c[res] += 1
            c["pairs"] += 1
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--symfs", help="prefix for the dsos' paths")
    ap.add_argument("--comm", help="only samples of this command")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("texts", nargs="+")
    args = ap.parse_args()
    for t in args.texts:
        c = check(t, args.symfs, args.comm, args.verbose)
        n = c.pop("pairs", 0)
        print(f"{t}: {n} (callee, caller) frame pairs")
        for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
            print(f"  {v:8d} {100 * v / max(n, 1):6.2f}%  {k}")


if __name__ == "__main__":
    main()
