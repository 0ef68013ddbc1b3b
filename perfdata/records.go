package perfdata

import (
	"math"
	"math/bits"
)

// This file holds one struct and one parser per record type. Parsers take
// the record's bytes after the 8-byte header in a buf and fill a reused
// struct; the Reader checks b.err once afterwards.

// Sample is PERF_RECORD_SAMPLE.
//
// Slices (Callchain, Raw, Regs, Stack, ...) are valid only until the next
// call to Reader.Next. Byte slices point into the reader's input (the file
// mapping, or a reused buffer for pipes and compressed data).
type Sample struct {
	RecordCommon
	Event     *Event // resolved from the sample id (or the only attr)
	IP        uint64
	Addr      uint64
	Period    uint64
	Callchain []uint64 // raw, including PERF_CONTEXT_* markers
	Raw       []byte   // PERF_SAMPLE_RAW payload (tracepoint data)
	RegsABI   uint64   // PERF_SAMPLE_REGS_ABI_*; 0 = none
	RegsMask  uint64   // the attr's sample_regs_user
	Regs      []uint64 // user regs in mask bit order (lowest bit first)
	Stack     []byte   // PERF_SAMPLE_STACK_USER copy, truncated to dyn_size; points into the reader's buffer

	StackSize     uint64     // PERF_SAMPLE_STACK_USER: bytes copied (before the dyn_size cut)
	Read          ReadValues // PERF_SAMPLE_READ
	BranchHWIndex uint64     // PERF_SAMPLE_BRANCH_STACK hw_idx (when the attr asks for it)
	Branches      []Branch   // PERF_SAMPLE_BRANCH_STACK entries
	BranchCounts  []uint64   // PERF_SAMPLE_BRANCH_COUNTERS values, one per branch
	Weight        uint64     // PERF_SAMPLE_WEIGHT or PERF_SAMPLE_WEIGHT_STRUCT (var1_dw in the low 32 bits)
	DataSrc       uint64     // PERF_SAMPLE_DATA_SRC
	Transaction   uint64     // PERF_SAMPLE_TRANSACTION
	RegsIntrABI   uint64     // PERF_SAMPLE_REGS_INTR abi
	RegsIntrMask  uint64     // the attr's sample_regs_intr
	RegsIntr      []uint64   // PERF_SAMPLE_REGS_INTR values
	PhysAddr      uint64     // PERF_SAMPLE_PHYS_ADDR
	Cgroup        uint64     // PERF_SAMPLE_CGROUP
	DataPageSize  uint64     // PERF_SAMPLE_DATA_PAGE_SIZE
	CodePageSize  uint64     // PERF_SAMPLE_CODE_PAGE_SIZE
	Aux           []byte     // PERF_SAMPLE_AUX
}

// ReadValues is a PERF_SAMPLE_READ or PERF_RECORD_READ payload.
type ReadValues struct {
	TimeEnabled, TimeRunning uint64
	Values                   []ReadValue // one, or one per group member with PERF_FORMAT_GROUP
}

// ReadValue is one counter value of ReadValues.
type ReadValue struct {
	Value, ID, Lost uint64
}

// Branch is one perf_branch_entry.
type Branch struct {
	From, To, Flags uint64
}

// Mmap is PERF_RECORD_MMAP or PERF_RECORD_MMAP2 (Type tells which).
type Mmap struct {
	RecordCommon
	Pid, Tid           uint32
	Addr, Len, Pgoff   uint64
	Maj, Min           uint32
	Ino, InoGeneration uint64
	Prot, Flags        uint32
	BuildID            []byte // MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID
	Filename           string
}

// KernelPid is the pid of the kernel's own MMAP records (-1): the kernel
// image and modules, not a process.
const KernelPid = ^uint32(0)

// protExec is PROT_EXEC (include/uapi/asm-generic/mman-common.h).
const protExec = 0x4

// Executable reports whether the mapping holds code: PROT_EXEC in an MMAP2
// record, or an MMAP record without PERF_RECORD_MISC_MMAP_DATA (MMAP records
// carry no protection bits).
func (m *Mmap) Executable() bool {
	return m.Prot&protExec != 0 || (m.Type == RecordMmap && m.Misc&MiscMmapData == 0)
}

