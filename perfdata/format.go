package perfdata

import (
	"strconv"
	"strings"
)

// On-disk constants. C names are given in comments; the sources are
// include/uapi/linux/perf_event.h (kernel) and tools/lib/perf/include/perf/event.h
// and tools/perf/util/header.h (perf's own).

// Record types (perf_event_header.type).
const (
	RecordMmap            RecordType = 1  // PERF_RECORD_MMAP
	RecordLost            RecordType = 2  // PERF_RECORD_LOST
	RecordComm            RecordType = 3  // PERF_RECORD_COMM
	RecordExit            RecordType = 4  // PERF_RECORD_EXIT
	RecordThrottle        RecordType = 5  // PERF_RECORD_THROTTLE
	RecordUnthrottle      RecordType = 6  // PERF_RECORD_UNTHROTTLE
	RecordFork            RecordType = 7  // PERF_RECORD_FORK
	RecordRead            RecordType = 8  // PERF_RECORD_READ
	RecordSample          RecordType = 9  // PERF_RECORD_SAMPLE
	RecordMmap2           RecordType = 10 // PERF_RECORD_MMAP2
	RecordAux             RecordType = 11 // PERF_RECORD_AUX
	RecordItraceStart     RecordType = 12 // PERF_RECORD_ITRACE_START
	RecordLostSamples     RecordType = 13 // PERF_RECORD_LOST_SAMPLES
	RecordSwitch          RecordType = 14 // PERF_RECORD_SWITCH
	RecordSwitchCPUWide   RecordType = 15 // PERF_RECORD_SWITCH_CPU_WIDE
	RecordNamespaces      RecordType = 16 // PERF_RECORD_NAMESPACES
	RecordKsymbol         RecordType = 17 // PERF_RECORD_KSYMBOL
	RecordBPFEvent        RecordType = 18 // PERF_RECORD_BPF_EVENT
	RecordCgroup          RecordType = 19 // PERF_RECORD_CGROUP
	RecordTextPoke        RecordType = 20 // PERF_RECORD_TEXT_POKE
	RecordAuxOutputHwID   RecordType = 21 // PERF_RECORD_AUX_OUTPUT_HW_ID
	RecordHeaderAttr      RecordType = 64 // PERF_RECORD_HEADER_ATTR
	RecordHeaderEventType RecordType = 65 // PERF_RECORD_HEADER_EVENT_TYPE (deprecated)
	RecordHeaderTracing   RecordType = 66 // PERF_RECORD_HEADER_TRACING_DATA
	RecordHeaderBuildID   RecordType = 67 // PERF_RECORD_HEADER_BUILD_ID
	RecordFinishedRound   RecordType = 68 // PERF_RECORD_FINISHED_ROUND
	RecordIDIndex         RecordType = 69 // PERF_RECORD_ID_INDEX
	RecordAuxtraceInfo    RecordType = 70 // PERF_RECORD_AUXTRACE_INFO
	RecordAuxtrace        RecordType = 71 // PERF_RECORD_AUXTRACE (followed by its data outside the record)
	RecordAuxtraceError   RecordType = 72 // PERF_RECORD_AUXTRACE_ERROR
	RecordThreadMap       RecordType = 73 // PERF_RECORD_THREAD_MAP
	RecordCPUMap          RecordType = 74 // PERF_RECORD_CPU_MAP
	RecordStatConfig      RecordType = 75 // PERF_RECORD_STAT_CONFIG
	RecordStat            RecordType = 76 // PERF_RECORD_STAT
	RecordStatRound       RecordType = 77 // PERF_RECORD_STAT_ROUND
	RecordEventUpdate     RecordType = 78 // PERF_RECORD_EVENT_UPDATE
	RecordTimeConv        RecordType = 79 // PERF_RECORD_TIME_CONV
	RecordHeaderFeature   RecordType = 80 // PERF_RECORD_HEADER_FEATURE
	RecordCompressed      RecordType = 81 // PERF_RECORD_COMPRESSED
	RecordFinishedInit    RecordType = 82 // PERF_RECORD_FINISHED_INIT
	RecordCompressed2     RecordType = 83 // PERF_RECORD_COMPRESSED2
	RecordBPFMetadata     RecordType = 84 // PERF_RECORD_BPF_METADATA
)

