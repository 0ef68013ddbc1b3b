package schema

// AllocKind is the allocator function an allocation came from.
type AllocKind uint8

// Allocator functions the tracker understands.
const (
	KindMalloc   AllocKind = iota // malloc, operator new (which calls malloc)
	KindCalloc                    // calloc: zeroed by definition
	KindRealloc                   // realloc: moves an older allocation
	KindMemalign                  // aligned_alloc, memalign, valloc, pvalloc, posix_memalign
	// KindReallocArray: reallocarray, which glibc tail-calls realloc with:
	// a kind of its own so both calls stay in flight and their two returns
	// (one return, both uretprobes) make one allocation.
	KindReallocArray
	// KindMmap: an anonymous mapping the program made itself (an mmap
	// call outside any allocator call): a Python arena, a JIT or runtime
	// heap, a custom pool. Never fed to the Tracker; faults it leaves
	// unexplained in such a mapping go to it (analyze).
	KindMmap
)

var kindNames = [...]string{"malloc", "calloc", "realloc", "memalign", "reallocarray", "mmap"}

func (k AllocKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}
