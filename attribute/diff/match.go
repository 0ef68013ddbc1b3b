package diff

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// KeySite's identity, in three steps. A site's group is its site frame's
// function and the library function it went through (via); the source
// file and line are left out of the group, so a function moved to another
// file, a renamed file or lines shifted by an edit keep the group. Within a
// group, every baseline's calls (file, line) are paired with NEW's
// (pairGroup): calls of a file both sides have are paired within that
// file, and a file only one side has with the one file only the other side
// has (a rename or a move). Where both sides have as many calls, they pair
// in source order: an edit that keeps the program's behaviour keeps the
// order of a function's calls. Where the counts differ (a call added,
// removed, or not made by one run), the calls pair by one line shift that
// explains every call of the side with fewer (no shift first, then a shift
// only one explains); where none does, the calls that share a line pair
// and the rest of both sides are one unmatched site of the group: its
// figures are the sums of both sides, and it regresses only as a whole.

// call is one allocation call of a KeySite group: its site frame's source
// file (base name) and line.
type call struct {
	file string
	line int64
}

func (c call) String() string {
	if c.file == "" {
		return strconv.FormatInt(c.line, 10)
	}
	return c.file + ":" + strconv.FormatInt(c.line, 10)
}

func compareCalls(a, b call) int {
	if c := strings.Compare(a.file, b.file); c != 0 {
		return c
	}
	return cmp.Compare(a.line, b.line)
}

// siteCall returns a KeySite site's group and call; ok is false for
// classes, empty stacks and the other keys.
func siteCall(s *Site) (group string, c call, ok bool) {
	if !strings.HasPrefix(s.Key, siteKeyPrefix) || len(s.Frames) == 0 {
		return "", call{}, false
	}
	return s.Key, call{s.Frames[0].File, s.Frames[0].Line}, true
}

// groupCalls returns the distinct calls of each group, sorted.
func groupCalls(sites []Site) map[string][]call {
	out := map[string][]call{}
	for i := range sites {
		g, c, ok := siteCall(&sites[i])
		if !ok || slices.Contains(out[g], c) {
			continue
		}
		out[g] = append(out[g], c)
	}
	for _, cs := range out {
		slices.SortFunc(cs, compareCalls)
	}
	return out
}

// pairing is how a baseline's calls of one group pair with NEW's. The
// calls neither paired nor left to one side alone (a call only that side
// made) are the group's unmatched ones.
type pairing struct {
	pairs                       map[call]call // baseline call → NEW call
	unmatchedBase, unmatchedNew []call
}

func (p *pairing) ambiguous() bool { return len(p.unmatchedBase) > 0 }

// pairGroup pairs a baseline's calls of one group with NEW's, file by file
// (see the top of this file). Both lists are sorted.
func pairGroup(base, new []call) pairing {
	p := pairing{pairs: map[call]call{}}
	bf, nf := fileCalls(base), fileCalls(new)
	var onlyBase, onlyNew []string
	for f := range bf {
		if _, ok := nf[f]; !ok {
			onlyBase = append(onlyBase, f)
		}
	}
	for f := range nf {
		if _, ok := bf[f]; !ok {
			onlyNew = append(onlyNew, f)
		}
	}
	slices.Sort(onlyBase)
	slices.Sort(onlyNew)
	for f, bs := range bf {
		if ns, ok := nf[f]; ok {
			p.pairFile(bs, ns)
		}
	}
	switch {
	case len(onlyBase) == 1 && len(onlyNew) == 1:
		p.pairFile(bf[onlyBase[0]], nf[onlyNew[0]])
	case len(onlyBase) > 0 && len(onlyNew) > 0:
		// Several files came and went: which went where is a guess.
		for _, f := range onlyBase {
			p.unmatchedBase = append(p.unmatchedBase, bf[f]...)
		}
		for _, f := range onlyNew {
			p.unmatchedNew = append(p.unmatchedNew, nf[f]...)
		}
	}
	return p
}

// fileCalls splits a sorted list of calls by file, each part sorted.
func fileCalls(cs []call) map[string][]call {
	out := map[string][]call{}
	for _, c := range cs {
		out[c.file] = append(out[c.file], c)
	}
	return out
}

// maxShiftCalls bounds the calls of one function and file that pairFile
// searches for a line shift (quadratic in them); beyond it only shared
// lines pair. Real functions have a handful of allocation calls.
const maxShiftCalls = 64