var recordNames = map[RecordType]string{
	RecordMmap: "MMAP", RecordLost: "LOST", RecordComm: "COMM", RecordExit: "EXIT",
	RecordThrottle: "THROTTLE", RecordUnthrottle: "UNTHROTTLE", RecordFork: "FORK",
	RecordRead: "READ", RecordSample: "SAMPLE", RecordMmap2: "MMAP2", RecordAux: "AUX",
	RecordItraceStart: "ITRACE_START", RecordLostSamples: "LOST_SAMPLES",
	RecordSwitch: "SWITCH", RecordSwitchCPUWide: "SWITCH_CPU_WIDE",
	RecordNamespaces: "NAMESPACES", RecordKsymbol: "KSYMBOL", RecordBPFEvent: "BPF_EVENT",
	RecordCgroup: "CGROUP", RecordTextPoke: "TEXT_POKE", RecordAuxOutputHwID: "AUX_OUTPUT_HW_ID",
	RecordHeaderAttr: "ATTR", RecordHeaderEventType: "EVENT_TYPE",
	RecordHeaderTracing: "TRACING_DATA", RecordHeaderBuildID: "BUILD_ID",
	RecordFinishedRound: "FINISHED_ROUND", RecordIDIndex: "ID_INDEX",
	RecordAuxtraceInfo: "AUXTRACE_INFO", RecordAuxtrace: "AUXTRACE",
	RecordAuxtraceError: "AUXTRACE_ERROR", RecordThreadMap: "THREAD_MAP",
	RecordCPUMap: "CPU_MAP", RecordStatConfig: "STAT_CONFIG", RecordStat: "STAT",
	RecordStatRound: "STAT_ROUND", RecordEventUpdate: "EVENT_UPDATE",
	RecordTimeConv: "TIME_CONV", RecordHeaderFeature: "FEATURE",
	RecordCompressed: "COMPRESSED", RecordFinishedInit: "FINISHED_INIT",
	RecordCompressed2: "COMPRESSED2", RecordBPFMetadata: "BPF_METADATA",
}

// String returns perf's name for the record type (as in perf report --stats).
func (t RecordType) String() string {
	if int(t) < len(recordNameTable) && recordNameTable[t] != "" {
		return recordNameTable[t] // every record's buffer names its type: no map lookup
	}
	if s, ok := recordNames[t]; ok {
		return s
	}
	return "UNKNOWN_" + strconv.FormatUint(uint64(t), 10)
}

// recordNameTable is recordNames for the types below 128.
var recordNameTable = func() (tab [128]string) {
	for t, s := range recordNames {
		if int(t) < len(tab) {
			tab[t] = s
		}
	}
	return tab
}()

// SampleFormat is perf_event_attr.sample_type: a set of PERF_SAMPLE_* bits
// (enum perf_event_sample_format) saying which fields a sample carries.
type SampleFormat uint64

