package analyze

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Selection is what Options.Comms and Options.Pids kept of a recording.
type Selection struct {
	Comms []string
	Pids  []uint32
	// Faults and Calls count the fault samples and allocator entries kept
	// out of all of them (FaultsAll, CallsAll).
	Faults, FaultsAll uint64
	Calls, CallsAll   uint64
	// Kept lists the selected processes as "PID NAME", NAME the last the
	// process had; Others names the programs whose samples were ignored,
	// each once, as their samples named them.
	Kept, Others []string

	kept     map[uint32]bool
	keptPids []uint32
	others   map[string]bool
}

func newSelection(comms []string, pids []uint32) *Selection {
	return &Selection{Comms: comms, Pids: pids, kept: map[uint32]bool{}, others: map[string]bool{}}
}

// finish names the kept processes.
func (s *Selection) finish(comm func(pid uint32) string) {
	for _, pid := range s.keptPids {
		s.Kept = append(s.Kept, strconv.FormatUint(uint64(pid), 10)+" "+comm(pid))
	}
	s.kept, s.keptPids, s.others = nil, nil, nil
}

// keep reports whether a sample of process pid, named comm, on a thread
// named thread ("" when the recording named none) is selected, and counts
// it.
func (s *Selection) keep(role Role, pid uint32, comm, thread string) bool {
	ok := (len(s.Pids) == 0 || slices.Contains(s.Pids, pid)) &&
		(len(s.Comms) == 0 || slices.Contains(s.Comms, comm) || thread != "" && slices.Contains(s.Comms, thread))
	switch role {
	case RoleFault:
		s.FaultsAll++
		if ok {
			s.Faults++
		}
	case RoleAllocEntry:
		s.CallsAll++
		if ok {
			s.Calls++
		}
	}
	if ok && !s.kept[pid] {
		s.kept[pid] = true
		s.keptPids = append(s.keptPids, pid)
	}
	if !ok && !s.others[comm] {
		s.others[comm] = true
		s.Others = append(s.Others, comm)
	}
	return ok
}

// writeText prints the summary's Selected line.
func (s *Selection) writeText(w io.Writer) {
	if len(s.Kept) == 0 {
		fmt.Fprintf(w, "Selected:     %s: no sample matched; the recording's programs: %s\n", s, strings.Join(s.Others, ", "))
		return
	}
	kept := s.Kept[:min(len(s.Kept), 5)]
	procs := strings.Join(kept, ", ")
	if n := len(s.Kept) - len(kept); n > 0 {
		procs += fmt.Sprintf(" and %d more", n)
	}
	what := "process"
	if len(s.Kept) > 1 {
		what = "processes"
	}
	fmt.Fprintf(w, "Selected:     %s: %s %s; %d of %d faults, %d of %d allocator calls", s, what, procs, s.Faults, s.FaultsAll, s.Calls, s.CallsAll)
	if len(s.Others) > 0 {
		fmt.Fprintf(w, " (ignored: %s)", strings.Join(s.Others, ", "))
	}
	fmt.Fprintln(w)
}

// String says what the options asked for: "--comm sort --pid 12".
func (s *Selection) String() string {
	var b []byte
	for _, c := range s.Comms {
		b = fmt.Appendf(b, " --comm %s", c)
	}
	for _, p := range s.Pids {
		b = fmt.Appendf(b, " --pid %d", p)
	}
	if len(b) == 0 {
		return ""
	}
	return string(b[1:])
}
