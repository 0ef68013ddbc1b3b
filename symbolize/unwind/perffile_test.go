package unwind

// A minimal perf.data reader for these tests only: file mode, one event,
// MMAP2 and SAMPLE records. It stands in until faultline's perfdata package
// is implemented (perfdata/api.go); then the tests should switch to it.

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
)

type testSample struct {
	Pid, Tid  uint32
	Time      uint64
	IP        uint64
	Callchain []uint64
	RegsMask  uint64
	Regs      []uint64
	Stack     []byte
}

type testMmap struct {
	Pid              uint32
	Addr, Len, Pgoff uint64
	Prot             uint32
	Filename         string
}

type testPerfData struct {
	Samples []testSample
	Mmaps   []testMmap
}

const (
	sampleIP         = 1 << 0
	sampleTID        = 1 << 1
	sampleTime       = 1 << 2
	sampleAddr       = 1 << 3
	sampleRead       = 1 << 4
	sampleCallchain  = 1 << 5
	sampleID         = 1 << 6
	sampleCPU        = 1 << 7
	samplePeriod     = 1 << 8
	sampleStreamID   = 1 << 9
	sampleRaw        = 1 << 10
	sampleBranch     = 1 << 11
	sampleRegsUser   = 1 << 12
	sampleStackUser  = 1 << 13
	sampleIdentifier = 1 << 16
)

func readTestPerfData(path string) (*testPerfData, error) {
	d, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if len(d) < 104 || string(d[:8]) != "PERFILE2" {
		return nil, fmt.Errorf("%s: not a perf.data file", path)
	}
	attrSize := le.Uint64(d[16:])
	attrsOff, attrsSize := le.Uint64(d[24:]), le.Uint64(d[32:])
	dataOff, dataSize := le.Uint64(d[40:]), le.Uint64(d[48:])
	if attrsSize != attrSize {
		return nil, fmt.Errorf("want exactly one event, got %d attr bytes", attrsSize)
	}
	attr := d[attrsOff:]
	sampleType := le.Uint64(attr[24:])
	flags := le.Uint64(attr[40:])
	regsMask := le.Uint64(attr[80:])
	sampleIDAll := flags&(1<<18) != 0
	if sampleType&(sampleRead|sampleBranch) != 0 {
		return nil, fmt.Errorf("sample_type %#x not supported by the test reader", sampleType)
	}
	var out testPerfData
	for off := dataOff; off+8 <= dataOff+dataSize; {
		typ := le.Uint32(d[off:])
		size := uint64(le.Uint16(d[off+6:]))
		if size < 8 || off+size > uint64(len(d)) {
			return nil, fmt.Errorf("bad record at %#x", off)
		}
		rec := d[off+8 : off+size]
		off += size
		switch typ {
		case 10: // PERF_RECORD_MMAP2
			m := testMmap{Pid: le.Uint32(rec), Addr: le.Uint64(rec[8:]), Len: le.Uint64(rec[16:]), Pgoff: le.Uint64(rec[24:])}
			m.Prot = le.Uint32(rec[56:])
			name := rec[64:]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			m.Filename = string(name)
			out.Mmaps = append(out.Mmaps, m)
		case 9: // PERF_RECORD_SAMPLE
			p := 0
			u64 := func() uint64 { v := le.Uint64(rec[p:]); p += 8; return v }
			var s testSample
			if sampleType&sampleIdentifier != 0 {
				u64()
			}
			if sampleType&sampleIP != 0 {
				s.IP = u64()
			}
			if sampleType&sampleTID != 0 {
				v := u64()
				s.Pid, s.Tid = uint32(v), uint32(v>>32)
			}
			if sampleType&sampleTime != 0 {
				s.Time = u64()
			}
			for _, bit := range []uint64{sampleAddr, sampleID, sampleStreamID, sampleCPU, samplePeriod} {
				if sampleType&bit != 0 {
					u64()
				}
			}
			if sampleType&sampleCallchain != 0 {
				n := u64()
				for i := uint64(0); i < n; i++ {
					s.Callchain = append(s.Callchain, u64())
				}
			}
			if sampleType&sampleRaw != 0 {
				n := int(le.Uint32(rec[p:]))
				p += 4 + n
			}
			if sampleType&sampleRegsUser != 0 {
				if abi := u64(); abi != 0 {
					s.RegsMask = regsMask
					for i := 0; i < bits.OnesCount64(regsMask); i++ {
						s.Regs = append(s.Regs, u64())
					}
				}
			}
			if sampleType&sampleStackUser != 0 {
				n := int(u64())
				stack := rec[p : p+n]
				p += n
				if n > 0 {
					dyn := u64()
					stack = stack[:dyn]
				}
				s.Stack = stack
			}
			out.Samples = append(out.Samples, s)
		}
		_ = sampleIDAll
	}
	return &out, nil
}
