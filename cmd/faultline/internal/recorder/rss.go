package recorder

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
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
// prints and analyze reads (schema.RSSEvent).

// rssEvery is how often RssAnon is read (a read of /proc/PID/status).
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
	sp := syntheticSpec(schema.RSSEvent, rssTraceID, rssSampleID, flags, clock)
	sp.format = shimFormat(schema.RSSEvent, rssTraceID, []traceField{{decl: "u64 pid", size: 8}, {decl: "u64 hwm", size: 8}, {decl: "u64 anon_peak", size: 8}})
	return sp
}

// syntheticSpec is an event of group schema.System that record writes
// itself (no kernel ring): a tracepoint's attr with RAW samples, traceID
// as its config and sampleID as the id its samples carry.
func syntheticSpec(name string, traceID, sampleID uint64, flags perfdata.AttrFlags, clock int32) *spec {
	a := perfdata.Attr{Type: perfdata.TypeTracepoint, Config: traceID, SamplePeriod: 1,
		SampleType: baseSampleType | perfdata.SampleRaw, ReadFormat: readFormat, Flags: flags, ClockID: clock}
	if clock != 0 {
		a.Flags |= perfdata.AttrUseClockID
	}
	return &spec{name: schema.System + ":" + name, kind: kindRange, synthetic: true, synthID: sampleID, attr: a}
}

// rssSampler reads a process's RssAnon every rssEvery, on a goroutine of
// its own, and keeps the peak. The process starts as the launcher
// (launch.go: faultline itself, a Go runtime of about 2 MiB RssAnon):
// reads count only once /proc/PID/exe is no longer the launcher's, that
// is after the exec.
type rssSampler struct {
	pid      int
	path     string
	exe      string // /proc/PID/exe
	launcher string // its target while the launcher runs; "" after the exec
	peak     uint64 // the sampling goroutine's until stop
	buf      []byte

	quit, done chan struct{}
	once       sync.Once
}

// startRSSSampler starts reading pid's RssAnon.
func startRSSSampler(pid int) *rssSampler {
	proc := "/proc/" + strconv.Itoa(pid)
	r := &rssSampler{pid: pid, path: proc + "/status", exe: proc + "/exe", buf: make([]byte, 0, 4096),
		quit: make(chan struct{}), done: make(chan struct{})}
	// The launcher is this binary re-executed (startHeld).
	r.launcher, _ = os.Readlink("/proc/self/exe")
	go func() {
		defer close(r.done)
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			r.sample()
			select {
			case <-r.quit:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// stop ends the reads (once; later calls only return) and returns the
// peak.
func (r *rssSampler) stop() uint64 {
	r.once.Do(func() {
		close(r.quit)
		<-r.done
	})
	return r.peak
}

// sample reads RssAnon.
func (r *rssSampler) sample() {
	if r.launcher != "" {
		if exe, err := os.Readlink(r.exe); err != nil || exe == r.launcher {
			return // not yet the program (or gone)
		}
		r.launcher = ""
	}
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