// Comm is PERF_RECORD_COMM; Exec is set when misc has PERF_RECORD_MISC_COMM_EXEC.
type Comm struct {
	RecordCommon
	Pid, Tid uint32
	Comm     string
	Exec     bool
}

// Fork is PERF_RECORD_FORK: task Pid/Tid was created by Ppid/Ptid (a new
// thread when Pid == Ppid).
type Fork struct {
	RecordCommon
	Pid, Ppid, Tid, Ptid uint32
	Time                 uint64
}

// Exit is PERF_RECORD_EXIT: task Pid/Tid ended. It has Fork's layout.
type Exit struct {
	RecordCommon
	Pid, Ppid, Tid, Ptid uint32
	Time                 uint64
}

// Lost is PERF_RECORD_LOST: Count events dropped from one ring buffer,
// which all events on that CPU share; ID (and Event, when it resolves) only
// names the buffer's owner. perf 6.x also writes LostSamples for the same
// losses: per-event counts come from LostSamples alone.
type Lost struct {
	RecordCommon
	Event *Event
	ID    uint64
	Count uint64
}

// LostSamples is PERF_RECORD_LOST_SAMPLES: Count samples of Event (from the
// record's sample id; nil when it does not resolve) the kernel dropped.
type LostSamples struct {
	RecordCommon
	Event *Event
	Count uint64
}

// Raw is any record the decoder does not parse: its bytes after the header.
type Raw struct {
	RecordCommon
	Data []byte
}

// Throttle is PERF_RECORD_THROTTLE or PERF_RECORD_UNTHROTTLE (Type tells which).
type Throttle struct {
	RecordCommon
	Time, ID, StreamID uint64
}

// Read is PERF_RECORD_READ.
type Read struct {
	RecordCommon
	Pid, Tid uint32
	Values   ReadValues
}

// Aux is PERF_RECORD_AUX.
type Aux struct {
	RecordCommon
	AuxOffset, AuxSize, Flags uint64
}

// ItraceStart is PERF_RECORD_ITRACE_START.
type ItraceStart struct {
	RecordCommon
	Pid, Tid uint32
}

// Switch is PERF_RECORD_SWITCH or PERF_RECORD_SWITCH_CPU_WIDE (which also
// names the other task).
type Switch struct {
	RecordCommon
	Out                      bool // PERF_RECORD_MISC_SWITCH_OUT
	NextPrevPid, NextPrevTid uint32
}

// Namespaces is PERF_RECORD_NAMESPACES.
type Namespaces struct {
	RecordCommon
	Pid, Tid   uint32
	Namespaces []NamespaceLink
}

// NamespaceLink is one (dev, inode) pair of a Namespaces record.
type NamespaceLink struct{ Dev, Ino uint64 }

// Ksymbol is PERF_RECORD_KSYMBOL.
type Ksymbol struct {
	RecordCommon
	Addr     uint64
	Len      uint32
	KsymType uint16
	Flags    uint16
	Name     string
}

// BPFEvent is PERF_RECORD_BPF_EVENT.
type BPFEvent struct {
	RecordCommon
	EventType, Flags uint16
	ID               uint32
	Tag              [8]byte
}

// Cgroup is PERF_RECORD_CGROUP.
type Cgroup struct {
	RecordCommon
	ID   uint64
	Path string
}

// TextPoke is PERF_RECORD_TEXT_POKE.
type TextPoke struct {
	RecordCommon
	Addr     uint64
	Old, New []byte
}

// Marker is a record without payload: PERF_RECORD_FINISHED_ROUND and
// PERF_RECORD_FINISHED_INIT.
type Marker struct {
	RecordCommon
}

// IDIndex is PERF_RECORD_ID_INDEX: which attr, cpu and thread each sample id
// belongs to.
type IDIndex struct {
	RecordCommon
	Entries []IDIndexEntry
}

// IDIndexEntry is one entry of IDIndex.
type IDIndexEntry struct{ ID, Idx, CPU, Tid uint64 }

// ThreadMap is PERF_RECORD_THREAD_MAP.
type ThreadMap struct {
	RecordCommon
	Threads []ThreadMapEntry
}

// ThreadMapEntry is one thread of ThreadMap.
type ThreadMapEntry struct {
	Pid  uint64
	Comm string
}