// pairFile pairs the calls of one file (or of a file with its renamed or
// moved counterpart), each list sorted by line.
func (p *pairing) pairFile(base, new []call) {
	if len(base) == len(new) {
		for i := range base {
			p.pairs[base[i]] = new[i]
		}
		return
	}
	shift, ok := int64(0), false
	if len(base) <= maxShiftCalls && len(new) <= maxShiftCalls {
		shift, ok = uniqueShift(base, new)
	}
	var restBase, restNew []call
	matched := map[call]bool{}
	for _, b := range base {
		i, found := slices.BinarySearchFunc(new, b.line+shift, func(c call, l int64) int { return cmp.Compare(c.line, l) })
		if found && !matched[new[i]] {
			p.pairs[b] = new[i]
			matched[new[i]] = true
		} else {
			restBase = append(restBase, b)
		}
	}
	for _, n := range new {
		if !matched[n] {
			restNew = append(restNew, n)
		}
	}
	// With a shift that explains every call of the side with fewer, the
	// rest are calls only the other side made (new or vanished sites).
	if !ok && len(restBase) > 0 && len(restNew) > 0 {
		p.unmatchedBase = append(p.unmatchedBase, restBase...)
		p.unmatchedNew = append(p.unmatchedNew, restNew...)
	}
}

// uniqueShift returns the line shift that pairs every call of the shorter
// list with one of the longer: no shift when it does, else the one shift
// that does; ok is false when none does or several do.
func uniqueShift(base, new []call) (shift int64, ok bool) {
	short, long, sign := base, new, int64(1)
	if len(new) < len(base) {
		short, long, sign = new, base, -1
	}
	explains := func(d int64) bool {
		for _, s := range short {
			if _, found := slices.BinarySearchFunc(long, s.line+d, func(c call, l int64) int { return cmp.Compare(c.line, l) }); !found {
				return false
			}
		}
		return true
	}
	if explains(0) {
		return 0, true
	}
	var found []int64
	for _, l := range long {
		d := l.line - short[0].line
		if !slices.Contains(found, d) && explains(d) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return sign * found[0], true
}

// unmatchedSuffix ends the key of a group's unmatched calls.
const unmatchedSuffix = "\x00unmatched"

// siteIdentity is KeySite's keys for NEW and every baseline.
type siteIdentity struct {
	// unmatched names each group's unmatched site by the calls in it.
	unmatched map[string]string
}

// finishSiteKeys ends the KeySite keys of NEW's sites and of every
// baseline's: a baseline's call paired with a NEW call gets that call's
// key; the calls of an ambiguous group left unpaired, and NEW's calls some
// baseline left unpaired there, get the group's unmatched key.
func finishSiteKeys(bases [][]Site, new []Site) siteIdentity {
	newCalls := groupCalls(new)
	pairings := make([]map[string]pairing, len(bases))
	unmatchedNew := map[string]map[call]bool{}
	unmatchedBase := map[string]map[call]bool{}
	for i, sites := range bases {
		pairings[i] = map[string]pairing{}
		for g, cs := range groupCalls(sites) {
			p := pairGroup(cs, newCalls[g])
			pairings[i][g] = p
			if !p.ambiguous() {
				continue
			}
			addCalls(unmatchedNew, g, p.unmatchedNew)
			addCalls(unmatchedBase, g, p.unmatchedBase)
		}
	}
	newKey := func(g string, c call) string {
		if unmatchedNew[g][c] {
			return g + unmatchedSuffix
		}
		return g + "\x00" + c.file + "\x00" + strconv.FormatInt(c.line, 10)
	}
	for j := range new {
		if g, c, ok := siteCall(&new[j]); ok {
			new[j].Key = newKey(g, c)
		}
	}
	for i, sites := range bases {
		for j := range sites {
			g, c, ok := siteCall(&sites[j])
			if !ok {
				continue
			}
			p := pairings[i][g]
			switch nc, paired := p.pairs[c]; {
			case paired:
				sites[j].Key = newKey(g, nc)
			case slices.Contains(p.unmatchedBase, c):
				sites[j].Key = g + unmatchedSuffix
			default:
				sites[j].Key = g + "\x00" + c.file + "\x00" + strconv.FormatInt(c.line, 10) + "\x00gone"
			}
		}
	}
	id := siteIdentity{unmatched: map[string]string{}}
	for g, nc := range unmatchedNew {
		id.unmatched[g+unmatchedSuffix] = unmatchedName(sortedCalls(unmatchedBase[g]), sortedCalls(nc))
	}
	return id
}

func addCalls(m map[string]map[call]bool, g string, cs []call) {
	if m[g] == nil {
		m[g] = map[call]bool{}
	}
	for _, c := range cs {
		m[g][c] = true
	}
}

func sortedCalls(m map[call]bool) []call {
	out := make([]call, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, compareCalls)
	return out
}

// unmatchedName says which calls an unmatched site holds; the site's name
// (its function and via) goes before it.
func unmatchedName(base, new []call) string {
	join := func(cs []call) string {
		s := make([]string, len(cs))
		for i, c := range cs {
			s[i] = c.String()
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("[calls not paired one to one: BASE %s; NEW %s]", join(base), join(new))
}
