package recorder

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// killTree ends pid and every process descended from it. The program runs
// in record's own process group (a terminal's Ctrl-C must reach it, and a
// group of its own would stop it on terminal reads), so the group cannot be
// killed; its descendants are found by parent pid instead. Each found
// process is stopped first, so that none forks past the search, then all
// are killed.
func killTree(pid int) {
	stopped := map[int]bool{pid: true}
	unix.Kill(pid, unix.SIGSTOP)
	for {
		found := false
		for child, parent := range parents() {
			if stopped[parent] && !stopped[child] {
				unix.Kill(child, unix.SIGSTOP)
				stopped[child], found = true, true
			}
		}
		if !found {
			break
		}
	}
	for p := range stopped {
		unix.Kill(p, unix.SIGKILL)
	}
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
