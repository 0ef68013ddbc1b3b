package perfdata_test

import (
	"io"

	"github.com/faultline/faultline/perfdata"
)

// Compile-time check that the names other packages and users rely on exist
// with the documented fields.
var _ = func() {
	var rt perfdata.RecordType
	var rec perfdata.Record
	var sid perfdata.SampleID = perfdata.SampleID{Pid: 1, Tid: 1, Time: 1, ID: 1, StreamID: 1, CPU: 1, Has: 1}
	var rc perfdata.RecordCommon = perfdata.RecordCommon{Type: rt, Misc: 1, Offset: 1, SampleID: sid}
	_ = rc.Common()
	ev := perfdata.Event{Index: 1, Name: "", Attr: perfdata.Attr{Type: 1, Size: 1, Config: 1, SamplePeriod: 1, SampleType: 1, ReadFormat: 1, Flags: 1, SampleRegsUser: 1, SampleStackUser: 1, SampleRegsIntr: 1}, IDs: nil, Format: &perfdata.TraceFormat{System: "", Name: "", ID: 1, Fields: []perfdata.TraceField{{Name: "", Offset: 1, Size: 1, Signed: true}}}}
	f := ev.Format.Field("x")
	_, _ = f.Uint64(nil)
	s := perfdata.Sample{RecordCommon: rc, Event: &ev, IP: 1, Addr: 1, Period: 1, Callchain: nil, Raw: nil, RegsABI: 1, RegsMask: 1, Regs: nil, Stack: nil}
	_ = perfdata.Mmap{RecordCommon: rc, Pid: 1, Tid: 1, Addr: 1, Len: 1, Pgoff: 1, Maj: 1, Min: 1, Ino: 1, InoGeneration: 1, Prot: 1, Flags: 1, BuildID: nil, Filename: ""}
	_ = perfdata.Comm{RecordCommon: rc, Pid: 1, Tid: 1, Comm: "", Exec: true}
	_ = perfdata.Fork{RecordCommon: rc, Pid: 1, Ppid: 1, Tid: 1, Ptid: 1, Time: 1}
	_ = perfdata.Lost{RecordCommon: rc, Event: &ev, ID: 1, Count: 1}
	_ = perfdata.Raw{RecordCommon: rc, Data: nil}
	rec = &s
	_ = rec
	o := perfdata.Options{Order: perfdata.TimeOrder}
	o.Order = perfdata.FileOrder
	var _ func(string, *perfdata.Options) (*perfdata.Reader, error) = perfdata.Open
	var _ func(io.ReaderAt, int64, *perfdata.Options) (*perfdata.Reader, error) = perfdata.New
	r, _ := perfdata.NewStream(io.Reader(nil), &o)
	_ = r.Events()
	_ = r.Next()
	_ = r.Record()
	_ = r.Err()
	_ = r.Warnings()
	_ = r.Close()
	fe := &perfdata.FormatError{Offset: 1, Msg: "", Err: nil}
	_ = fe.Error()
	_ = fe.Unwrap()
	_ = perfdata.BuildID{Pid: 1, Misc: 1, ID: nil, Filename: ""}
	m := r.Meta()
	_ = []any{m.PipeMode, m.BigEndian, m.Features, m.Hostname, m.OSRelease, m.Version, m.Arch, m.NrCPUsOnline, m.NrCPUsAvail, m.CPUDesc, m.CPUID, m.TotalMemKB, m.Cmdline, m.BuildIDs, m.ClockID, m.Compression.Version, m.Compression.Type, m.Compression.Level, m.Compression.Ratio, m.Compression.MmapLen}
}
