package pagemap

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapped returns an anonymous mapping of n bytes at a 2 MiB boundary.
func mapped(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n+2<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	off := (2<<20 - int(uintptr(unsafe.Pointer(&b[0]))%(2<<20))) % (2 << 20)
	return b[off : off+n]
}

// residentIn counts the bytes of ranges with Present inside b.
func residentIn(rs []Range, b []byte, want Flags) uint64 {
	lo := uint64(uintptr(unsafe.Pointer(&b[0])))
	hi := lo + uint64(len(b))
	var n uint64
	for _, r := range rs {
		s, e := max(r.Start, lo), min(r.End, hi)
		if s < e && r.Flags&want == want {
			n += e - s
		}
	}
	return n
}

// mincoreBytes is the kernel's own count of b's resident bytes (mincore).
func mincoreBytes(t *testing.T, b []byte) uint64 {
	vec := make([]byte, len(b)/PageSize)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		t.Fatal(e)
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return n * PageSize
}

// TestScanMatchesMincore touches every other page of a buffer (and a
// read of others, which maps the zero page) and compares the scan with
// mincore, through the ioctl and through the entry reads.
func TestScanMatchesMincore(t *testing.T) {
	b := mapped(t, 4<<20)
	unix.Madvise(b, unix.MADV_NOHUGEPAGE)
	var sum byte
	for i := 0; i < len(b); i += PageSize {
		if i%(2*PageSize) == 0 {
			b[i] = 1
		} else if i%(8*PageSize) == PageSize {
			sum += b[i] // the zero page: not the process's memory
		}
	}
	_ = sum
	written := uint64(len(b) / 2)
	if got := mincoreBytes(t, b); got < written {
		t.Fatalf("mincore: %d bytes resident, want at least the %d written", got, written)
	}
	for _, entries := range []bool{false, true} {
		s := NewScanner()
		s.noScan = entries
		rs, err := s.Scan(nil, os.Getpid())
		if err != nil {
			if !entries && err != nil {
				t.Fatalf("PAGEMAP_SCAN: %v (needs Linux 6.7)", err)
			}
			t.Fatal(err)
		}
		if got := residentIn(rs, b, Present); got != written {
			t.Errorf("entries=%v: %d bytes present in the buffer, want the %d written (mincore counts the zero page too)", entries, got, written)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Start < rs[i-1].End {
				t.Fatalf("ranges out of order: %x after %x", rs[i].Start, rs[i-1].End)
			}
		}
	}
}

// TestScanHuge advises a buffer MADV_HUGEPAGE, touches it, and compares
// the huge bytes the scan finds with the AnonHugePages smaps gives the
// mapping. Skips where the kernel gives no huge page (THP never, or
// disabled for this process).
func TestScanHuge(t *testing.T) {
	b := mapped(t, 8<<20)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		t.Skipf("MADV_HUGEPAGE: %v", err)
	}
	for i := 0; i < len(b); i += PageSize {
		b[i] = 1
	}
	rs, err := NewScanner().Scan(nil, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	huge := residentIn(rs, b, Present|Huge)
	want := smapsHuge(t, uint64(uintptr(unsafe.Pointer(&b[0]))))
	if want == 0 {
		t.Skip("the kernel mapped no huge page (transparent huge pages off here)")
	}
	if huge != want {
		t.Errorf("huge bytes %d, smaps AnonHugePages %d", huge, want)
	}
	if got := residentIn(rs, b, Present); got != uint64(len(b)) {
		t.Errorf("present %d, want %d", got, len(b))
	}
}

// BenchmarkScan reads this process's anonymous ranges with a 64 MiB
// buffer of which every other page is written: 8192 ranges.
func BenchmarkScan(b *testing.B) {
	for _, entries := range []bool{false, true} {
		name := "ioctl"
		if entries {
			name = "entries"
		}
		b.Run(name, func(b *testing.B) {
			buf, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Munmap(buf)
			unix.Madvise(buf, unix.MADV_NOHUGEPAGE)
			for i := 0; i < len(buf); i += 2 * PageSize {
				buf[i] = 1
			}
			s := NewScanner()
			s.noScan = entries
			var rs []Range
			b.ReportAllocs()
			for b.Loop() {
				if rs, err = s.Scan(rs[:0], os.Getpid()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(rs)), "ranges")
		})
	}
}
