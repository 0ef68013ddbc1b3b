package recorder

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

func testConfig() *Config {
	return &Config{
		Source: &UprobeSource{Group: "faultline_7", Probes: []Probe{
			{Event: "malloc", ID: 100, Sized: true},
			{Event: "malloc__return", ID: 101},
			{Event: "calloc", ID: 102, Sized: true, HasNmemb: true},
			{Event: "calloc__return", ID: 103},
			{Event: "free", ID: 104},
		}},
		StackOptions: StackOptions{StackMin: 4096, StackEvery: 64, StackSize: 8192},
		Target:       Target{Cmd: "/bin/true", Argv: []string{"true"}},
	}
}

// testSession returns a session of cfg with its source started.
func testSession(tb testing.TB, cfg *Config) *session {
	s := &session{cfg: cfg, cpus: []int{0}, res: &Result{}}
	src, err := cfg.Source.start(s)
	if err != nil {
		tb.Fatal(err)
	}
	s.src = src
	return s
}

// TestBuildSpecs checks the event contract analyze relies on
// (attribute/analyze/stacks.go): range
// events carry no stack and sample every call; the stack instances of each
// sized entry reuse its tracepoint id under names of their own (info and
// perf script tell the three apart), carry user regs and stack,
// never PERF_SAMPLE_PERIOD, and split calls by complementary filters, the
// small ones 1 in StackEvery.
func TestBuildSpecs(t *testing.T) {
	specs := testSession(t, testConfig()).buildSpecs()
	stackBits := perfdata.SampleFormat(perfdata.SampleRegsUser | perfdata.SampleStackUser | perfdata.SampleCallchain)
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
		a := s.attr
		if a.SampleType&perfdata.SamplePeriod != 0 {
			t.Errorf("%s: PERF_SAMPLE_PERIOD set", s.name)
		}
		if a.Flags&perfdata.AttrSampleIDAll == 0 || a.SampleType&baseSampleType != baseSampleType {
			t.Errorf("%s: sample_id layout differs: %#x", s.name, a.SampleType)
		}
		// The command is held: everything switches on at its exec and
		// follows its threads and children.
		if a.Flags&(perfdata.AttrEnableOnExec|perfdata.AttrInherit|perfdata.AttrDisabled) != perfdata.AttrEnableOnExec|perfdata.AttrInherit|perfdata.AttrDisabled {
			t.Errorf("%s: flags %#x", s.name, a.Flags)
		}
		switch {
		case s.dummy:
			if a.Config != uint64(perfdata.SWDummy) || a.SampleType&stackBits != 0 {
				t.Errorf("dummy: %+v", a)
			}
		case s.kind == kindRange:
			if a.SampleType&stackBits != 0 || a.SamplePeriod != 1 || s.filter != "" {
				t.Errorf("range %s: sample_type %#x period %d filter %q", s.name, a.SampleType, a.SamplePeriod, s.filter)
			}
		default:
			if a.SampleType&stackBits != stackBits || a.SampleRegsUser != userRegsMask || a.SampleStackUser != 8192 {
				t.Errorf("stack %s: %+v", s.name, a)
			}
		}
	}
	want := "dummy:u minor-faults major-faults faultline_7:malloc faultline_7:malloc__return faultline_7:calloc faultline_7:calloc__return faultline_7:free " +
		"dummy:u faultline_7:malloc/stack-big/ faultline_7:malloc/stack-1in64/ faultline_7:calloc/stack-big/ faultline_7:calloc/stack-1in64/ faultline:rss"
	if strings.Join(names, " ") != want {
		t.Errorf("specs:\n%s\nwant\n%s", strings.Join(names, " "), want)
	}
	// minor-faults carries the sideband, data mappings and build IDs
	// included, and it alone: two tracking events would write every
	// mapping twice.
	const track = perfdata.AttrMmap2 | perfdata.AttrMmapData | perfdata.AttrComm | perfdata.AttrCommExec | perfdata.AttrTask | perfdata.AttrBuildID
	if f := specs[1].attr.Flags; f&track != track {
		t.Errorf("tracking flags %#x", f)
	}
	for i, s := range specs {
		if i != 1 && s.attr.Flags&(perfdata.AttrMmap|perfdata.AttrMmap2|perfdata.AttrComm|perfdata.AttrTask) != 0 {
			t.Errorf("%s (%d) tracks too: %#x", s.name, i, s.attr.Flags)
		}
	}
	if specs[1].attr.SampleType&perfdata.SampleAddr == 0 || specs[1].attr.Flags&perfdata.AttrExcludeKernel == 0 {
		t.Errorf("minor-faults: %+v", specs[1].attr)
	}
	// The faults as the kernel accounts them once handled: the sample
	// says the size of the page mapped (a huge page: 2 MiB).
	if specs[1].attr.Config != uint64(perfdata.SWPageFaultsMin) || specs[1].attr.SampleType&perfdata.SampleDataPageSize == 0 ||
		specs[2].attr.Config != uint64(perfdata.SWPageFaultsMaj) || specs[2].attr.SampleType != specs[1].attr.SampleType {
		t.Errorf("fault events: %+v / %+v", specs[1].attr, specs[2].attr)
	}
	big, small := specs[9], specs[10]
	if big.attr.Config != 100 || big.attr.SamplePeriod != 1 || big.filter != "size >= 4096" ||
		small.attr.Config != 100 || small.attr.SamplePeriod != 64 || small.filter != "size < 4096" {
		t.Errorf("malloc stack instances: %+v %q / %+v %q", big.attr, big.filter, small.attr, small.filter)
	}

	cfg := testConfig()
	cfg.FaultStacks = true
	cfg.Cmd, cfg.Pid = "", 42
	specs = testSession(t, cfg).buildSpecs()
	last := specs[len(specs)-1]
	if last.name != "minor-faults/stack-1in64/" || last.attr.SamplePeriod != 64 || last.attr.SampleType&stackBits != stackBits || last.attr.SampleType&perfdata.SampleAddr == 0 {
		t.Errorf("fault stacks: %+v", last.attr)
	}
	if last.attr.Flags&perfdata.AttrEnableOnExec != 0 || last.attr.Flags&(perfdata.AttrDisabled|perfdata.AttrInherit) != perfdata.AttrDisabled|perfdata.AttrInherit {
		t.Errorf("-p: opened disabled (enabled together once all are open), inherited by new threads: flags %#x", last.attr.Flags)
	}
	if last.attr.Flags&trackFlags != 0 {
		t.Errorf("fault stacks track mappings too: flags %#x", last.attr.Flags)
	}
}

