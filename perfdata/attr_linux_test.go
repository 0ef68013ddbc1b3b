//go:build linux

package perfdata

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAttrLayout checks Attr, which parseAttr and appendAttr read and write
// with encoding/binary, against perf_event_attr as golang.org/x/sys
// generates it from the kernel's headers (cgo -godefs; it stops at sig_data,
// PERF_ATTR_SIZE_VER7): every field where the kernel puts it.
func TestAttrLayout(t *testing.T) {
	if n := binary.Size(Attr{}); n != attrSizeVer8 {
		t.Fatalf("Attr is %d bytes in encoding/binary, perf_event_attr VER8 %d", n, attrSizeVer8)
	}
	k := unix.PerfEventAttr{Type: 1, Size: 2, Config: 3, Sample: 4, Sample_type: 5, Read_format: 6, Bits: 7,
		Wakeup: 8, Bp_type: 9, Ext1: 10, Ext2: 11, Branch_sample_type: 12, Sample_regs_user: 13,
		Sample_stack_user: 14, Clockid: -15, Sample_regs_intr: 16, Aux_watermark: 17, Sample_max_stack: 18,
		Aux_sample_size: 19, Sig_data: 20}
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		p, err := binary.Append(nil, bo, &k)
		if err != nil {
			t.Fatal(err)
		}
		want := Attr{Type: 1, Size: 2, Config: 3, SamplePeriod: 4, SampleType: 5, ReadFormat: 6, Flags: 7,
			WakeupEvents: 8, BPType: 9, Config1: 10, Config2: 11, BranchSampleType: 12, SampleRegsUser: 13,
			SampleStackUser: 14, ClockID: -15, SampleRegsIntr: 16, AuxWatermark: 17, SampleMaxStack: 18,
			AuxSampleSize: 19, SigData: 20} // Config3: past VER7, reads as 0
		got := parseAttr(p, bo)
		if got != want {
			t.Errorf("%v: parseAttr of the kernel's layout\n got %+v\nwant %+v", bo, got, want)
		}
		if bo != binary.LittleEndian {
			continue
		}
		// The writer's attr is the kernel's bytes with its own size.
		k2 := k
		k2.Size = writerAttrSize
		w, err := binary.Append(nil, bo, &k2)
		if err != nil {
			t.Fatal(err)
		}
		if a := appendAttr(nil, &got); !bytes.Equal(a, w) {
			t.Errorf("appendAttr:\n got % x\nwant % x", a, w)
		}
	}
}