// Sample format bits (enum perf_event_sample_format), in the order their
// fields appear in a sample except IDENTIFIER, which comes first. They are
// untyped so that they combine with SampleFormat and SampleID.Has alike.
const (
	SampleIP           = 1 << 0  // PERF_SAMPLE_IP
	SampleTID          = 1 << 1  // PERF_SAMPLE_TID
	SampleTime         = 1 << 2  // PERF_SAMPLE_TIME
	SampleAddr         = 1 << 3  // PERF_SAMPLE_ADDR
	SampleRead         = 1 << 4  // PERF_SAMPLE_READ
	SampleCallchain    = 1 << 5  // PERF_SAMPLE_CALLCHAIN
	SampleID_          = 1 << 6  // PERF_SAMPLE_ID
	SampleCPU          = 1 << 7  // PERF_SAMPLE_CPU
	SamplePeriod       = 1 << 8  // PERF_SAMPLE_PERIOD
	SampleStreamID     = 1 << 9  // PERF_SAMPLE_STREAM_ID
	SampleRaw          = 1 << 10 // PERF_SAMPLE_RAW
	SampleBranchStack  = 1 << 11 // PERF_SAMPLE_BRANCH_STACK
	SampleRegsUser     = 1 << 12 // PERF_SAMPLE_REGS_USER
	SampleStackUser    = 1 << 13 // PERF_SAMPLE_STACK_USER
	SampleWeight       = 1 << 14 // PERF_SAMPLE_WEIGHT
	SampleDataSrc      = 1 << 15 // PERF_SAMPLE_DATA_SRC
	SampleIdentifier   = 1 << 16 // PERF_SAMPLE_IDENTIFIER
	SampleTransaction  = 1 << 17 // PERF_SAMPLE_TRANSACTION
	SampleRegsIntr     = 1 << 18 // PERF_SAMPLE_REGS_INTR
	SamplePhysAddr     = 1 << 19 // PERF_SAMPLE_PHYS_ADDR
	SampleAux          = 1 << 20 // PERF_SAMPLE_AUX
	SampleCgroup       = 1 << 21 // PERF_SAMPLE_CGROUP
	SampleDataPageSize = 1 << 22 // PERF_SAMPLE_DATA_PAGE_SIZE
	SampleCodePageSize = 1 << 23 // PERF_SAMPLE_CODE_PAGE_SIZE
	SampleWeightStruct = 1 << 24 // PERF_SAMPLE_WEIGHT_STRUCT
)

var sampleBitNames = [...]string{"IP", "TID", "TIME", "ADDR", "READ", "CALLCHAIN", "ID", "CPU", "PERIOD",
	"STREAM_ID", "RAW", "BRANCH_STACK", "REGS_USER", "STACK_USER", "WEIGHT", "DATA_SRC", "IDENTIFIER",
	"TRANSACTION", "REGS_INTR", "PHYS_ADDR", "AUX", "CGROUP", "DATA_PAGE_SIZE", "CODE_PAGE_SIZE", "WEIGHT_STRUCT"}

// String spells the bits as perf report --header-only does ("IP|TID|TIME");
// bits this package does not know are appended in hex.
func (f SampleFormat) String() string {
	return bitNames(uint64(f), sampleBitNames[:], "|")
}

// ReadFormat is perf_event_attr.read_format: a set of PERF_FORMAT_* bits
// (enum perf_event_read_format) saying what a READ value carries.
type ReadFormat uint64

// read_format bits (enum perf_event_read_format).
const (
	ReadTotalTimeEnabled ReadFormat = 1 << 0 // PERF_FORMAT_TOTAL_TIME_ENABLED
	ReadTotalTimeRunning ReadFormat = 1 << 1 // PERF_FORMAT_TOTAL_TIME_RUNNING
	ReadID               ReadFormat = 1 << 2 // PERF_FORMAT_ID
	ReadGroup            ReadFormat = 1 << 3 // PERF_FORMAT_GROUP
	ReadLost             ReadFormat = 1 << 4 // PERF_FORMAT_LOST
)

var readFormatNames = [...]string{"TOTAL_TIME_ENABLED", "TOTAL_TIME_RUNNING", "ID", "GROUP", "LOST"}

// String spells the bits as perf evlist -v does ("ID|LOST"); bits this
// package does not know are appended in hex.
func (f ReadFormat) String() string {
	return bitNames(uint64(f), readFormatNames[:], "|")
}

// AttrFlags is the perf_event_attr bitfield word at offset 40 (disabled,
// inherit, ..., sigtrap), one bit per flag except precise_ip (two bits).
type AttrFlags uint64

// perf_event_attr flag bits (the bitfield word at offset 40), in the
// order of include/uapi/linux/perf_event.h.
const (
	AttrDisabled      AttrFlags = 1 << 0
	AttrInherit       AttrFlags = 1 << 1
	AttrExcludeUser   AttrFlags = 1 << 4
	AttrExcludeKernel AttrFlags = 1 << 5
	AttrExcludeHV     AttrFlags = 1 << 6
	AttrExcludeIdle   AttrFlags = 1 << 7
	AttrMmap          AttrFlags = 1 << 8
	AttrComm          AttrFlags = 1 << 9
	AttrFreq          AttrFlags = 1 << 10
	AttrMmapData      AttrFlags = 1 << 17 // mmap_data: non-exec mmaps recorded (perf record -d)
	AttrSampleIDAll   AttrFlags = 1 << 18
	AttrExcludeHost   AttrFlags = 1 << 19
	AttrExcludeGuest  AttrFlags = 1 << 20
	AttrMmap2         AttrFlags = 1 << 23
	AttrUseClockID    AttrFlags = 1 << 25
	// attrPreciseIP is precise_ip's two-bit field (0–3).
	attrPreciseIP     AttrFlags = 3 << 15
	attrPreciseIPBits           = 15
)