// TestNmembFilters evaluates the calloc filters by hand-written rules of
// the ftrace grammar (&&, ||, comparisons) over a grid: the two are exact
// complements, and "big" only ever holds calls of at least min bytes.
func TestNmembFilters(t *testing.T) {
	const min = 4096
	big, small := sizeFiltersNmemb(min)
	if big != "size >= 4096 || nmemb >= 4096 || (size >= 64 && nmemb >= 64)" ||
		small != "size < 4096 && nmemb < 4096 && (size < 64 || nmemb < 64)" {
		t.Fatalf("filters %q / %q", big, small)
	}
	// ⌈√4096⌉ = 64: both factors ≥ 64 means a product ≥ 4096.
	isBig := func(n, s uint64) bool { return s >= min || n >= min || (s >= 64 && n >= 64) }
	isSmall := func(n, s uint64) bool { return s < min && n < min && (s < 64 || n < 64) }
	for n := uint64(1); n < 9000; n += 7 {
		for s := uint64(1); s < 9000; s += 13 {
			if isBig(n, s) == isSmall(n, s) {
				t.Fatalf("calloc(%d, %d): big %v small %v", n, s, isBig(n, s), isSmall(n, s))
			}
			if isBig(n, s) && n*s < min {
				t.Fatalf("calloc(%d, %d) = %d bytes counted big", n, s, n*s)
			}
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]string{"0": "[0]", "0-3": "[0 1 2 3]", "0-1,4,6-7": "[0 1 4 6 7]"} {
		got, err := parseCPUList(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%q: %v %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "0-99999999"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestParseMaps reads /proc/PID/maps lines as the kernel prints them (a
// name with a space, anonymous memory, a shared mapping), each into the
// mapping beside it: prot from "rwx" (PROT_READ 1 | PROT_WRITE 2 |
// PROT_EXEC 4), flags MAP_PRIVATE (2) for "p" and MAP_SHARED (1) for "s",
// "//anon" (perf's name) where the line names nothing.
func TestParseMaps(t *testing.T) {
	lines := []struct {
		text string
		want mapping
	}{
		{"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1311 /usr/bin/my prog",
			mapping{start: 0x55d0c0a00000, end: 0x55d0c0a02000, maj: 0xfd, min: 1, ino: 1311, prot: 1, flags: 2, name: "/usr/bin/my prog"}},
		{"55d0c0a02000-55d0c0a06000 r-xp 00002000 fd:01 1311 /usr/bin/my prog",
			mapping{start: 0x55d0c0a02000, end: 0x55d0c0a06000, pgoff: 0x2000, maj: 0xfd, min: 1, ino: 1311, prot: 5, flags: 2, name: "/usr/bin/my prog"}},
		{"55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0 [heap]",
			mapping{start: 0x55d0c1000000, end: 0x55d0c1021000, prot: 3, flags: 2, name: "[heap]"}},
		{"7f0000000000-7f0000100000 rw-p 00000000 00:00 0 ",
			mapping{start: 0x7f0000000000, end: 0x7f0000100000, prot: 3, flags: 2, name: "//anon"}},
		{"7f0000200000-7f0000201000 rw-s 00000000 00:05 77 /dev/zero (deleted)",
			mapping{start: 0x7f0000200000, end: 0x7f0000201000, min: 5, ino: 77, prot: 3, flags: 1, name: "/dev/zero (deleted)"}},
	}
	var text strings.Builder
	for _, l := range lines {
		text.WriteString(l.text + "\n")
	}
	got := parseMaps(text.String())
	if len(got) != len(lines) {
		t.Fatalf("%d mappings: %+v", len(got), got)
	}
	for i, l := range lines {
		if got[i] != l.want {
			t.Errorf("%q:\n got %+v\nwant %+v", l.text, got[i], l.want)
		}
	}
}

// TestTwinRepair: a copy of the stack instance's sample found in the range
// ring becomes the range event's sample (the layout the range attr
// declares, bytes for bytes what the kernel would have written), for a
// fault and for a tracepoint; a range sample in the stack ring is dropped.
func TestTwinRepair(t *testing.T) {
	ne := binary.NativeEndian
	u64 := func(b []byte, v ...uint64) []byte {
		for _, x := range v {
			b = ne.AppendUint64(b, x)
		}
		return b
	}
	faultST := perfdata.SampleFormat(baseSampleType | perfdata.SampleAddr | perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser)
	tpST := perfdata.SampleFormat(baseSampleType | perfdata.SampleRaw | perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser)
	types := map[uint64]perfdata.SampleFormat{7: faultST, 8: tpST}
	st := func(id uint64) (perfdata.SampleFormat, bool) { f, ok := types[id]; return f, ok }
	tw := &twins{twinOf: map[uint64]uint64{7: 70, 8: 80}, rangeIDs: map[uint64]bool{70: true, 80: true}}

	// Fault: id ip tid time addr cpu | nr=1 ip | abi=2 regs(1) | size=8 data dyn
	stack := u64(nil, 7, 0x401000, 42<<32|42, 1000, 0xdead000, 1)
	stack = u64(stack, 1, 0xffffffff81000000, 2, 0x7ffe0000, 8, 0x1122334455667788, 8)
	want := u64(nil, 70, 0x401000, 42<<32|42, 1000, 0xdead000, 1)
	got, keep := tw.repair(kindRange, &rawRecord{Header: recordHeader{Type: perfdata.RecordSample}, Data: stack}, st)
	if !keep || !bytes.Equal(got, want) {
		t.Errorf("fault: keep %v\n got %x\nwant %x", keep, got, want)
	}
	// Tracepoint: id ip tid time cpu | nr=0 | raw (u32 12 + 12 bytes) | abi=0 | size=0
	raw := append(ne.AppendUint32(nil, 12), []byte("abcdefghijkl")...)
	stack = u64(nil, 8, 0x7f00, 42<<32|42, 2000, 0)
	stack = append(u64(stack, 0), raw...)
	stack = u64(stack, 0, 0)
	want = append(u64(nil, 80, 0x7f00, 42<<32|42, 2000, 0), raw...)
	got, keep = tw.repair(kindRange, &rawRecord{Header: recordHeader{Type: perfdata.RecordSample}, Data: stack}, st)
	if !keep || !bytes.Equal(got, want) {
		t.Errorf("tracepoint: keep %v\n got %x\nwant %x", keep, got, want)
	}
	// A range sample is left alone in its ring and dropped from a stack ring.
	rng := u64(nil, 70, 1, 2, 3, 4, 5)
	if got, keep := tw.repair(kindRange, &rawRecord{Header: recordHeader{Type: perfdata.RecordSample}, Data: rng}, st); !keep || !bytes.Equal(got, rng) {
		t.Errorf("range sample in its ring changed")
	}
	if _, keep := tw.repair(kindStack, &rawRecord{Header: recordHeader{Type: perfdata.RecordSample}, Data: rng}, st); keep || tw.dropped != 1 || tw.repaired != 2 {
		t.Errorf("range sample in a stack ring kept (%v), dropped %d repaired %d", keep, tw.dropped, tw.repaired)
	}
}
