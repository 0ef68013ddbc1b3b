package cfi

// rowCacheSets is the number of 2-way sets of a RowCache: 1024 rows
// (~800 KB), enough for the hot PCs of a compiler and its libraries.
const rowCacheSets = 512

type rowCacheEntry struct {
	t   *Table
	row Row
}

// RowCache is a row cache over any number of Tables for one goroutine:
// parallel unwinders each keep one, so the hot path takes no lock and
// shares no cache lines (Table.Find serializes its callers on a mutex).
// The zero value is ready to use; a RowCache is not safe for concurrent
// use, and it must not outlive its Tables' use.
type RowCache struct {
	e   *[rowCacheSets * 2]rowCacheEntry
	mru [rowCacheSets]uint8

	initial rowState
	stack   []rowState
}

// Find is Table.Find through the cache: a hit copies the cached row
// without allocating; a miss interprets the FDE's instructions up to pc
// (Table's own cache is not consulted) and keeps the row for its range.
func (c *RowCache) Find(t *Table, pc uint64, row *Row) error {
	r, err := c.Lookup(t, pc)
	if err == nil {
		*row = *r
	}
	return err
}

// Lookup is Find without the copy (a row is ~600 bytes, copied for every
// frame of every stack): the row it returns is the cache's, valid until
// the next Lookup or Find on c.
func (c *RowCache) Lookup(t *Table, pc uint64) (*Row, error) {
	if c.e == nil {
		c.e = new([rowCacheSets * 2]rowCacheEntry)
	}
	// Keyed by pc alone: the entry's table tells binaries apart.
	h := pc * 0x9E3779B97F4A7C15
	set := int(h >> (64 - 9)) // log2(rowCacheSets)
	for w := 0; w < 2; w++ {
		if e := &c.e[set*2+w]; e.t == t && e.row.Start <= pc && pc < e.row.End {
			c.mru[set] = uint8(w)
			return &e.row, nil
		}
	}
	victim := 1 - int(c.mru[set])
	c.mru[set] = uint8(victim)
	e := &c.e[set*2+victim]
	s, f, err := t.findFDE(pc)
	if err != nil {
		return nil, err
	}
	e.t = nil
	if err := interpret(s, f, pc, &e.row, &c.initial, &c.stack); err != nil {
		return nil, err
	}
	e.t = t
	return &e.row, nil
}
