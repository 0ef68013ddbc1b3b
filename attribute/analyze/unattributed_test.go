package analyze

import (
	"errors"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
)

// TestUnattributedSaysWhy: a recording with allocator calls whose faults
// mostly land on anonymous memory nothing recorded covers is a warning
// naming the allocator library the program mapped; with not one fault
// attributed (nor given to a mapping) it is ErrNothingAttributed; a
// recording where the uncovered memory is under half the faults, or a
// few loader pages, or one without any allocator call (NoAllocationsError
// says that) is not.
func TestUnattributedSaysWhy(t *testing.T) {
	ids := []perfdata.BuildID{{Filename: "/usr/bin/app"}, {Filename: "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}}
	st := &attribute.Stats{FaultStats: attribute.FaultStats{Faults: 5000, Attributed: 35}, CallStats: attribute.CallStats{Allocations: 4}}
	classes := map[string]uint64{"[anon]": 3900, "[heap]": 100, "[file] libc.so.6": 965}
	e := unattributed(st, classes, 0, ids)
	if e == nil || e.Allocator != "libjemalloc.so.2" || e.Anon != 4000 || errors.Is(e, ErrNothingAttributed) ||
		!strings.Contains(e.Error(), "4000 of 5000 faults (80%)") || !strings.Contains(e.Error(), "libjemalloc.so.2") {
		t.Errorf("mostly unattributed: %v (%+v)", e, e)
	}
	none := &attribute.Stats{FaultStats: attribute.FaultStats{Faults: 5000}, CallStats: attribute.CallStats{Allocations: 4}}
	if e := unattributed(none, classes, 0, nil); e == nil || !errors.Is(e, ErrNothingAttributed) || e.Allocator != "" {
		t.Errorf("nothing attributed: %v", e)
	}
	if e := unattributed(none, classes, 10, nil); e == nil || errors.Is(e, ErrNothingAttributed) {
		t.Errorf("faults given to the program's mappings: %v", e)
	}
	half := map[string]uint64{"[anon]": 2499}
	if e := unattributed(st, half, 0, ids); e != nil {
		t.Errorf("under half the faults: %v", e)
	}
	few := &attribute.Stats{FaultStats: attribute.FaultStats{Faults: 300}, CallStats: attribute.CallStats{Allocations: 4}}
	if e := unattributed(few, map[string]uint64{"[anon]": EmptyMinPages - 1}, 0, ids); e != nil {
		t.Errorf("a few loader pages: %v", e)
	}
	if e := unattributed(&attribute.Stats{FaultStats: attribute.FaultStats{Faults: 5000}}, classes, 0, ids); e != nil {
		t.Errorf("no allocator call: %v", e)
	}
}
