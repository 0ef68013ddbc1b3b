package cli

import (
	"fmt"
	"time"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// defaultBuildIDCacheMax is --buildid-cache-max's default in MB: the
// binaries of one recording rarely reach it (libc 1.9 MB, libstdc++ 2.2 MB,
// the program itself), a system-wide one may.
const defaultBuildIDCacheMax = 1024

// buildIDCache is where the recording's binaries go (rec.BuildIDCacheFor).
func (r *recorder) buildIDCache() (*rec.BuildIDCache, error) {
	return rec.BuildIDCacheFor(r.sys, int64(r.opts.buildIDCacheMax)<<20)
}

// cacheBuildIDs copies the recording's binaries into perf's build-id
// cache, so that analyze names its frames after the files change; what it
// cannot copy becomes a note.
func (r *recorder) cacheBuildIDs(res *rec.Result) {
	if res.NoMmapBuildIDs {
		r.notes.add(fmt.Errorf("this kernel does not put build IDs in MMAP2 records (Linux 5.12+): the recording's build IDs were read from the files after the run"))
	}
	if r.opts.noBuildIDCache || len(res.BuildIDs) == 0 {
		return
	}
	c, err := r.buildIDCache()
	if err != nil {
		r.notes.add(fmt.Errorf("build-id cache: %v; analyze needs the binaries unchanged at their paths", err))
		return
	}
	c.MappedBy = res.MappedBy
	start := time.Now()
	rep, err := c.Add(res.BuildIDs)
	if err != nil {
		r.notes.add(fmt.Errorf("build-id cache: %v; analyze needs the binaries unchanged at their paths (or pass --no-buildid-cache)", err))
		return
	}
	for _, s := range rep.Skipped {
		r.notes.add(fmt.Errorf("not put in the build-id cache: %s", s))
	}
	if rep.OverBudget > 0 {
		r.notes.add(fmt.Errorf("%d binaries (%.1f MB) not put in the build-id cache: over --buildid-cache-max %d MB; analyze needs them unchanged at their paths",
			rep.OverBudget, float64(rep.OverBudgetBytes)/1e6, r.opts.buildIDCacheMax))
	}
	r.logf("build-id cache %s: %d binaries added (%.1f MB), %d already there (%.0f ms)", c.Dir, rep.Added, float64(rep.Bytes)/1e6,
		rep.Present, float64(time.Since(start).Microseconds())/1e3)
}
