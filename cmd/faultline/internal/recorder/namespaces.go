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
	var err error
	if ns.NSpid, err = readNSpid(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
		return ns, err
	}
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	ns.OwnMount = err1 == nil && err2 == nil && self != theirs
	return ns, nil
}

// readNSpid reads the NSpid line of the /proc status file at path.
func readNSpid(path string) ([]int, error) {
	status, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, fmt.Errorf("%s: bad NSpid line %q", path, line)
				}
				ids = append(ids, n)
			}
		}
	}
	return ids, nil
}

// Contained reports whether the process sees other pids or another root.
func (ns Namespaces) Contained() bool { return len(ns.NSpid) > 1 || ns.OwnMount }

// hostThreadIDs returns a translation, for Region.SetHostIDs, of the ids
// process pid's threads see in its innermost PID namespace (nspid, the
// process's there) into record's: the thread whose NSpid line in
// /proc/PID/task/TID/status ends with the id. A thread gone already is
// not translated.
func hostThreadIDs(pid, nspid int) func(p, t uint32) (uint32, uint32, bool) {
	return func(p, t uint32) (uint32, uint32, bool) {
		if int(p) != nspid {
			return 0, 0, false
		}
		dir := fmt.Sprintf("/proc/%d/task", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, 0, false
		}
		for _, e := range ents {
			ids, err := readNSpid(dir + "/" + e.Name() + "/status")
			if err == nil && len(ids) > 1 && ids[len(ids)-1] == int(t) {
				return uint32(pid), uint32(ids[0]), true
			}
		}
		return 0, 0, false
	}
}
