package analyze

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
)

// ErrNothingAttributed says a recording has allocator calls and faults on
// anonymous memory but not one fault that a recorded allocation or mapping
// explains: no answer at all. The error that says it is an
// *UnattributedError with Nothing set.
var ErrNothingAttributed = errors.New("no fault could be attributed to a recorded allocation")

// UnattributedError is a recording where most faults land on anonymous
// memory ([anon], [heap]) that no recorded allocation or mapping covers:
// typically the memory of an allocator whose own calls were not recorded.
type UnattributedError struct {
	Faults    uint64 // the recording's page faults
	Anon      uint64 // of those, on anonymous memory nothing recorded covers
	Allocator string // the allocator library the program mapped ("" if none known)
	Nothing   bool   // not one fault attributed: matches ErrNothingAttributed
}

func (e *UnattributedError) Error() string {
	var b strings.Builder
	if e.Nothing {
		fmt.Fprintf(&b, "%v: ", ErrNothingAttributed)
	}
	fmt.Fprintf(&b, "%d of %d faults (%.0f%%) are on anonymous memory that no recorded allocation covers", e.Anon, e.Faults, 100*float64(e.Anon)/float64(max(e.Faults, 1)))
	if e.Allocator != "" {
		fmt.Fprintf(&b, "; the program maps %s, whose own calls (operator new and delete, its own API) the recording lacks", e.Allocator)
	}
	return b.String()
}

// Is reports whether target is ErrNothingAttributed and nothing was.
func (e *UnattributedError) Is(target error) bool { return e.Nothing && target == ErrNothingAttributed }

// unattributedShare is the share of faults on uncovered anonymous memory
// past which a recording is said to be mostly unattributed.
const unattributedShare = 0.5

// unattributed explains a recording with allocator calls whose faults
// mostly (or all) land on anonymous memory nothing recorded covers; nil
// when it is not such a recording. classes are the unattributed faults by
// class, mapped the faults given to the program's own mappings, ids the
// recording's build ids (their files name the allocator).
func unattributed(st *attribute.Stats, classes map[string]uint64, mapped uint64, ids []perfdata.BuildID) *UnattributedError {
	anon := classes["[anon]"] + classes["[heap]"]
	if st.Allocations == 0 || anon < EmptyMinPages || float64(anon) < unattributedShare*float64(st.Faults) {
		return nil
	}
	e := &UnattributedError{Faults: st.Faults, Anon: anon, Nothing: st.Attributed == 0 && mapped == 0}
	for _, id := range ids {
		base := path.Base(id.Filename)
		for _, lib := range []string{"libjemalloc", "libtcmalloc", "libmimalloc"} {
			if strings.HasPrefix(base, lib) {
				e.Allocator = base
			}
		}
	}
	return e
}
