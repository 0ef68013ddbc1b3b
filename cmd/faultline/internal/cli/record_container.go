package cli

import (
	"fmt"
	"strings"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// noteNamespaces says, for -p of a process in a container (a PID or mount
// namespace of its own), how its pids and files are seen: the recording
// names it by the host's pid, and its binaries are read through
// /proc/PID/root (uprobes on the container's libc, build IDs and the
// build-id cache from the files it mapped; in-process, the shim's copy
// is written into its root).
func (r *recorder) noteNamespaces(pid int) {
	ns, err := rec.ProcessNamespaces(pid)
	if err != nil || !ns.Contained() {
		return
	}
	var what []string
	if n := len(ns.NSpid); n > 1 {
		what = append(what, fmt.Sprintf("is pid %d in its own PID namespace (the recording names it %d, as the host does)", ns.NSpid[n-1], pid))
	}
	if ns.OwnMount {
		what = append(what, fmt.Sprintf("has its own root: its binaries are read through /proc/%d/root", pid))
	}
	r.logf("process %d %s", pid, strings.Join(what, " and "))
}