// CPUMap is PERF_RECORD_CPU_MAP. CPUs lists the CPUs (-1 means "any").
type CPUMap struct {
	RecordCommon
	CPUs []int
}

// TimeConv is PERF_RECORD_TIME_CONV: how to turn TSC values into perf time.
type TimeConv struct {
	RecordCommon
	TimeShift, TimeMult, TimeZero, TimeCycles, TimeMask uint64
	CapUserTimeZero, CapUserTimeShort                   bool
}

// Stat is PERF_RECORD_STAT (perf stat record).
type Stat struct {
	RecordCommon
	ID            uint64
	CPU, Thread   uint32
	Val, Ena, Run uint64
}

// StatRound is PERF_RECORD_STAT_ROUND.
type StatRound struct {
	RecordCommon
	RoundType, Time uint64
}

// StatConfig is PERF_RECORD_STAT_CONFIG: tag/value pairs.
type StatConfig struct {
	RecordCommon
	Entries []StatConfigEntry
}

// StatConfigEntry is one tag/value pair of StatConfig.
type StatConfigEntry struct{ Tag, Val uint64 }

// EventUpdate is PERF_RECORD_EVENT_UPDATE (pipe mode: event names, units,
// scales, cpus). Name and Unit are set for those update types; Data holds
// the payload otherwise.
type EventUpdate struct {
	RecordCommon
	UpdateType uint64
	ID         uint64
	Name, Unit string
	Scale      float64
	Data       []byte
}

// HeaderAttr is PERF_RECORD_HEADER_ATTR (pipe mode): one attr and its ids.
type HeaderAttr struct {
	RecordCommon
	Attr Attr
	IDs  []uint64
}

// HeaderTracingData is PERF_RECORD_HEADER_TRACING_DATA (pipe mode); Data is
// the tracing data that follows the record in the stream.
type HeaderTracingData struct {
	RecordCommon
	Data []byte
}

// HeaderBuildID is PERF_RECORD_HEADER_BUILD_ID (pipe mode).
type HeaderBuildID struct {
	RecordCommon
	BuildID BuildID
}

// HeaderFeature is PERF_RECORD_HEADER_FEATURE (pipe mode): a feature section
// in a record. The reader has applied it to Meta already.
type HeaderFeature struct {
	RecordCommon
	Feature int
	Data    []byte
}

// Auxtrace is PERF_RECORD_AUXTRACE; Data is the trace data that follows it.
type Auxtrace struct {
	RecordCommon
	Size, Offset, Reference uint64
	Idx, Tid, CPU           uint32
	Data                    []byte
}

// records is the set of reused record structs of a Reader, indexed by
// record type in byType.
type records struct {
	sample Sample
	raw    Raw
	kernel kernelRecords
	user   userRecords

	byType [RecordBPFMetadata + 1]Record
}

// kernelRecords are the reused structs of the records the kernel writes.
type kernelRecords struct {
	mmap        Mmap
	comm        Comm
	fork        Fork
	exit        Exit
	lost        Lost
	lostSamples LostSamples
	throttle    Throttle
	read        Read
	aux         Aux
	itrace      ItraceStart
	sw          Switch
	ns          Namespaces
	ksym        Ksymbol
	bpf         BPFEvent
	cgroup      Cgroup
	poke        TextPoke
}

// userRecords are the reused structs of the records perf itself writes.
type userRecords struct {
	marker      Marker
	idIndex     IDIndex
	threadMap   ThreadMap
	cpuMap      CPUMap
	timeConv    TimeConv
	stat        Stat
	statRound   StatRound
	statConfig  StatConfig
	eventUpdate EventUpdate
	headerAttr  HeaderAttr
	tracing     HeaderTracingData
	buildID     HeaderBuildID
	feature     HeaderFeature
	auxtrace    Auxtrace
}

