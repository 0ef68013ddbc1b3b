package report

import (
	"math/bits"
	"sort"

	"github.com/faultline/faultline/attribute"
)

// StackLabel is the label that says where an allocation's stack came from,
// in profiles of recordings whose allocator entries lack stacks for some
// calls (faultline record's range events): one of StackSampled,
// StackInferred, StackLeaf.
const StackLabel = "stack"

// Values of StackLabel.
const (
	// StackSampled: the call's own stack, from a stack sample of its hit.
	StackSampled = "sampled"
	// StackInferred: the call had no stack; its leaf is exact (where the
	// allocator returned to) and its callers are those sampled at the same
	// leaf, the call's values split over them in proportion.
	StackInferred = "inferred"
	// StackLeaf: the call had no stack and none was sampled at its leaf:
	// the stack is the leaf alone.
	StackLeaf = "leaf"
)

// Weighted is a full stack sampled at a leaf and how many calls had it.
type Weighted struct {
	Stack  attribute.StackID
	Weight uint64
}

func (b *Builder) stackKind(a *attribute.Allocation) string {
	if b.StackKind == nil {
		return ""
	}
	return b.StackKind(a.Site)
}

// Infer replaces every allocation-mode sample whose site is only a leaf
// (StackLeaf) by samples on the stacks callers(leaf, comm) returns for the
// sample's leaf and comm label (CommOf; "" without), labelled
// StackInferred, splitting each value (faults, allocs, bytes) in proportion
// to the weights by largest remainder: the parts add up to the value
// exactly, and equal inputs give equal splits. A leaf callers knows nothing
// about stays as it is. Call it once, before Profile.
func (b *Builder) Infer(callers func(leaf attribute.StackID, comm string) []Weighted) {
	if b.StackKind == nil || callers == nil {
		return
	}
	b.settle()
	order, agg := b.order, b.agg
	b.order, b.agg, b.index = make([]sampleKey, 0, len(order)), make(map[sampleKey]*[nValues]int64, len(agg)), make(map[sampleKey]int, len(agg))
	moved := make([]int, len(order)) // old index → the new index of its (largest) part
	var parts [nValues][]int64
	for oi, k := range order {
		v := agg[k]
		var ws []Weighted
		if k.stackKind == StackLeaf && !k.touch && k.class == "" {
			ws = callers(k.stack, k.comm)
		}
		if len(ws) == 0 {
			moved[oi] = b.addAll(k, v)
			continue
		}
		for i := range parts {
			parts[i] = splitLargestRemainder(parts[i][:0], v[i], ws)
		}
		moved[oi] = -1
		var best int64 = -1
		for j, w := range ws {
			var part [nValues]int64
			zero := true
			for i := range parts {
				part[i] = parts[i][j]
				zero = zero && part[i] == 0
			}
			if zero {
				continue
			}
			nk := k
			nk.stack, nk.stackKind = w.Stack, StackInferred
			ni := b.addAll(nk, &part)
			if part[0]+part[3] > best {
				best, moved[oi] = part[0]+part[3], ni
			}
		}
	}
	for o, i := range b.ownerOf {
		if i >= 0 {
			b.ownerOf[o] = moved[i]
		}
	}
}

// addAll adds every value of v to k's and returns k's index.
func (b *Builder) addAll(k sampleKey, v *[nValues]int64) int {
	i := b.add(k, v[0], v[1], v[2])
	w := b.agg[k]
	for j := 3; j < nValues; j++ {
		w[j] += v[j]
	}
	return i
}

// splitLargestRemainder appends to out the parts of total in proportion to
// ws's weights: each gets floor(total·w/W), and what is left goes one by one
// to the largest remainders (ties: the larger weight, then the earlier
// stack). total must not be negative.
func splitLargestRemainder(out []int64, total int64, ws []Weighted) []int64 {
	var sum uint64
	for _, w := range ws {
		sum += w.Weight
	}
	if sum == 0 || total <= 0 {
		for range ws {
			out = append(out, 0)
		}
		if len(out) > 0 {
			out[len(out)-len(ws)] = total // nothing to weigh by: all to the first
		}
		return out
	}
	type rem struct {
		r uint64
		i int
	}
	rems := make([]rem, len(ws))
	left := total
	for i, w := range ws {
		hi, lo := bits.Mul64(uint64(total), w.Weight)
		q, r := bits.Div64(hi, lo, sum) // q ≤ total: no overflow
		out = append(out, int64(q))
		left -= int64(q)
		rems[i] = rem{r, i}
	}
	sort.SliceStable(rems, func(a, b int) bool {
		if rems[a].r != rems[b].r {
			return rems[a].r > rems[b].r
		}
		return ws[rems[a].i].Weight > ws[rems[b].i].Weight
	})
	for j := 0; left > 0; j++ {
		out[len(out)-len(ws)+rems[j].i]++
		left--
	}
	return out
}

// StackTotal is what the allocations of one stack kind add up to.
type StackTotal struct {
	Allocs, Faults, Bytes int64
}

// StackTotals sums the allocation-mode samples by their `stack` label
// (after Infer); nil without StackKind.
func (b *Builder) StackTotals() map[string]StackTotal {
	if b.StackKind == nil {
		return nil
	}
	out := map[string]StackTotal{}
	for _, k := range b.order {
		if k.stackKind == "" || k.class != "" {
			continue
		}
		v := b.agg[k]
		t := out[k.stackKind]
		t.Faults += v[0]
		t.Allocs += v[1]
		t.Bytes += v[2]
		out[k.stackKind] = t
	}
	return out
}
