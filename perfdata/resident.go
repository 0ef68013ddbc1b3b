package perfdata

// granule bounds what touching one byte of a file mapping can make
// resident: a read fault maps the whole page-cache folio holding the byte
// (ext4 on Linux 6.x caches files in folios of up to 2 MiB, the PMD size)
// or, for small folios, the pages around it (fault_around_bytes, 64 KiB).
// Neither crosses a 2 MiB boundary.
const granule = 2 << 20

// maxGranules is how many distinct granules may be touched before their
// pages are handed back: the mapped part of the recording stays below
// (maxGranules+1)·2 MiB.
const maxGranules = 8

// residency keeps the resident part of a memory-mapped recording bounded.
//
// Every page of the mapping we touch counts in the process's RSS until it
// is unmapped, so without help a 2 GB recording makes a 2 GB process.
// Records are only slices of the mapping, and the records of the two rounds
// that time ordering buffers may span a few hundred MB (perf writes a round
// per pass over its per-CPU buffers: up to -m bytes per CPU), delivered
// hopping between the CPUs' parts of a round. So instead of copying or
// tracking each record, the pages of everything touched since the last
// drop are released with MADV_DONTNEED once maxGranules granules were
// touched. On a read-only file mapping that only removes the page-table
// entries: the data stays in the page cache and a later read of a buffered
// record faults it back in (a minor fault). So no record is ever
// invalidated, whatever is dropped.
type residency struct {
	mapping []byte // the whole file mapping (page aligned); nil: not a mapping we own
	lo, hi  int64  // file offsets touched since the last drop
	gran    [maxHeldGranules]int64
	n       int  // granules in gran
	full    bool // a touch needed one more granule: drop at the next chance
	drops   int
	// limit is the granules held before a drop (maxGranules when 0);
	// deferTo, when set, is handed each drop to run later (Reader.DeferDrops).
	limit   int
	deferTo func(drop func())
}

// touch notes that [off, off+n) of the file was read.
func (d *residency) touch(off int64, n int) {
	if d.mapping == nil || n <= 0 {
		return
	}
	end := off + int64(n)
	if d.n == 0 || off < d.lo {
		d.lo = off
	}
	if end > d.hi {
		d.hi = end
	}
	for g := off / granule; g <= (end-1)/granule; g++ {
		d.add(g)
	}
}

func (d *residency) add(g int64) {
	for _, x := range d.gran[:d.n] {
		if x == g {
			return
		}
	}
	limit := d.limit
	if limit == 0 {
		limit = maxGranules
	}
	if d.n == limit {
		d.full = true
		return
	}
	d.gran[d.n] = g
	d.n++
}

// release drops b unless the mapping was closed (b may be unmapped then,
// its addresses reused: a deferred drop can come late).
func (d *residency) release(b []byte) {
	if d.mapping != nil {
		dropPages(b)
	}
}

// maybeDrop releases the touched pages once enough granules were touched.
// Call it between records (the current record stays valid in any case).
func (d *residency) maybeDrop() {
	if !d.full {
		return
	}
	lo := d.lo &^ (granule - 1) // the mapping starts at a page (and granule) boundary
	hi := min(d.hi, int64(len(d.mapping)))
	if lo < hi {
		if b := d.mapping[lo:hi]; d.deferTo != nil {
			d.deferTo(func() { d.release(b) })
		} else {
			d.release(b)
		}
		d.drops++
	}
	d.n, d.full, d.lo, d.hi = 0, false, 0, 0
}
