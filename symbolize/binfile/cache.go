package binfile

import (
	"errors"
	"sync"
)

// Key identifies one recorded binary. With a build ID the binary is cached
// by it alone (the same file under several names is opened once);
// otherwise by path and, when the MMAP2 record has them, device and inode.
type Key struct {
	Path    string // recorded mapping name, e.g. /usr/lib/x86_64-linux-gnu/libc.so.6 or [vdso]
	BuildID string // hex from the recording (perf's 24-byte zero padding is dropped); "" if none
	Dev     uint64 // makedev(maj, min) from MMAP2 (unix.Mkdev); 0 if unknown
	Ino     uint64 // inode from MMAP2; 0 if unknown
	Gen     uint64 // inode generation from MMAP2; 0 if unknown
	// MapEnd is where the mapping ends in the file (pgoff + len): a file
	// ending well before it is not the one mapped. 0 if unknown. Not part
	// of the binary's identity in the Cache.
	MapEnd uint64
}

func (k Key) cacheKey() Key {
	k.MapEnd = 0
	k.BuildID = normBuildID(k.BuildID)
	if k.BuildID != "" {
		return Key{BuildID: k.BuildID}
	}
	return k
}

// Cache opens each recorded binary once and remembers the outcome,
// failures included, so a missing file is searched for (and reported)
// once. Safe for concurrent use.
type Cache struct {
	loc Locator
	mu  sync.Mutex
	m   map[Key]*cacheEntry
}

type cacheEntry struct {
	once  sync.Once
	b     *Binary
	err   error
	ready chan struct{} // closed when b and err are set
}

// NewCache returns a Cache that finds files with l.
func NewCache(l Locator) *Cache {
	if l.DWARF == nil {
		l.DWARF = &DWARFBudget{}
	}
	return &Cache{loc: l, m: map[Key]*cacheEntry{}}
}

// Open returns the Binary for k, opening it on first use. The Binary
// belongs to the Cache: do not Close it. Errors are as for Locator.Open,
// and the same error comes back on every later call for k.
func (c *Cache) Open(k Key) (*Binary, error) {
	ck := k.cacheKey()
	c.mu.Lock()
	e := c.m[ck]
	if e == nil {
		e = &cacheEntry{ready: make(chan struct{})}
		c.m[ck] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		defer close(e.ready)
		e.b, e.err = c.loc.openKey(k)
	})
	return e.b, e.err
}

// WaitLoaded waits until the background work of every Binary opened so far
// (symbol tables, inflating debug sections; see newBinary) is done, so
// that what follows runs alone: for measurements.
func (c *Cache) WaitLoaded() {
	c.mu.Lock()
	var es []*cacheEntry
	for _, e := range c.m {
		es = append(es, e)
	}
	c.mu.Unlock()
	for _, e := range es {
		<-e.ready // an Open under way finishes first
		if e.b != nil {
			e.b.settle()
		}
	}
}

// Close closes every Binary the Cache opened.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, e := range c.m {
		if e.b != nil {
			errs = append(errs, e.b.Close())
		}
		delete(c.m, k)
	}
	return errors.Join(errs...)
}
