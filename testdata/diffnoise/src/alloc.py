# alloc.py — a deterministic Python program for faultline diff's noise tests
# (testdata/diffnoise/gen.sh). python3 alloc.py SCALE LOOPS: a bytearray of
# SCALE × 2 MiB written once, and LOOPS × 20000 small lists.
import sys

scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
loops = int(sys.argv[2]) if len(sys.argv) > 2 else 1
buf = bytearray(scale << 21)
for i in range(0, len(buf), 4096):
    buf[i] = 1
rows = [[i, i + 1, i + 2] for i in range(20000 * loops)]
print(len(buf), len(rows))