// attrFlagNames are the bitfield's members by bit, as perf_event.h names
// them and perf evlist -v prints them; "" for precise_ip's two bits.
var attrFlagNames = [...]string{"disabled", "inherit", "pinned", "exclusive", "exclude_user",
	"exclude_kernel", "exclude_hv", "exclude_idle", "mmap", "comm", "freq", "inherit_stat",
	"enable_on_exec", "task", "watermark", "", "", "mmap_data", "sample_id_all", "exclude_host",
	"exclude_guest", "exclude_callchain_kernel", "exclude_callchain_user", "mmap2", "comm_exec",
	"use_clockid", "context_switch", "write_backward", "namespaces", "ksymbol", "bpf_event",
	"aux_output", "cgroup", "text_poke", "build_id", "inherit_thread", "remove_on_exec", "sigtrap"}

// PreciseIP returns the precise_ip field (0: arbitrary skid … 3: none).
func (f AttrFlags) PreciseIP() int { return int(f&attrPreciseIP) >> attrPreciseIPBits }

// String names the set flags in perf_event.h's order, separated by "|"
// ("disabled|inherit|sample_id_all"), precise_ip as "precise_ip=N" at its
// place; bits this package does not know are appended in hex.
func (f AttrFlags) String() string {
	var parts []string
	var rest uint64
	for i := range 64 {
		switch {
		case i == attrPreciseIPBits && f.PreciseIP() != 0:
			parts = append(parts, "precise_ip="+strconv.Itoa(f.PreciseIP()))
		case f&(1<<i) == 0 || attrPreciseIP&(1<<i) != 0:
		case i < len(attrFlagNames):
			parts = append(parts, attrFlagNames[i])
		default:
			rest |= 1 << i
		}
	}
	if rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(rest, 16))
	}
	return strings.Join(parts, "|")
}

// bitNames joins the names of v's set bits, bit 0 first; set bits without
// a name are appended together in hex.
func bitNames(v uint64, names []string, sep string) string {
	var parts []string
	var rest uint64
	for i := range 64 {
		if v&(1<<i) == 0 {
			continue
		}
		if i < len(names) && names[i] != "" {
			parts = append(parts, names[i])
		} else {
			rest |= 1 << i
		}
	}
	if rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(rest, 16))
	}
	return strings.Join(parts, sep)
}

// EventType is perf_event_attr.type (enum perf_type_id); values from 6 on
// are dynamic PMU types (see Meta.PMUMappings).
type EventType uint32

// perf_event_attr.type values (enum perf_type_id).
const (
	TypeHardware   EventType = iota // PERF_TYPE_HARDWARE
	TypeSoftware                    // PERF_TYPE_SOFTWARE
	TypeTracepoint                  // PERF_TYPE_TRACEPOINT
	TypeHWCache                     // PERF_TYPE_HW_CACHE
	TypeRaw                         // PERF_TYPE_RAW
	TypeBreakpoint                  // PERF_TYPE_BREAKPOINT
)

var eventTypeNames = [...]string{"HARDWARE", "SOFTWARE", "TRACEPOINT", "HW_CACHE", "RAW", "BREAKPOINT"}

// String returns the PERF_TYPE_ name without its prefix, or the number for
// a dynamic PMU type.
func (t EventType) String() string { return enumName(eventTypeNames[:], uint64(t), "") }

// SoftwareEvent is perf_event_attr.config of a TypeSoftware event (enum
// perf_sw_ids).
type SoftwareEvent uint64

