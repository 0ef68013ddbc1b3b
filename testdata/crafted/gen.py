#!/usr/bin/env python3
"""Writes the crafted (hostile) inputs of testdata/crafted: see README.md.

Run from anywhere as testdata/crafted/gen.sh (which also builds the ELF
inputs); this script writes only the perf.data files. Needs the zstd CLI.
Every file is small; what matters is what it claims or expands to.
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# perf ABI (include/uapi/linux/perf_event.h, tools/perf/util/event.h)
PIPE_MAGIC = b"PERFILE2"
REC_LOST = 2
REC_SAMPLE = 9
REC_MMAP2 = 10
REC_HEADER_ATTR = 64
REC_COMPRESSED = 81
TYPE_SOFTWARE = 1
SW_PAGE_FAULTS = 2
S_IP, S_TID, S_TIME, S_ADDR, S_CALLCHAIN, S_STACK_USER = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 5, 1 << 13
CONTEXT_USER = (1 << 64) - 512  # PERF_CONTEXT_USER
ATTR_SIZE = 136  # PERF_ATTR_SIZE_VER8
ATTR_SAMPLE_ID_ALL = 1 << 18


def rec(typ, body, misc=0):
    body += b"\0" * (-len(body) % 8)
    assert 8 + len(body) < 1 << 16
    return struct.pack("<IHH", typ, misc, 8 + len(body)) + body


def rec_nopad(typ, body):
    return struct.pack("<IHH", typ, 0, 8 + len(body)) + body


def attr(sample_type, stack_user=0, flags=0):
    a = bytearray(ATTR_SIZE)
    struct.pack_into("<IIQQQ", a, 0, TYPE_SOFTWARE, ATTR_SIZE, SW_PAGE_FAULTS, 1, sample_type)
    struct.pack_into("<Q", a, 40, flags)
    struct.pack_into("<I", a, 88, stack_user)
    return bytes(a)


def pipe_header(sample_type, stack_user=0, flags=0):
    return PIPE_MAGIC + struct.pack("<Q", 16) + rec(REC_HEADER_ATTR, attr(sample_type, stack_user, flags) + struct.pack("<Q", 1))


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")


def zbomb():
    """zbomb.data: pipe mode, one page-fault event with 4 KiB user stacks,
    and COMPRESSED records (one zstd stream cut every 4 KiB, as perf -z
    writes it) that expand to 1.25 GiB of identical samples all at one time,
    with no FINISHED_ROUND: without a queue bound every sample is held for
    time ordering, and it expands over 1000x (the inflate-ratio guard)."""
    st = S_IP | S_TID | S_TIME | S_ADDR | S_STACK_USER
    stack = 4096
    body = struct.pack("<QIIQQ", 0x401000, 1, 1, 1_000_000, 0x7F0000001000)
    body += struct.pack("<Q", stack) + bytes([0xAB]) * stack + struct.pack("<Q", stack)
    sample = rec(REC_SAMPLE, body)
    n = (1_250 << 20) // len(sample)
    z = subprocess.run(["zstd", "-q", "-3", "-c"], input=sample * n, stdout=subprocess.PIPE, check=True).stdout
    out = bytearray(pipe_header(st, stack))
    for i in range(0, len(z), 4096):
        out += rec_nopad(REC_COMPRESSED, z[i:i + 4096])
    write("zbomb.data", bytes(out))
    print(f"  {n} samples of {len(sample)} bytes = {n * len(sample)} bytes uncompressed")


REC_FINISHED_ROUND = 68


def roundbomb():
    """roundbomb.data: pipe mode, one page-fault event, then COMPRESSED
    records (one zstd stream cut every 4 KiB) that expand to 1 GiB of
    FINISHED_ROUND records, 8 bytes each and nothing else: 134 million
    records of no content, whose reading must cost in proportion to the
    file's bytes, not to what they expand to."""
    st = S_IP | S_TID | S_TIME | S_ADDR
    rnd = struct.pack("<IHH", REC_FINISHED_ROUND, 0, 8)
    chunk = rnd * (1 << 17)  # 1 MiB
    p = subprocess.Popen(["zstd", "-q", "-19", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    import threading
    out_z = []
    t = threading.Thread(target=lambda: out_z.append(p.stdout.read()))
    t.start()
    for _ in range(1024):
        p.stdin.write(chunk)
    p.stdin.close()
    t.join()
    p.wait()
    z = out_z[0]
    out = bytearray(pipe_header(st))
    for i in range(0, len(z), 4096):
        out += rec_nopad(REC_COMPRESSED, z[i:i + 4096])
    write("roundbomb.data", bytes(out))
    print(f"  {1 << 27} FINISHED_ROUND records = {1 << 30} bytes uncompressed")


def endless():
    """endless.data: pipe mode, one page-fault event, then one block of 64
    samples whose times fall from 64000 to 1000 ns and no FINISHED_ROUND.
    The tests repeat the block (the bytes after the ATTR record) to make an
    endless pipe in which every block goes back in time."""
    st = S_IP | S_TID | S_TIME | S_ADDR
    out = bytearray(pipe_header(st))
    for i in range(64, 0, -1):
        out += rec(REC_SAMPLE, struct.pack("<QIIQQ", 0x401000 + i, 1, 1, i * 1000, 0x7F0000000000 + i * 4096))
    write("endless.data", bytes(out))


def escape():
    """escape.data: pipe mode, one MMAP2 naming /../../../../../../../etc/shadow
    (what a hostile recording can claim) and a page fault whose ip lies in it.
    analyze --symfs DIR must not open anything outside DIR for it."""
    st = S_IP | S_TID | S_TIME | S_ADDR | S_CALLCHAIN
    out = bytearray(pipe_header(st, flags=ATTR_SAMPLE_ID_ALL))
    name = b"/../../../../../../../etc/shadow\0"
    # struct perf_record_mmap2: pid, tid, addr, len, pgoff, maj, min, ino,
    # ino_generation, prot, flags, filename, then the sample_id trailer
    # (tid, time for this sample_type).
    body = struct.pack("<IIQQQIIQQII", 1, 1, 0x400000, 0x10000, 0, 8, 1, 2, 0, 5, 2) + name
    body += b"\0" * (-len(body) % 8) + struct.pack("<IIQ", 1, 1, 500)
    out += rec(REC_MMAP2, body)
    # callchain: PERF_CONTEXT_USER, then the ip (what faultline script names)
    out += rec(REC_SAMPLE, struct.pack("<QIIQQQQQ", 0x401234, 1, 1, 1000, 0x7F0000000000, 2, CONTEXT_USER, 0x401234))
    write("escape.data", bytes(out))


def manybins():
    """manybins.data: pipe mode, an MMAP2 of each of the shared libraries
    this machine had in /usr/lib/x86_64-linux-gnu when it was made (sorted,
    the first 512; the recording names them, analyze finds them on the host
    it runs on) and a page fault whose ip and callchain lie in it: analyze
    opens every one it finds to name the frame."""
    st = S_IP | S_TID | S_TIME | S_ADDR | S_CALLCHAIN
    out = bytearray(pipe_header(st, flags=ATTR_SAMPLE_ID_ALL))
    lib = "/usr/lib/x86_64-linux-gnu"
    names = sorted(n for n in os.listdir(lib) if ".so" in n and os.path.isfile(os.path.join(lib, n)))[:512]
    for i, n in enumerate(names):
        start = 0x100000000 + i * 0x10000000
        name = (lib + "/" + n).encode() + b"\0"
        body = struct.pack("<IIQQQIIQQII", 1, 1, start, 0x10000000, 0, 8, 1, 1000 + i, 0, 5, 2) + name
        body += b"\0" * (-len(body) % 8) + struct.pack("<IIQ", 1, 1, 500 + i)
        out += rec(REC_MMAP2, body)
        ip = start + 0x2000 + 16 * i
        out += rec(REC_SAMPLE, struct.pack("<QIIQQQQQ", ip, 1, 1, 1000 + i, 0x7F0000000000 + i * 4096, 2, CONTEXT_USER, ip))
    write("manybins.data", bytes(out))


def sametime():
    """sametime.data: pipe mode, 16 Mi page-fault samples all at time 1 ms
    (zstd-compressed, as perf -z writes them), then a LOST record at the
    same time. The lost-window tracker used to keep 8 bytes per fault for
    faults at one time, forever."""
    st = S_IP | S_TID | S_TIME | S_ADDR
    sample = rec(REC_SAMPLE, struct.pack("<QIIQQ", 0x401000, 1, 1, 1_000_000, 0x7F0000001000))
    n = 16 << 20
    zp = subprocess.Popen(["zstd", "-q", "-3", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    import threading
    out = []
    t = threading.Thread(target=lambda: out.append(zp.stdout.read()))
    t.start()
    block = sample * (1 << 16)
    for _ in range(n >> 16):
        zp.stdin.write(block)
    zp.stdin.close()
    t.join()
    zp.wait()
    z = out[0]
    data = bytearray(pipe_header(st, flags=ATTR_SAMPLE_ID_ALL))
    for i in range(0, len(z), 4096):
        data += rec_nopad(REC_COMPRESSED, z[i:i + 4096])
    # PERF_RECORD_LOST: id, lost, then the sample_id trailer (tid, time)
    data += rec(REC_LOST, struct.pack("<QQIIQ", 1, 100, 1, 1, 1_000_000))
    write("sametime.data", bytes(data))
    print(f"  {n} samples of {len(sample)} bytes")


def varint(v):
    v &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_varint(field, v):
    return varint(field << 3) + varint(v)


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def profile(samples, strings, func=None):
    """A pprof profile (profile.proto) with one sample type, faults/count,
    and samples given as (value, [(key, str)]) with string indexes. With
    func = (name, file) string indexes, every sample's stack is one
    location in that function, at line 10."""
    table = ["", "faults", "count"] + strings
    out = pb_bytes(1, pb_varint(1, 1) + pb_varint(2, 2))
    if func:
        out += pb_bytes(5, pb_varint(1, 1) + pb_varint(2, func[0]) + pb_varint(3, func[0]) + pb_varint(4, func[1]))
        out += pb_bytes(4, pb_varint(1, 1) + pb_bytes(4, pb_varint(1, 1) + pb_varint(2, 10)))
    for value, labels in samples:
        body = pb_varint(1, 1) if func else b""
        body += pb_varint(2, value)
        for k, v in labels:
            body += pb_bytes(3, pb_varint(1, k) + pb_varint(2, v))
        out += pb_bytes(2, body)
    for t in table:
        out += pb_bytes(6, t.encode())
    return out


def gz(data):
    return subprocess.run(["gzip", "-9n"], input=data, stdout=subprocess.PIPE, check=True).stdout


def diffs():
    """Inputs for faultline diff:
    diff-nested.pb.gz  gzip inside gzip: the outer layer is small, the inner
                       one inflates to 2 GiB of zeros (pprof's parser would
                       inflate an inner layer itself, unbounded)
    diff-wide.pb.gz    one class label and one flag of 16 MiB each
    diff-sat-base.pb.gz, diff-sat-new.pb.gz
                       one site (grow_table sat.c:10): BASE -(2^63-16)
                       faults, NEW 2^63-16: New-Base
                       wraps to -32 in int64, i.e. "shrank" instead of grown"""
    inner = subprocess.run("head -c 2G /dev/zero | gzip -1n", shell=True, stdout=subprocess.PIPE, check=True).stdout
    write("diff-nested.pb.gz", gz(inner))
    wide = "C" * (16 << 20)
    flag = "F" * (16 << 20)
    # strings 3.. : "class", wide, "flag", flag
    write("diff-wide.pb.gz", gz(profile([(5, [(3, 4), (5, 6)])], ["class", wide, "flag", flag])))
    big = (1 << 63) - 16
    write("diff-sat-base.pb.gz", gz(profile([(-big, [])], ["grow_table", "sat.c"], func=(3, 4))))
    write("diff-sat-new.pb.gz", gz(profile([(big, [])], ["grow_table", "sat.c"], func=(3, 4))))


def elf_sections(b):
    """(name, header offset, header fields) of every section of an ELF64 LE file."""
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = []
    for i, h in enumerate(hdrs):
        end = b.index(b"\0", strtab + h[0])
        out.append((b[strtab + h[0]:end].decode(), shoff + i * shentsize, list(h)))
    return out


def dwarfbomb(src):
    """dwarfbomb.debug: the ELF src (built with -g by gen.sh) with every
    .debug_* section (.debug_aranges renamed .debug_frame) rewritten as
    SHF_COMPRESSED, all eight pointing at one
    zlib blob (appended to the file) that inflates to 200 MiB of zeros:
    1.2 GB for a ~200 KB file when each is inflated on its own."""
    b = bytearray(open(src, "rb").read())
    inflated = 200 << 20
    z = subprocess.run(f"head -c {inflated} /dev/zero | python3 -c 'import sys,zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read(), 9))'",
                       shell=True, stdout=subprocess.PIPE, check=True).stdout
    blob = struct.pack("<IIQQ", 1, 0, inflated, 1) + z  # Elf64_Chdr: ELFCOMPRESS_ZLIB, size, align
    b += b"\0" * (-len(b) % 8)
    off = len(b)
    b += blob
    # Rename .debug_aranges (unused by faultline) to .debug_frame, which the
    # unwinder reads: it points at the blob too.
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, _, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    strtab, = struct.unpack_from("<Q", b, shoff + shstrndx * shentsize + 0x18)
    for name, hoff, h in elf_sections(b):
        if name == ".debug_aranges":
            b[strtab + h[0]:strtab + h[0] + 15] = b".debug_frame\0\0\0"
    n = 0
    for name, hoff, h in elf_sections(b):
        if name.startswith(".debug_"):
            h[2] |= 0x800  # SHF_COMPRESSED
            h[4], h[5], h[8] = off, len(blob), 8
            struct.pack_into("<IIQQQQIIQQ", b, hoff, *h)
            n += 1
    write("dwarfbomb.debug", bytes(b))
    print(f"  {n} .debug_* sections -> one {len(blob)}-byte blob claiming {inflated} bytes")


if __name__ == "__main__":
    which = sys.argv[1:] or ["zbomb", "roundbomb", "endless", "escape", "sametime", "manybins", "diffs"]
    if which[0] == "dwarfbomb":
        dwarfbomb(which[1])
        sys.exit(0)
    for w in which:
        globals()[w]()
