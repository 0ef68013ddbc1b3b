package cli

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// defaultBuildIDCacheMax is --buildid-cache-max's default in MB: the
// binaries of one recording rarely reach it (libc 1.9 MB, libstdc++ 2.2 MB,
// the program itself), a system-wide one may.
const defaultBuildIDCacheMax = 1024

// buildIDCache is where the recording's binaries go: $PERF_BUILDID_DIR,
// else ~/.debug of the user who ran sudo (owning what is created), else
// $HOME/.debug.
func (r *recorder) buildIDCache() (*rec.BuildIDCache, error) {
	c := &rec.BuildIDCache{UID: -1, GID: -1, MaxBytes: int64(r.opts.buildIDCacheMax) << 20}
	if uid, err := strconv.Atoi(r.sys.Getenv("SUDO_UID")); err == nil && uid != 0 && r.sys.Geteuid() == 0 {
		u, err := user.LookupId(strconv.Itoa(uid))
		if err != nil {
			return nil, fmt.Errorf("the sudo user (uid %d) has no home directory to hold the build-id cache: %v", uid, err)
		}
		c.UID, c.GID = uid, -1
		if gid, err := strconv.Atoi(r.sys.Getenv("SUDO_GID")); err == nil {
			c.GID = gid
		}
		c.Dir = filepath.Join(u.HomeDir, ".debug")
	} else if h := r.sys.Getenv("HOME"); h != "" {
		c.Dir = filepath.Join(h, ".debug")
	}
	if d := r.sys.Getenv("PERF_BUILDID_DIR"); d != "" {
		c.Dir = d
	}
	if c.Dir == "" {
		return nil, fmt.Errorf("no home directory for the build-id cache (set HOME or PERF_BUILDID_DIR)")
	}
	return c, nil
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
