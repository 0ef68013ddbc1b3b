package report

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/faultline/faultline/attribute"
)

func weights(ws ...uint64) []Weighted {
	out := make([]Weighted, len(ws))
	for i, w := range ws {
		out[i] = Weighted{Stack: attribute.StackID(i + 1), Weight: w}
	}
	return out
}

// TestSplitLargestRemainder: floors of total·w/W, the rest one each to the
// largest remainders (ties: larger weight, then earlier).
func TestSplitLargestRemainder(t *testing.T) {
	for _, c := range []struct {
		total int64
		ws    []uint64
		want  []int64
	}{
		{520, []uint64{3, 1}, []int64{390, 130}},  // mixed.c: exact
		{7, []uint64{3, 1}, []int64{5, 2}},        // 5.25, 1.75: the .75 gets the 1 left
		{10, []uint64{1, 1, 1}, []int64{4, 3, 3}}, // equal remainders: the earlier
		{10, []uint64{1, 2, 1}, []int64{3, 5, 2}}, // 2.5, 5, 2.5: tie of .5, equal weights: earlier
		{1, []uint64{1, 5}, []int64{0, 1}},        // 1/6 vs 5/6
		{0, []uint64{4, 4}, []int64{0, 0}},
		{1 << 62, []uint64{1 << 40, 3 << 40}, []int64{1 << 60, 3 << 60}}, // no overflow
	} {
		got := splitLargestRemainder(nil, c.total, weights(c.ws...))
		if !slices.Equal(got, c.want) {
			t.Errorf("split %d over %v = %v, want %v", c.total, c.ws, got, c.want)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 1000; i++ {
		n := 1 + rng.Intn(6)
		ws := make([]uint64, n)
		for j := range ws {
			ws[j] = uint64(1 + rng.Intn(100))
		}
		total := rng.Int63n(1 << 40)
		got := splitLargestRemainder(nil, total, weights(ws...))
		var sum int64
		for _, v := range got {
			sum += v
		}
		if sum != total {
			t.Fatalf("split %d over %v = %v: sums to %d", total, ws, got, sum)
		}
	}
}

// TestInferKeepsTotals: Infer moves a leaf-only sample's values onto the
// sampled stacks and labels them inferred; totals do not change; a leaf
// nothing was sampled at stays.
func TestInferKeepsTotals(t *testing.T) {
	b := NewBuilder(ByAlloc, nil)
	b.StackKind = func(id attribute.StackID) string {
		if id >= 100 {
			return StackLeaf
		}
		return StackSampled
	}
	for i := 0; i < 8; i++ {
		b.Allocation(&attribute.Allocation{Site: 100, Size: 10})
	}
	b.Allocation(&attribute.Allocation{Site: 101, Size: 5})
	b.Allocation(&attribute.Allocation{Site: 1, Size: 7})
	b.Infer(func(leaf attribute.StackID, comm string) []Weighted {
		if leaf == 100 {
			return []Weighted{{Stack: 1, Weight: 3}, {Stack: 2, Weight: 1}}
		}
		return nil
	})
	tot := b.StackTotals()
	if tot[StackInferred] != (StackTotal{Allocs: 8, Bytes: 80}) || tot[StackLeaf] != (StackTotal{Allocs: 1, Bytes: 5}) || tot[StackSampled] != (StackTotal{Allocs: 1, Bytes: 7}) {
		t.Errorf("totals %+v", tot)
	}
	got := map[sampleKey][3]int64{}
	for _, k := range b.order {
		got[k] = [3]int64(b.agg[k][:3])
	}
	if v := got[sampleKey{stack: 1, stackKind: StackInferred}]; v != [3]int64{0, 6, 60} {
		t.Errorf("stack 1 inferred %v, want 6 allocs 60 bytes", v)
	}
	if v := got[sampleKey{stack: 2, stackKind: StackInferred}]; v != [3]int64{0, 2, 20} {
		t.Errorf("stack 2 inferred %v, want 2 allocs 20 bytes", v)
	}
}