// index fills byType: the reused struct each record type the decoder
// parses is decoded into (Throttle, Switch and Marker serve two types each).
func (rs *records) index() {
	rs.byType = [len(rs.byType)]Record{
		RecordMmap:          &rs.kernel.mmap,
		RecordMmap2:         &rs.kernel.mmap,
		RecordComm:          &rs.kernel.comm,
		RecordFork:          &rs.kernel.fork,
		RecordExit:          &rs.kernel.exit,
		RecordLost:          &rs.kernel.lost,
		RecordLostSamples:   &rs.kernel.lostSamples,
		RecordThrottle:      &rs.kernel.throttle,
		RecordUnthrottle:    &rs.kernel.throttle,
		RecordRead:          &rs.kernel.read,
		RecordAux:           &rs.kernel.aux,
		RecordItraceStart:   &rs.kernel.itrace,
		RecordSwitch:        &rs.kernel.sw,
		RecordSwitchCPUWide: &rs.kernel.sw,
		RecordNamespaces:    &rs.kernel.ns,
		RecordKsymbol:       &rs.kernel.ksym,
		RecordBPFEvent:      &rs.kernel.bpf,
		RecordCgroup:        &rs.kernel.cgroup,
		RecordTextPoke:      &rs.kernel.poke,
		RecordFinishedRound: &rs.user.marker,
		RecordFinishedInit:  &rs.user.marker,
		RecordIDIndex:       &rs.user.idIndex,
		RecordThreadMap:     &rs.user.threadMap,
		RecordCPUMap:        &rs.user.cpuMap,
		RecordTimeConv:      &rs.user.timeConv,
		RecordStat:          &rs.user.stat,
		RecordStatRound:     &rs.user.statRound,
		RecordStatConfig:    &rs.user.statConfig,
		RecordEventUpdate:   &rs.user.eventUpdate,
		RecordHeaderAttr:    &rs.user.headerAttr,
		RecordHeaderTracing: &rs.user.tracing,
		RecordHeaderBuildID: &rs.user.buildID,
		RecordHeaderFeature: &rs.user.feature,
		RecordAuxtrace:      &rs.user.auxtrace,
	}
}

// of returns the reused struct that records of type typ are decoded into:
// Raw for the types the decoder does not parse.
func (rs *records) of(typ RecordType) Record {
	if int(typ) < len(rs.byType) && rs.byType[typ] != nil {
		return rs.byType[typ]
	}
	return &rs.raw
}

// idTrailerMask are the sample_type bits that appear in a sample_id_all trailer.
const idTrailerMask = SampleTID | SampleTime | SampleID_ | SampleStreamID | SampleCPU | SampleIdentifier

// trailerLen is the size of the sample_id_all trailer for a sample_type.
func trailerLen(st SampleFormat) int {
	return 8 * bits.OnesCount64(uint64(st&idTrailerMask))
}

// parseTrailer reads the sample_id_all trailer at the end of body into id
// and returns the length of body without it.
func parseTrailer(b []byte, st SampleFormat, bo byteOrder, id *SampleID) (int, bool) {
	n := trailerLen(st)
	if n > len(b) {
		return len(b), false
	}
	p := len(b) - n
	t := makeBuf(b[p:], 0, bo, "sample_id trailer") // long enough: no errors
	id.Has = uint64(st & idTrailerMask)
	if st&SampleTID != 0 {
		id.Pid, id.Tid = t.u32(), t.u32()
	}
	id.Time = t.u64If(st&SampleTime != 0)
	id.ID = t.u64If(st&SampleID_ != 0)
	id.StreamID = t.u64If(st&SampleStreamID != 0)
	if st&SampleCPU != 0 {
		id.CPU, _ = t.u32(), t.u32() // u32 cpu, u32 res
	}
	if st&SampleIdentifier != 0 {
		id.ID = t.u64()
	}
	return p, true
}

