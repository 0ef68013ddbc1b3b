package attribute

// liveSet is the set of live allocations of one address space: disjoint
// half-open intervals [start, end) keyed by start, kept in a treap whose
// nodes live in one slice (indices, not pointers) so inserts and removes in
// steady state reuse freed nodes and allocate nothing.
type liveSet struct {
	nodes []node
	free  []int32
	root  int32
	rng   uint32
	n     int
}

type node struct {
	start, end  uint64
	alloc       *Allocation
	prio        uint32
	left, right int32
}

const nilNode = -1

func newLiveSet() *liveSet {
	return &liveSet{root: nilNode, rng: 0x9e3779b9}
}

// Len returns the number of live intervals.
func (s *liveSet) Len() int { return s.n }

func (s *liveSet) newNode(start, end uint64, a *Allocation) int32 {
	// xorshift32: treap priorities need only be well spread, not secret.
	s.rng ^= s.rng << 13
	s.rng ^= s.rng >> 17
	s.rng ^= s.rng << 5
	nd := node{start: start, end: end, alloc: a, prio: s.rng, left: nilNode, right: nilNode}
	if k := len(s.free); k > 0 {
		i := s.free[k-1]
		s.free = s.free[:k-1]
		s.nodes[i] = nd
		return i
	}
	s.nodes = append(s.nodes, nd)
	return int32(len(s.nodes) - 1)
}

// split divides t into keys < key and keys >= key.
func (s *liveSet) split(t int32, key uint64) (int32, int32) {
	if t == nilNode {
		return nilNode, nilNode
	}
	n := &s.nodes[t]
	if n.start < key {
		l, r := s.split(n.right, key)
		s.nodes[t].right = l
		return t, r
	}
	l, r := s.split(n.left, key)
	s.nodes[t].left = r
	return l, t
}

// merge joins l and r where every key of l is below every key of r.
func (s *liveSet) merge(l, r int32) int32 {
	if l == nilNode {
		return r
	}
	if r == nilNode {
		return l
	}
	if s.nodes[l].prio > s.nodes[r].prio {
		s.nodes[l].right = s.merge(s.nodes[l].right, r)
		return l
	}
	s.nodes[r].left = s.merge(l, s.nodes[r].left)
	return r
}

// release frees every node of subtree t, calling fn on each allocation in
// address order.
func (s *liveSet) release(t int32, fn func(*Allocation)) {
	if t == nilNode {
		return
	}
	n := s.nodes[t]
	s.release(n.left, fn)
	if fn != nil {
		fn(n.alloc)
	}
	s.nodes[t].alloc = nil
	s.free = append(s.free, t)
	s.n--
	s.release(n.right, fn)
}

// rightmost returns the node with the largest key of t.
func (s *liveSet) rightmost(t int32) int32 {
	for t != nilNode && s.nodes[t].right != nilNode {
		t = s.nodes[t].right
	}
	return t
}

// Insert adds [start, end) for a. Intervals it overlaps are removed first and
// passed to evicted: their memory was freed and handed out again.
func (s *liveSet) Insert(start, end uint64, a *Allocation, evicted func(*Allocation)) {
	if end <= start {
		end = start + 1
	}
	l, r := s.split(s.root, start)
	m, r := s.split(r, end)
	s.release(m, evicted)
	if last := s.rightmost(l); last != nilNode && s.nodes[last].end > start {
		ll, lm := s.split(l, s.nodes[last].start)
		s.release(lm, evicted)
		l = ll
	}
	s.root = s.merge(s.merge(l, s.newNode(start, end, a)), r)
	s.n++
}

// Find returns the allocation whose interval contains addr, or nil.
func (s *liveSet) Find(addr uint64) *Allocation {
	t := s.root
	best := int32(nilNode)
	for t != nilNode {
		n := &s.nodes[t]
		if n.start <= addr {
			best = t
			t = n.right
		} else {
			t = n.left
		}
	}
	if best != nilNode && addr < s.nodes[best].end {
		return s.nodes[best].alloc
	}
	return nil
}

// Remove deletes the interval starting exactly at start and returns its
// allocation, or nil when there is none.
func (s *liveSet) Remove(start uint64) *Allocation {
	l, r := s.split(s.root, start)
	m, r := s.split(r, start+1)
	var a *Allocation
	if m != nilNode {
		// keys are unique, so m is a single node
		a = s.nodes[m].alloc
		s.nodes[m].alloc = nil
		s.free = append(s.free, m)
		s.n--
	}
	s.root = s.merge(l, r)
	return a
}

// Clear removes every interval, calling fn on each in address order.
func (s *liveSet) Clear(fn func(*Allocation)) {
	s.release(s.root, fn)
	s.root = nilNode
}

// Each calls fn on every live allocation in address order.
func (s *liveSet) Each(fn func(start, end uint64, a *Allocation)) {
	var walk func(t int32)
	walk = func(t int32) {
		if t == nilNode {
			return
		}
		n := s.nodes[t]
		walk(n.left)
		fn(n.start, n.end, n.alloc)
		walk(n.right)
	}
	walk(s.root)
}
