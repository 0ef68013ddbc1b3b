package recorder

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"time"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/perfdata"
)

// The recorded program's own resident memory, for analyze to compare its
// tracked peak with: after the program exits its mm is gone, so two
// measures are taken while it lives and as it ends.
//   - wait4's ru_maxrss: the kernel's exact high-water RSS of the process
//     (VmHWM at exit), file pages included;
//   - RssAnon from /proc/PID/status, read every rssEvery while it runs:
//     the anonymous part, which is what faults make resident; its peak
//     can be missed by up to one interval of growth.
//
// Both are written at the end as one sample of the synthetic tracepoint
// faultline:rss (fields pid, hwm, anon_peak: bytes), which perf script
// prints and analyze reads (analyze.RSSEvent).

// rssEvery is how often RssAnon is read: about 10 µs of the recorder's
// time per read.
const rssEvery = 10 * time.Millisecond

// rssTraceID and rssSampleID number the event apart from the in-process
// ones (shimIDBase, shimSampleIDBase up).
const (
	rssTraceID  = shimIDBase - 1
	rssSampleID = shimSampleIDBase - 1
)

// rssSpec is the faultline:rss event.
func rssSpec(flags perfdata.AttrFlags, clock int32) *spec {
	// The kernel tracepoints' layout (rssHead writes it), so the
	// sample_id fields are where every other event has them.
	a := perfdata.Attr{Type: perfdata.TypeTracepoint, Config: rssTraceID, SamplePeriod: 1,
		SampleType: baseSampleType | perfdata.SampleRaw, ReadFormat: readFormat, Flags: flags, ClockID: clock}
	if clock != 0 {
		a.Flags |= perfdata.AttrUseClockID
	}
	sp := &spec{name: shimSystem + ":" + analyze.RSSEvent, kind: kindRange, synthetic: true, synthID: rssSampleID, attr: a}
	sp.format = shimFormat(analyze.RSSEvent, rssTraceID, []traceField{{decl: "u64 pid", size: 8}, {decl: "u64 hwm", size: 8}, {decl: "u64 anon_peak", size: 8}})
	return sp
}

// rssSampler reads a process's RssAnon now and then and keeps the peak.
type rssSampler struct {
	pid  int
	path string
	next time.Time
	peak uint64
	buf  []byte
}

func newRSSSampler(pid int) *rssSampler {
	return &rssSampler{pid: pid, path: "/proc/" + strconv.Itoa(pid) + "/status", buf: make([]byte, 0, 4096)}
}

// sample reads RssAnon when an interval has passed since the last read.
func (r *rssSampler) sample(now time.Time) {
	if now.Before(r.next) {
		return
	}
	r.next = now.Add(rssEvery)
	f, err := os.Open(r.path)
	if err != nil {
		return // the process is gone
	}
	n, _ := f.Read(r.buf[:cap(r.buf)])
	f.Close()
	if v, ok := statusKB(r.buf[:n], "RssAnon:"); ok && v<<10 > r.peak {
		r.peak = v << 10
	}
}

// statusKB reads a "Name:   123 kB" line of /proc/PID/status.
func statusKB(b []byte, name string) (uint64, bool) {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return 0, false
	}
	b = bytes.TrimLeft(b[i+len(name):], " \t")
	j := bytes.IndexByte(b, ' ')
	if j < 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:j]), 10, 64)
	return v, err == nil
}

// writeRSS writes the faultline:rss sample at the end of the recording.
func (s *session) writeRSS() error {
	sp := s.rss
	if sp == nil || s.rssSampler == nil || s.res.MaxRSS == 0 {
		return nil
	}
	pid := uint32(s.rssSampler.pid)
	ne := binary.NativeEndian
	// IDENTIFIER, IP, PID/TID, TIME, CPU/res, then RAW.
	b := ne.AppendUint64(nil, sp.synthID)
	b = ne.AppendUint64(b, 0)
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint64(b, s.lastT)
	b = ne.AppendUint64(b, 0)
	at := len(b)
	b = ne.AppendUint32(b, 0)
	b = appendCommon(b, sp, pid)
	b = ne.AppendUint64(b, uint64(pid))
	b = ne.AppendUint64(b, s.res.MaxRSS)
	b = ne.AppendUint64(b, s.res.PeakRssAnon)
	b = finishRaw(b, at)
	*s.perSpec[sp]++
	return s.w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, b)
}