// parseSample decodes a sample body (after the header) for event ev.
func parseSample(s *Sample, b *buf, ev *Event) {
	a := &ev.Attr
	st := a.SampleType
	s.Event = ev
	s.SampleID = SampleID{Has: uint64(st & idTrailerMask)}
	if st&SampleIdentifier != 0 {
		s.ID = b.u64()
	}
	s.IP = b.u64If(st&SampleIP != 0)
	if st&SampleTID != 0 {
		s.Pid, s.Tid = b.u32(), b.u32()
	}
	s.Time = b.u64If(st&SampleTime != 0)
	s.Addr = b.u64If(st&SampleAddr != 0)
	if st&SampleID_ != 0 { // perf writes the same id as SampleIdentifier
		s.ID = b.u64()
	}
	s.StreamID = b.u64If(st&SampleStreamID != 0)
	if st&SampleCPU != 0 {
		s.CPU, _ = b.u32(), b.u32() // u32 cpu, u32 res
	}
	s.Period = b.u64If(st&SamplePeriod != 0)
	s.Read.Values = s.Read.Values[:0]
	s.Read.TimeEnabled, s.Read.TimeRunning = 0, 0
	if st&SampleRead != 0 {
		parseReadValues(&s.Read, b, a.ReadFormat)
	}
	s.Callchain = s.Callchain[:0]
	if st&SampleCallchain != 0 {
		n := b.u64()
		s.Callchain = b.u64s(s.Callchain, n)
	}
	s.Raw = nil
	if st&SampleRaw != 0 {
		n := b.u32()
		s.Raw = b.bytes(uint64(n))
	}
	s.BranchHWIndex = 0
	s.Branches = s.Branches[:0]
	s.BranchCounts = s.BranchCounts[:0]
	if st&SampleBranchStack != 0 {
		n := b.u64()
		if a.BranchSampleType&branchHWIndex != 0 {
			s.BranchHWIndex = b.u64()
		}
		if n > uint64(b.left())/24 {
			b.fail(int(min(n, 1<<50) * 24))
		} else {
			for i := uint64(0); i < n; i++ {
				s.Branches = append(s.Branches, Branch{b.u64(), b.u64(), b.u64()})
			}
			if a.BranchSampleType&branchCounters != 0 {
				s.BranchCounts = b.u64s(s.BranchCounts, n)
			}
		}
	}
	s.RegsMask = a.SampleRegsUser
	s.RegsABI, s.Regs = 0, s.Regs[:0]
	if st&SampleRegsUser != 0 {
		s.RegsABI, s.Regs = parseRegs(b, s.RegsMask, s.Regs)
	}
	s.Stack = nil
	s.StackSize = 0
	if st&SampleStackUser != 0 {
		n := b.u64()
		s.StackSize = n
		data := b.bytes(n)
		if n != 0 {
			dyn := b.u64()
			if dyn < uint64(len(data)) {
				data = data[:dyn]
			}
		}
		s.Stack = data
	}
	s.Weight = b.u64If(st&(SampleWeight|SampleWeightStruct) != 0)
	s.DataSrc = b.u64If(st&SampleDataSrc != 0)
	s.Transaction = b.u64If(st&SampleTransaction != 0)
	s.RegsIntrMask = a.SampleRegsIntr
	s.RegsIntrABI, s.RegsIntr = 0, s.RegsIntr[:0]
	if st&SampleRegsIntr != 0 {
		s.RegsIntrABI, s.RegsIntr = parseRegs(b, s.RegsIntrMask, s.RegsIntr)
	}
	s.PhysAddr = b.u64If(st&SamplePhysAddr != 0)
	s.Cgroup = b.u64If(st&SampleCgroup != 0)
	s.DataPageSize = b.u64If(st&SampleDataPageSize != 0)
	s.CodePageSize = b.u64If(st&SampleCodePageSize != 0)
	s.Aux = nil
	if st&SampleAux != 0 {
		n := b.u64()
		s.Aux = b.bytes(n)
	}
}

// parseRegs reads a PERF_SAMPLE_REGS_USER or PERF_SAMPLE_REGS_INTR block into
// dst (reused): the ABI, then one u64 per bit of mask unless the ABI is
// PERF_SAMPLE_REGS_ABI_NONE (0), when no registers follow.
func parseRegs(b *buf, mask uint64, dst []uint64) (abi uint64, regs []uint64) {
	abi = b.u64()
	if abi == 0 {
		return 0, dst[:0]
	}
	return abi, b.u64s(dst, uint64(bits.OnesCount64(mask)))
}

