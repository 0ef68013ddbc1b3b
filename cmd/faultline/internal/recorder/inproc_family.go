package recorder

import (
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata/schema"
)

// shimRecords reports whether the shim object preloaded for the
// program's allocator family (InProcessSource.Family) records calls of fn:
// the C names always, a family's own entry points in that family's
// object only. A free of any of them is written as free's.
func (ip *inproc) shimRecords(fn shim.Func) bool {
	if fn < shim.NumCFuncs {
		return true
	}
	e := &schema.EntryPoints[fn]
	return e.Role != schema.EntryFree && len(e.Families) > 0 && e.For(ip.family) && shim.HasFamilyObject(ip.family)
}
