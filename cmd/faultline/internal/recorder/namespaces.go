package recorder

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Namespaces is how a process's view differs from record's: the ids it
// has in the PID namespaces it belongs to, and whether it has a mount
// namespace (so a file system root) of its own. The kernel's records
// name a process by its pid in record's namespace (the perf events are
// opened there); the program's own output uses the innermost one.
type Namespaces struct {
	// NSpid is /proc/PID/status's NSpid line: the pid in record's
	// namespace first, the innermost last; one entry when the process
	// shares record's PID namespace.
	NSpid []int
	// OwnMount: /proc/PID/ns/mnt is not record's own; the process's files
	// are reached through /proc/PID/root.
	OwnMount bool
}

// ProcessNamespaces reads pid's namespaces from /proc.
func ProcessNamespaces(pid int) (Namespaces, error) {
	var ns Namespaces
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ns, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return ns, fmt.Errorf("/proc/%d/status: bad NSpid line %q", pid, line)
				}
				ns.NSpid = append(ns.NSpid, n)
			}
		}
	}
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	ns.OwnMount = err1 == nil && err2 == nil && self != theirs
	return ns, nil
}

// Contained reports whether the process sees other pids or another root.
func (ns Namespaces) Contained() bool { return len(ns.NSpid) > 1 || ns.OwnMount }