// Software event ids (enum perf_sw_ids).
const (
	SWCPUClock        SoftwareEvent = iota // PERF_COUNT_SW_CPU_CLOCK
	SWTaskClock                            // PERF_COUNT_SW_TASK_CLOCK
	SWPageFaults                           // PERF_COUNT_SW_PAGE_FAULTS
	SWContextSwitches                      // PERF_COUNT_SW_CONTEXT_SWITCHES
	SWCPUMigrations                        // PERF_COUNT_SW_CPU_MIGRATIONS
	SWPageFaultsMin                        // PERF_COUNT_SW_PAGE_FAULTS_MIN
	SWPageFaultsMaj                        // PERF_COUNT_SW_PAGE_FAULTS_MAJ
	SWAlignmentFaults                      // PERF_COUNT_SW_ALIGNMENT_FAULTS
	SWEmulationFaults                      // PERF_COUNT_SW_EMULATION_FAULTS
	SWDummy                                // PERF_COUNT_SW_DUMMY
	SWBPFOutput                            // PERF_COUNT_SW_BPF_OUTPUT
	SWCgroupSwitches                       // PERF_COUNT_SW_CGROUP_SWITCHES
)

// swNames are perf's event names for the software events.
var swNames = [...]string{"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
	"minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy", "bpf-output", "cgroup-switches"}

// String returns perf's name for the event ("page-faults").
func (e SoftwareEvent) String() string { return enumName(swNames[:], uint64(e), "sw-") }

// IsPageFault reports whether e counts page faults (all, minor or major).
func (e SoftwareEvent) IsPageFault() bool {
	return e == SWPageFaults || e == SWPageFaultsMin || e == SWPageFaultsMaj
}

// perf_event_attr sizes by version (PERF_ATTR_SIZE_VER0..8).
const (
	attrSizeVer0 = 64
	attrSizeVer8 = 136
)

// Branch sample type bit that adds hw_idx to PERF_SAMPLE_BRANCH_STACK.
const (
	branchHWIndex  = 1 << 17 // PERF_SAMPLE_BRANCH_HW_INDEX
	branchCounters = 1 << 19 // PERF_SAMPLE_BRANCH_COUNTERS
)

// perf_event_header.misc bits.
const (
	MiscCPUModeMask = 7       // PERF_RECORD_MISC_CPUMODE_MASK
	MiscCommExec    = 1 << 13 // PERF_RECORD_MISC_COMM_EXEC
	MiscMmapData    = 1 << 13 // PERF_RECORD_MISC_MMAP_DATA
	MiscSwitchOut   = 1 << 13 // PERF_RECORD_MISC_SWITCH_OUT
	MiscMmapBuildID = 1 << 14 // PERF_RECORD_MISC_MMAP_BUILD_ID
	miscBuildIDSize = 1 << 15 // PERF_RECORD_MISC_BUILD_ID_SIZE (perf's build-id records)
)

// Callchain context markers (enum perf_callchain_context). Values >= these
// in a callchain are markers, not addresses.
const (
	ContextHV          = ^uint64(32 - 1)   // PERF_CONTEXT_HV (-32)
	ContextKernel      = ^uint64(128 - 1)  // PERF_CONTEXT_KERNEL (-128)
	ContextUser        = ^uint64(512 - 1)  // PERF_CONTEXT_USER (-512)
	ContextGuest       = ^uint64(2048 - 1) // PERF_CONTEXT_GUEST (-2048)
	ContextGuestKernel = ^uint64(2176 - 1) // PERF_CONTEXT_GUEST_KERNEL (-2176)
	ContextGuestUser   = ^uint64(2560 - 1) // PERF_CONTEXT_GUEST_USER (-2560)
	ContextMax         = ^uint64(4095 - 1) // PERF_CONTEXT_MAX (-4095)
)

// Feature is a feature bit of the file header (HEADER_* in
// tools/perf/util/header.h): which optional sections follow the data.
type Feature int