// parseReadValues reads a read_format-shaped block (PERF_SAMPLE_READ, or
// PERF_RECORD_READ's values) into v, reusing v.Values.
func parseReadValues(v *ReadValues, b *buf, rf ReadFormat) {
	v.Values = v.Values[:0]
	if rf&ReadGroup != 0 {
		n := b.u64()
		v.TimeEnabled = b.u64If(rf&ReadTotalTimeEnabled != 0)
		v.TimeRunning = b.u64If(rf&ReadTotalTimeRunning != 0)
		per := 1 + bits.OnesCount64(uint64(rf&(ReadID|ReadLost)))
		if n > uint64(b.left()/(8*per)) {
			b.fail(int(min(n, 1<<50)) * 8 * per)
			return
		}
		for i := uint64(0); i < n; i++ {
			x := ReadValue{Value: b.u64()}
			x.ID = b.u64If(rf&ReadID != 0)
			x.Lost = b.u64If(rf&ReadLost != 0)
			v.Values = append(v.Values, x)
		}
		return
	}
	// One counter: its value comes before the times, its id and lost count
	// after them.
	x := ReadValue{Value: b.u64()}
	v.TimeEnabled = b.u64If(rf&ReadTotalTimeEnabled != 0)
	v.TimeRunning = b.u64If(rf&ReadTotalTimeRunning != 0)
	x.ID = b.u64If(rf&ReadID != 0)
	x.Lost = b.u64If(rf&ReadLost != 0)
	v.Values = append(v.Values, x)
}

func parseMmap(m *Mmap, b *buf, typ RecordType, misc uint16) {
	m.Pid = b.u32()
	m.Tid = b.u32()
	m.Addr = b.u64()
	m.Len = b.u64()
	m.Pgoff = b.u64()
	m.Maj, m.Min, m.Ino, m.InoGeneration, m.Prot, m.Flags = 0, 0, 0, 0, 0, 0
	m.BuildID = nil
	if typ == RecordMmap2 {
		if misc&MiscMmapBuildID != 0 {
			n := b.u8()
			b.u8()
			b.u16()
			id := b.bytes(20)
			if int(n) <= len(id) {
				id = id[:n]
			}
			m.BuildID = id
		} else {
			m.Maj = b.u32()
			m.Min = b.u32()
			m.Ino = b.u64()
			m.InoGeneration = b.u64()
		}
		m.Prot = b.u32()
		m.Flags = b.u32()
	}
	m.Filename = cstr(b.b[b.off:])
}

func parseBuildIDEvent(bid *BuildID, b *buf, misc uint16) {
	bid.Misc = misc & MiscCPUModeMask
	bid.Pid = int32(b.u32())
	id := b.bytes(24)
	if len(id) == 24 {
		if misc&miscBuildIDSize != 0 && int(id[20]) <= 20 {
			id = id[:id[20]]
		} else {
			id = id[:20]
			for len(id) > 0 && id[len(id)-1] == 0 {
				id = id[:len(id)-1]
			}
		}
	}
	bid.ID = append([]byte(nil), id...)
	if b.off < len(b.b) {
		bid.Filename = cstr(b.b[b.off:])
	}
}

func parseCPUMap(c *CPUMap, b *buf) {
	c.CPUs = c.CPUs[:0]
	typ := b.u16()
	switch typ {
	case 0: // PERF_CPU_MAP__CPUS
		n := b.u16()
		for i := 0; i < int(n) && b.err == nil; i++ {
			c.CPUs = append(c.CPUs, int(int16(b.u16())))
		}
	case 1: // PERF_CPU_MAP__MASK
		n := b.u16()
		longSize := b.u16()
		switch longSize {
		case 4:
			for i := 0; i < int(n) && b.err == nil; i++ {
				w := b.u32()
				for j := 0; j < 32; j++ {
					if w&(1<<j) != 0 {
						c.CPUs = append(c.CPUs, i*32+j)
					}
				}
			}
		case 8:
			b.u16() // padding to 8
			for i := 0; i < int(n) && b.err == nil; i++ {
				w := b.u64()
				for j := 0; j < 64; j++ {
					if w&(1<<j) != 0 {
						c.CPUs = append(c.CPUs, i*64+j)
					}
				}
			}
		}
	case 2: // PERF_CPU_MAP__RANGE_CPUS
		anyCPU := b.u8()
		b.u8()
		start := b.u16()
		end := b.u16()
		if anyCPU != 0 {
			c.CPUs = append(c.CPUs, -1)
		}
		for i := int(start); i <= int(end) && b.err == nil && len(c.CPUs) < 1<<16; i++ {
			c.CPUs = append(c.CPUs, i)
		}
	}
}

func float64frombits(v uint64) float64 { return math.Float64frombits(v) }
