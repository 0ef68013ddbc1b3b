package schema

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IsShimFile reports whether a mapping's file is faultline record's
// in-process shim: the memfd it preloads from (/memfd:faultline-...), or a
// copy of the object (libfaultline-shim*.so).
func IsShimFile(file string) bool {
	return strings.HasPrefix(file, "/memfd:faultline-") || strings.HasPrefix(filepath.Base(file), "libfaultline-shim")
}

// IsRingsFile reports whether a mapping's file is the shim's rings (the
// memfd record shares with the program): a process maps it when its shim
// attaches, at its first allocator call.
func IsRingsFile(file string) bool { return strings.HasPrefix(file, "/memfd:faultline-rings") }

// ExecProcess is a program a process ran: its pid and the comm of the exec.
type ExecProcess struct {
	Pid  uint32
	Comm string
}

// PreloadCheck finds the programs of an in-process recording whose calls
// it does not hold, from the kernel's records alone. After an exec (COMM
// with the exec flag), up to the process's next exec or exit:
//   - no shim file mapped: the program ran without the shim (it set its own
//     LD_PRELOAD, cleared its environment, or is static or set-uid);
//   - the shim mapped but never the rings: the shim, which attaches as it
//     loads, could not reach record's rings (privileges dropped before the
//     exec: the rings are reachable by record's user only).
//
// A recording in which no process maps the shim is not in-process, and
// the check reports nothing for it.
type PreloadCheck struct {
	open     map[uint32]*execState
	missed   []ExecProcess
	detached []ExecProcess
	shimmed  bool
}

type execState struct {
	comm                string
	mapped, shim, rings bool
}

// Exec notes that pid ran a program named comm.
func (c *PreloadCheck) Exec(pid uint32, comm string) {
	c.settle(pid)
	if c.open == nil {
		c.open = map[uint32]*execState{}
	}
	c.open[pid] = &execState{comm: comm}
}

// Mmap notes that pid mapped file. The first file an exec maps is the
// program itself: when that is the shim, the process is record's launcher,
// not a program of the recording.
func (c *PreloadCheck) Mmap(pid uint32, file string) {
	shim, rings := IsShimFile(file), IsRingsFile(file)
	c.shimmed = c.shimmed || shim
	e := c.open[pid]
	if e == nil || !strings.HasPrefix(file, "/") || strings.HasPrefix(file, "//anon") {
		return // not a file: [stack], [vdso], //anon
	}
	if !e.mapped && shim {
		delete(c.open, pid)
		return
	}
	e.mapped = true
	e.shim = e.shim || shim
	e.rings = e.rings || rings
}

// Exit notes that process pid ended.
func (c *PreloadCheck) Exit(pid uint32) { c.settle(pid) }

func (c *PreloadCheck) settle(pid uint32) {
	e := c.open[pid]
	switch {
	case e == nil:
		return
	case !e.shim:
		c.missed = append(c.missed, ExecProcess{pid, e.comm})
	case !e.rings:
		c.detached = append(c.detached, ExecProcess{pid, e.comm})
	}
	delete(c.open, pid)
}

// Result returns, by pid, the programs that ran without the shim, and
// those whose shim never reached the rings, counting those still running
// at the end of the recording.
func (c *PreloadCheck) Result() (missed, detached []ExecProcess) {
	if !c.shimmed {
		return nil, nil
	}
	missed, detached = slices.Clone(c.missed), slices.Clone(c.detached)
	for pid, e := range c.open {
		switch {
		case !e.shim:
			missed = append(missed, ExecProcess{pid, e.comm})
		case !e.rings:
			detached = append(detached, ExecProcess{pid, e.comm})
		}
	}
	byPid := func(a, b ExecProcess) int { return int(a.Pid) - int(b.Pid) }
	slices.SortFunc(missed, byPid)
	slices.SortFunc(detached, byPid)
	return missed, detached
}

// NameProcesses names procs for a line: "app 123, env 124", the first
// five of them and how many more.
func NameProcesses(procs []ExecProcess) string {
	var b strings.Builder
	for i, p := range procs {
		if i == 5 {
			b.WriteString(", " + strconv.Itoa(len(procs)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Comm + " " + strconv.Itoa(int(p.Pid)))
	}
	return b.String()
}