// Feature bits (HEADER_* in tools/perf/util/header.h).
const (
	FeatTracingData  Feature = 1
	FeatBuildID      Feature = 2
	FeatHostname     Feature = 3
	FeatOSRelease    Feature = 4
	FeatVersion      Feature = 5
	FeatArch         Feature = 6
	FeatNrCPUs       Feature = 7
	FeatCPUDesc      Feature = 8
	FeatCPUID        Feature = 9
	FeatTotalMem     Feature = 10
	FeatCmdline      Feature = 11
	FeatEventDesc    Feature = 12
	FeatCPUTopology  Feature = 13
	FeatNUMATopology Feature = 14
	FeatBranchStack  Feature = 15
	FeatPMUMappings  Feature = 16
	FeatGroupDesc    Feature = 17
	FeatAuxtrace     Feature = 18
	FeatStat         Feature = 19
	FeatCache        Feature = 20
	FeatSampleTime   Feature = 21
	FeatMemTopology  Feature = 22
	FeatClockID      Feature = 23
	FeatDirFormat    Feature = 24
	FeatBPFProgInfo  Feature = 25
	FeatBPFBTF       Feature = 26
	FeatCompressed   Feature = 27
	FeatCPUPMUCaps   Feature = 28
	FeatClockData    Feature = 29
	FeatHybridTopo   Feature = 30
	FeatPMUCaps      Feature = 31
	featBits                 = 256
	// featLastFeature is HEADER_LAST_FEATURE: in pipe mode the
	// HEADER_FEATURE record with this id and no section ends the features
	// perf sends before the data.
	featLastFeature = 32
)

var featureNames = [...]string{
	1: "TRACING_DATA", 2: "BUILD_ID", 3: "HOSTNAME", 4: "OSRELEASE", 5: "VERSION",
	6: "ARCH", 7: "NRCPUS", 8: "CPUDESC", 9: "CPUID", 10: "TOTAL_MEM", 11: "CMDLINE",
	12: "EVENT_DESC", 13: "CPU_TOPOLOGY", 14: "NUMA_TOPOLOGY", 15: "BRANCH_STACK",
	16: "PMU_MAPPINGS", 17: "GROUP_DESC", 18: "AUXTRACE", 19: "STAT", 20: "CACHE",
	21: "SAMPLE_TIME", 22: "MEM_TOPOLOGY", 23: "CLOCKID", 24: "DIR_FORMAT",
	25: "BPF_PROG_INFO", 26: "BPF_BTF", 27: "COMPRESSED", 28: "CPU_PMU_CAPS",
	29: "CLOCK_DATA", 30: "HYBRID_TOPOLOGY", 31: "PMU_CAPS",
}

// String returns perf's name for a feature bit (HEADER_ without the prefix).
func (f Feature) String() string { return enumName(featureNames[:], uint64(f), "FEATURE_") }

// enumName returns names[v], or prefix and v in decimal when names has no
// name for v.
func enumName(names []string, v uint64, prefix string) string {
	if v < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return prefix + strconv.FormatUint(v, 10)
}

// File header layout (struct perf_file_header): magic, size, attr_size,
// attrs{offset,size}, data{offset,size}, event_types{offset,size},
// adds_features[256 bits].
const (
	fileHeaderSize = 104
	pipeHeaderSize = 16 // struct perf_pipe_file_header: magic, size
)

// Magics: every perf.data file and stream starts with one (perf's
// __perf_magic2, "PERFILE2" as a little-endian u64, read in the writer's
// byte order); it tells the byte order of everything after it.
const (
	MagicLE = "PERFILE2" // written by a little-endian machine
	MagicBE = "2ELIFREP" // written by a big-endian machine
)

// MagicLen is the length of the magic that starts every perf.data file and
// stream.
const MagicLen = 8

// IsPerfData reports whether b, the first bytes of a file or stream (at least
// MagicLen of them), carries a perf.data magic of either byte order.
func IsPerfData(b []byte) bool {
	if len(b) < MagicLen {
		return false
	}
	m := string(b[:MagicLen])
	return m == MagicLE || m == MagicBE
}

// CompressZstd is the only compression type perf writes (enum
// perf_compress_type: PERF_COMP_ZSTD), as Meta.Compression.Type.
const CompressZstd = 1

// EVENT_UPDATE types (enum perf_event_update_type).
const (
	eventUpdateUnit  = 0
	eventUpdateScale = 1
	eventUpdateName  = 2
	eventUpdateCPUs  = 3
)
