package cfi

import (
	"debug/elf"
	"reflect"
	"sync"
	"testing"
)

func progTable(t testing.TB) (*Table, []uint64) {
	f, err := elf.Open("../../unwind/testdata/prog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tab, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pcs []uint64
	for _, r := range tab.FDEs() {
		for pc := r.Begin; pc < r.End; pc += 13 {
			pcs = append(pcs, pc)
		}
	}
	return tab, pcs
}

// TestRowCacheMatchesFind: through a RowCache every PC of a static glibc
// binary (every 13th byte of every FDE, misses and hits, evictions
// included) gets the row Table.Find gives it, from several goroutines
// with a cache each (run with -race).
func TestRowCacheMatchesFind(t *testing.T) {
	tab, pcs := progTable(t)
	want := make([]Row, len(pcs))
	for i, pc := range pcs {
		if err := tab.Find(pc, &want[i]); err != nil {
			t.Fatalf("Find(%#x): %v", pc, err)
		}
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c RowCache
			var row Row
			for round := range 2 {
				for k := range pcs {
					i := (k*(2*g+1) + round) % len(pcs)
					if err := c.Find(tab, pcs[i], &row); err != nil {
						t.Errorf("RowCache.Find(%#x): %v", pcs[i], err)
						return
					}
					if !reflect.DeepEqual(row, want[i]) {
						t.Errorf("RowCache.Find(%#x) = %+v, Table.Find %+v", pcs[i], row, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	var c RowCache
	var row Row
	if err := c.Find(tab, 1, &row); err != ErrNoFDE {
		t.Errorf("pc 1: %v, want ErrNoFDE", err)
	}
}

// TestRowCacheAllocs: hits and misses allocate nothing once the cache is
// made.
func TestRowCacheAllocs(t *testing.T) {
	tab, pcs := progTable(t)
	var c RowCache
	var row Row
	i := 0
	c.Find(tab, pcs[0], &row)
	if n := testing.AllocsPerRun(5000, func() {
		i = (i*7919 + 1) % len(pcs)
		c.Find(tab, pcs[i], &row)
	}); n != 0 {
		t.Errorf("RowCache.Find allocates %v times per call", n)
	}
}

// BenchmarkRowCacheFind is BenchmarkFind through a walker's RowCache (no
// lock).
func BenchmarkRowCacheFind(b *testing.B) {
	tab, pcs := benchTable(b)
	hot := pcs[:64]
	var c RowCache
	var row Row
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Find(tab, hot[i&63], &row); err != nil {
			b.Fatal(err)
		}
	}
}
