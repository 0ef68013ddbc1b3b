package recorder

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Process names a process of the recorded command's tree.
type Process struct {
	Pid  int
	Comm string // /proc/PID/comm
}

// Descendants tells of the processes the command started that were still
// running when it exited (a daemon that double-forked, a job left in the
// background): record follows them until they exit, or until it is
// stopped, and then kills them.
type Descendants struct {
	Procs  []Process // those running at the command's exit, by pid
	Killed bool      // record was stopped first and killed them
}

// descendantsOf lists the processes descended from pid, from /proc.
func descendantsOf(pid int) []Process {
	parent := parents()
	in := map[int]bool{pid: true}
	var out []Process
	for found := true; found; {
		found = false
		for child, p := range parent {
			if in[p] && !in[child] {
				in[child], found = true, true
				comm, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/comm")
				out = append(out, Process{Pid: child, Comm: strings.TrimSuffix(string(comm), "\n")})
			}
		}
	}
	slices.SortFunc(out, func(a, b Process) int { return a.Pid - b.Pid })
	return out
}

// parents maps every process to its parent, from /proc/PID/stat.
func parents() map[int]int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	m := make(map[int]int, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold anything, so read
		// after its last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(string(f[1])); err == nil {
			m[pid] = ppid
		}
	}
	return m
}
