package recorder

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/faultline/faultline/symbolize/binfile"
	"golang.org/x/sys/unix"
)

// onlineCPUs parses /sys/devices/system/cpu/online ("0-3,5"). Without
// it (a container that mounts no sysfs) it takes the CPUs record may run
// on (sched_getaffinity), which a command it starts inherits.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		var set unix.CPUSet
		if aerr := unix.SchedGetaffinity(0, &set); aerr != nil || set.Count() == 0 {
			return nil, fmt.Errorf("listing CPUs: %w (mount sysfs at /sys)", err)
		}
		var cpus []int
		for c := 0; len(cpus) < set.Count(); c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		return cpus, nil
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// threadsOf lists the threads of a running process.
func threadsOf(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	// The leader first: it lives as long as the process.
	tids := []int{pid}
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil && t != pid {
			tids = append(tids, t)
		}
	}
	return tids, nil
}

// synthesize writes COMM and MMAP2 records for what already exists (-p,
// -a), as perf does: the kernel reports only what happens from now on.
func (s *session) synthesize() error {
	var pids []int
	if s.cfg.All {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		for _, e := range ents {
			if p, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, p)
			}
		}
	} else {
		pids = []int{s.cfg.Pid}
	}
	for _, pid := range pids {
		tids, err := threadsOf(pid)
		if err != nil {
			if s.cfg.All {
				continue // gone meanwhile
			}
			return err
		}
		for _, tid := range tids {
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
			if err != nil {
				continue
			}
			if err := s.w.WriteRecordParts(uint32(perfdata.RecordComm), perfdata.MiscUser,
				commBody(uint32(pid), uint32(tid), strings.TrimSpace(string(comm)), s.trackID)); err != nil {
				return err
			}
		}
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil || len(maps) == 0 {
			if s.cfg.All {
				continue // gone meanwhile, or a kernel thread
			}
			// Without its mappings no address of the process can be
			// placed in a file: the recording would attribute nothing.
			if err != nil {
				return fmt.Errorf("-p %d: cannot read its memory map: %w (a process of another container, or protected by ptrace rules?); record it from where it runs, or record the command itself", pid, err)
			}
			return fmt.Errorf("-p %d: the process has no user-space memory (a kernel thread?): nothing of it to record", pid)
		}
		for _, m := range parseMaps(string(maps)) {
			misc := uint16(perfdata.MiscUser)
			if m.prot&unix.PROT_EXEC == 0 {
				misc |= perfdata.MiscMmapData
			} else {
				s.noteExec(m.name, uint32(pid))
				s.noteBuildID(pid, m)
			}
			if err := s.w.WriteRecordParts(uint32(perfdata.RecordMmap2), misc, mmap2Body(uint32(pid), m, s.trackID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteBuildID keeps the build ID of the file process pid maps at m, an
// executable mapping the process made before the recording (no MMAP2
// record of the kernel's carries it), read from the file mapped itself.
func (s *session) noteBuildID(pid int, m mapping) {
	if !strings.HasPrefix(m.name, "/") || len(s.bids[m.name]) > 0 {
		return
	}
	if id := mappedBuildID(pid, m); id != nil {
		if s.bids == nil {
			s.bids = map[string][]byte{}
		}
		s.bids[m.name] = id
	}
}

// noteExec notes that process pid mapped the executable file name (the
// first process only).
func (s *session) noteExec(name string, pid uint32) {
	if s.mmaps == nil {
		s.mmaps = map[string]uint32{}
	}
	if _, ok := s.mmaps[name]; !ok {
		s.mmaps[name] = pid
	}
}

// sampleID is the sample_id_all trailer: TID, TIME, CPU, IDENTIFIER.
func appendSampleID(b []byte, pid, tid uint32, id uint64) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint32(b, tid)
	b = ne.AppendUint64(b, 0) // time: before anything recorded
	b = ne.AppendUint64(b, 0) // cpu, res
	return ne.AppendUint64(b, id)
}

func commBody(pid, tid uint32, comm string, id uint64) []byte {
	b := binary.NativeEndian.AppendUint32(nil, pid)
	b = binary.NativeEndian.AppendUint32(b, tid)
	b = appendPaddedString(b, comm)
	return appendSampleID(b, pid, tid, id)
}

// appendPaddedString appends s, a NUL and zeros to an 8-byte boundary.
func appendPaddedString(b []byte, s string) []byte {
	b = append(b, s...)
	b = append(b, 0)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

type mapping struct {
	start, end, pgoff uint64
	maj, min          uint32
	ino               uint64
	prot, flags       uint32
	name              string
}

// parseMaps reads /proc/PID/maps lines:
// "start-end perms offset maj:min inode   name".
func parseMaps(text string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok || len(f[1]) < 4 {
			continue
		}
		var m mapping
		var err1, err2, err3, err4 error
		m.start, err1 = strconv.ParseUint(lo, 16, 64)
		m.end, err2 = strconv.ParseUint(hi, 16, 64)
		m.pgoff, err3 = strconv.ParseUint(f[2], 16, 64)
		m.ino, err4 = strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || m.end <= m.start {
			continue
		}
		if ma, mi, ok := strings.Cut(f[3], ":"); ok {
			a, _ := strconv.ParseUint(ma, 16, 32)
			b, _ := strconv.ParseUint(mi, 16, 32)
			m.maj, m.min = uint32(a), uint32(b)
		}
		p := f[1]
		if p[0] == 'r' {
			m.prot |= unix.PROT_READ
		}
		if p[1] == 'w' {
			m.prot |= unix.PROT_WRITE
		}
		if p[2] == 'x' {
			m.prot |= unix.PROT_EXEC
		}
		m.flags = unix.MAP_PRIVATE
		if p[3] == 's' {
			m.flags = unix.MAP_SHARED
		}
		if len(f) >= 6 {
			// A name may hold spaces: take the rest of the line after the
			// inode field.
			line := sc.Text()
			i := strings.Index(line, f[5])
			m.name = strings.TrimRight(line[i:], " ")
		} else {
			m.name = "//anon" // perf's name for anonymous memory
		}
		out = append(out, m)
	}
	return out
}

func mmap2Body(pid uint32, m mapping, id uint64) []byte {
	ne := binary.NativeEndian
	b := ne.AppendUint32(nil, pid)
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint64(b, m.start)
	b = ne.AppendUint64(b, m.end-m.start)
	b = ne.AppendUint64(b, m.pgoff)
	b = ne.AppendUint32(b, m.maj)
	b = ne.AppendUint32(b, m.min)
	b = ne.AppendUint64(b, m.ino)
	b = ne.AppendUint64(b, 0) // ino_generation
	b = ne.AppendUint32(b, m.prot)
	b = ne.AppendUint32(b, m.flags)
	b = appendPaddedString(b, m.name)
	return appendSampleID(b, pid, pid, id)
}

// headFeatures gathers the features known before recording: the probes'
// formats and the machine's description. (Build ids and sample times come
// at the end.)
func (s *session) headFeatures() (*perfdata.WriterFeatures, error) {
	cfg := s.cfg
	f := &perfdata.WriterFeatures{
		Cmdline: cfg.Cmdline,
		Version: "faultline record",
	}
	td, err := s.src.tracingData()
	if err != nil {
		return nil, err
	}
	f.TracingData = td
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		f.Hostname = cstr(uts.Nodename[:])
		f.OSRelease = cstr(uts.Release[:])
		f.Arch = cstr(uts.Machine[:])
	}
	n := uint32(len(s.cpus))
	f.NrCPUsOnline, f.NrCPUsAvail = n, n
	if b, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil {
		if c, err := parseCPUList(strings.TrimSpace(string(b))); err == nil {
			f.NrCPUsAvail = uint32(len(c))
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		f.TotalMemKB = uint64(si.Totalram) * uint64(si.Unit) / 1024
	}
	return f, nil
}

// buildIDs lists the build ids of the executable files mapped.
func (s *session) buildIDs() []perfdata.BuildID {
	var ids []perfdata.BuildID
	var names []string
	for name := range s.mmaps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasPrefix(name, "/") {
			continue // [vdso], //anon, ...
		}
		id := s.bids[name] // what ran; the file may have changed since
		if len(id) == 0 {
			var err error
			if id, err = binfile.FileBuildID(name); err != nil || len(id) == 0 {
				continue
			}
		}
		ids = append(ids, perfdata.BuildID{Pid: -1, Misc: perfdata.MiscUser, ID: id, Filename: name})
	}
	return ids
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ringHeaderPage and ringHeaderEvent are tracefs's events/header_page and
// events/header_event (Linux 6.x, 64-bit): perf's tracing data carries them
// although nothing in a perf.data sample uses the ftrace ring layout they
// describe. The in-process method writes them without reading tracefs.
const (
	ringHeaderPage = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n" +
		"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n" +
		"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n" +
		"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n"
	ringHeaderEvent = "# compressed entry header\n" +
		"\ttype_len    :    5 bits\n" +
		"\ttime_delta  :   27 bits\n" +
		"\tarray       :   32 bits\n\n" +
		"\tpadding     : type == 29\n" +
		"\ttime_extend : type == 30\n" +
		"\ttime_stamp : type == 31\n" +
		"\tdata max type_len  == 28\n"
)

// synthSystems gathers the formats of the events the recorder writes
// itself, by system (the part of the event's name before ':'), in the
// order the systems first appear.
func synthSystems(specs []*spec) []perfdata.TraceSystem {
	var out []perfdata.TraceSystem
	for _, sp := range specs {
		if sp.format == nil {
			continue
		}
		name, _, _ := strings.Cut(sp.name, ":")
		i := slices.IndexFunc(out, func(t perfdata.TraceSystem) bool { return t.Name == name })
		if i < 0 {
			out = append(out, perfdata.TraceSystem{Name: name})
			i = len(out) - 1
		}
		out[i].Formats = append(out[i].Formats, sp.format)
	}
	return out
}

// mapCallSystem is the syscalls group's formats for TRACING_DATA (none
// without memory-map calls).
func mapCallSystem(cfg *Config) []perfdata.TraceSystem {
	if len(cfg.MapCalls) == 0 {
		return nil
	}
	sys := perfdata.TraceSystem{Name: schema.SyscallSystem}
	for _, p := range cfg.MapCalls {
		sys.Formats = append(sys.Formats, p.Format)
	}
	return []perfdata.TraceSystem{sys}
}
