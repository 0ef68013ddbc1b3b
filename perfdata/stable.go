package perfdata

// Stable reports whether the byte slices of the current record (a
// sample's Raw and Stack) stay valid until Close, not just until the next
// call to Next: true for records read from a file mapping, whose pages are
// only ever dropped from the page tables (resident.go), never unmapped
// before Close; false for pipes and decompressed data, whose buffers are
// reused. (The record struct itself and its decoded slices, such as Regs
// and Callchain, are reused either way.) Pipelines use it to hand stacks
// to other goroutines without copying them.
func (r *Reader) Stable() bool {
	return r.cur != nil && r.curChunk == nil && r.src.res.mapping != nil
}

// maxHeldGranules bounds HoldPages: 64 granules, 128 MiB resident.
const maxHeldGranules = 64

// HoldPages lets a caller that reads records after Next returned them (on
// other goroutines) keep the mapped file's pages resident until it is done
// with them: the reader releases the pages touched so far once granules
// 2 MiB granules were touched, not maxGranules, and calls before first, on
// the goroutine calling Next; before returns when no record delivered so
// far is read any more. (A page read after its release would be faulted
// back in and stay resident: the file's size in RSS.) No-op for input that
// is not a mapping. HoldPages(0, nil) restores the default.
func (r *Reader) HoldPages(granules int, before func()) {
	r.src.res.limit = min(max(granules, 0), maxHeldGranules)
	r.src.res.before = before
}
