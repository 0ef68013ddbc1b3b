package symbolize_test

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/unwind"
)

// writeArchRecording writes, with perfdata's Writer, a file-mode recording
// of one page-fault sample carrying user registers and a stack copy, as
// perf record --call-graph dwarf makes on machine: the ARCH feature says
// machine and sample_regs_user is that architecture's default mask. The
// sample's PC is pc and its SP sp.
func writeArchRecording(t *testing.T, machine string, pc, sp uint64) string {
	t.Helper()
	mask := unwind.DefaultPerfMask(unwind.ArchFromMachine(machine))
	if mask == 0 {
		t.Fatalf("no register mask for %s", machine)
	}
	// Register values by perf bit: x86-64 has IP at bit 8 and SP at 7
	// (arch/x86/include/uapi/asm/perf_regs.h), arm64 SP at 31 and PC at 32
	// (arch/arm64/include/uapi/asm/perf_regs.h).
	pcBit, spBit := 8, 7
	if machine == "aarch64" {
		pcBit, spBit = 32, 31
	}
	const stackSize = 64
	const pid = 77
	st := perfdata.SampleFormat(perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleAddr |
		perfdata.SampleRegsUser | perfdata.SampleStackUser)
	events := []perfdata.WriterEvent{{Name: "page-faults", IDs: []uint64{1},
		Attr: perfdata.Attr{Type: perfdata.TypeSoftware, Config: 2, SamplePeriod: 1, SampleType: st,
			Flags: perfdata.AttrExcludeKernel | perfdata.AttrSampleIDAll, SampleRegsUser: mask, SampleStackUser: stackSize}}}
	f, path := perftest.Create(t, machine+".data")
	w, err := perfdata.NewWriter(f, events, nil)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint64(b, pc)          // IP
	b = le.AppendUint32(b, pid)         // pid
	b = le.AppendUint32(b, pid)         // tid
	b = le.AppendUint64(b, 1_000_000)   // time
	b = le.AppendUint64(b, 0x7f0000000) // addr
	b = le.AppendUint64(b, 2)           // PERF_SAMPLE_REGS_ABI_64
	for bit := range 64 {
		if mask&(1<<bit) == 0 {
			continue
		}
		v := uint64(0x1000 + bit) // recognizable filler
		switch bit {
		case pcBit:
			v = pc
		case spBit:
			v = sp
		}
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint64(b, stackSize)
	b = append(b, make([]byte, stackSize)...)
	b = le.AppendUint64(b, stackSize) // dyn_size
	if err := w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, b); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(&perfdata.WriterFeatures{Arch: machine, Hostname: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	return path
}

// firstSample opens path and returns its reader, positioned at its first
// sample.
func firstSample(t *testing.T, path string) (*perfdata.Reader, *perfdata.Sample) {
	t.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	for r.Next() {
		if s, ok := r.Record().(*perfdata.Sample); ok {
			return r, s
		}
	}
	t.Fatalf("%s: no sample (%v)", path, r.Err())
	return nil, nil
}

// TestArchFromRecording: a recording made on aarch64 (written by perfdata's
// Writer with arm64's 33-register mask) is refused with an *ArchError
// naming the architecture, before any of its registers is read with
// x86-64's numbering; the same sample recorded on x86_64 unwinds, and its
// one frame is the recorded PC.
func TestArchFromRecording(t *testing.T) {
	const pc, sp = 0x400123, 0x7ffd0000
	t.Run("aarch64", func(t *testing.T) {
		path := writeArchRecording(t, "aarch64", pc, sp)
		r, smp := firstSample(t, path)
		if got := r.Meta().Arch; got != "aarch64" {
			t.Fatalf("ARCH feature reads back as %q", got)
		}
		// arm64's default mask has 33 bits (x0–x30, sp, pc), x86-64's 24
		// set of 0xff0fff: the sample carries arm64's layout.
		if n := bits.OnesCount64(smp.RegsMask); n != 33 || len(smp.Regs) != 33 {
			t.Fatalf("mask %#x (%d bits), %d registers; want arm64's 33", smp.RegsMask, n, len(smp.Regs))
		}
		sess, err := symbolize.NewSession(symbolize.Config{Getenv: func(string) string { return "" }}, r.Meta())
		var ae *symbolize.ArchError
		if !errors.As(err, &ae) {
			if sess != nil {
				sess.Close()
			}
			t.Fatalf("NewSession on an aarch64 recording: %v, want an *ArchError", err)
		}
		if ae.Machine != "aarch64" || !strings.Contains(err.Error(), "aarch64") {
			t.Errorf("error %q (machine %q) does not name aarch64", err, ae.Machine)
		}
	})
	t.Run("x86_64", func(t *testing.T) {
		path := writeArchRecording(t, "x86_64", pc, sp)
		r, smp := firstSample(t, path)
		sess, err := symbolize.NewSession(symbolize.Config{Getenv: func(string) string { return "" }}, r.Meta())
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if sess.Arch() != unwind.ArchX86_64 {
			t.Fatalf("session arch %v, want x86_64", sess.Arch())
		}
		id, _ := sess.Unwind(smp, false)
		st := sess.Stack(id)
		if len(st) == 0 || sess.Loc(st[0]).PC != pc {
			t.Fatalf("stack %v, want the recorded PC %#x first", st, uint64(pc))
		}
	})
	// A pipe sends its features as records after the session is made: the
	// session starts as x86_64 and CheckArch refuses once ARCH says
	// otherwise.
	t.Run("pipe", func(t *testing.T) {
		var meta perfdata.Meta
		sess, err := symbolize.NewSession(symbolize.Config{Getenv: func(string) string { return "" }}, &meta)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if err := sess.CheckArch(); err != nil {
			t.Fatalf("no ARCH yet: %v", err)
		}
		meta.Arch = "x86_64"
		if err := sess.CheckArch(); err != nil {
			t.Fatalf("ARCH x86_64: %v", err)
		}
		meta.Arch = "aarch64"
		var ae *symbolize.ArchError
		if err := sess.CheckArch(); !errors.As(err, &ae) || ae.Machine != "aarch64" {
			t.Fatalf("ARCH aarch64 after the session began: %v, want an *ArchError naming it", err)
		}
	})
}
