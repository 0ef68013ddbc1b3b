package perfdata

// Stable reports whether the byte slices of the current record (a
// sample's Raw and Stack) stay valid until Close, not just until the next
// call to Next: true for records read from a file mapping, whose pages are
// only ever dropped from the page tables, never unmapped before Close;
// false for pipes and decompressed data, whose buffers are
// reused. (The record struct itself and its decoded slices, such as Regs
// and Callchain, are reused either way.) Pipelines use it to hand stacks
// to other goroutines without copying them.
func (r *Reader) Stable() bool {
	return r.cur != nil && r.curChunk == nil && r.src.res.mapping != nil
}

// maxHeldGranules bounds DeferDrops: 64 granules, 128 MiB.
const maxHeldGranules = 64

// DeferDrops is for a caller that reads records after Next returned them
// (on other goroutines): instead of releasing the mapped file's pages
// read so far itself, the reader hands each release to deferTo (on the
// goroutine calling Next) as a function to call once no record delivered
// so far is read any more; it may be called from any goroutine. (A page
// read after its release is faulted back in and stays resident: the
// file's size in RSS.) Releases come every granules 2 MiB granules read:
// 8 when granules is 0, at most 64. No-op for input that is not a mapping.
// DeferDrops(0, nil) restores the default.
func (r *Reader) DeferDrops(granules int, deferTo func(drop func())) {
	r.src.res.limit = min(max(granules, 0), maxHeldGranules)
	r.src.res.deferTo = deferTo
}
