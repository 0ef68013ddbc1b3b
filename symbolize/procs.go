package symbolize

import (
	"fmt"

	"github.com/faultline/faultline/perfdata"
)

// Procs follows the processes of one recording: their maps and command
// names, as of the record last observed. Not safe for concurrent use.
type Procs struct {
	Maps *Maps

	comms  map[uint32]string
	noComm map[uint32]string // Comm's names for pids without a COMM record
}

func newProcs() *Procs {
	return &Procs{Maps: newMaps(), comms: map[uint32]string{}, noComm: map[uint32]string{}}
}

// Comm returns the command name of pid as of the current record.
func (s *Procs) Comm(pid uint32) string {
	if c, ok := s.comms[pid]; ok {
		return c
	}
	// Named like perf does; kept, as the profile builder asks per sample.
	c, ok := s.noComm[pid]
	if !ok {
		c = ":" + fmt.Sprint(pid)
		s.noComm[pid] = c
	}
	return c
}

// Observe updates process state from a non-sample record. Call it for every
// record, in time order.
func (s *Procs) Observe(rec perfdata.Record) {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		if r.Pid == perfdata.KernelPid {
			return
		}
		s.Maps.Add(r.Pid, mappingOf(r))
	case *perfdata.Comm:
		if r.Exec {
			s.Maps.exec(r.Pid)
		}
		if r.Pid == r.Tid || s.comms[r.Pid] == "" {
			s.comms[r.Pid] = r.Comm
		}
	case *perfdata.Fork:
		if r.Pid != r.Ppid {
			s.Maps.fork(r.Ppid, r.Pid)
			if c, ok := s.comms[r.Ppid]; ok {
				s.comms[r.Pid] = c
			}
		}
	}
}

// Region says what an address of pid lies in now: the mapping's file or
// its special name, "" when unmapped.
func (s *Procs) Region(pid uint32, addr uint64) *Mapping { return s.Maps.find(pid, addr) }
