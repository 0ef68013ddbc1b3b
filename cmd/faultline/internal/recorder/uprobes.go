package recorder

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// UprobeSource records the allocator calls with uprobes the caller added to
// tracefs (UprobeDefinitions, Tracefs.AddUprobes; Uprobes.Source gives their UprobeSource): each call is a sample
// of its probe's event in the kernel's ring, every call, and the entries
// with a size are opened again with stacks.
type UprobeSource struct {
	Group   string  // the probes' tracefs group
	Probes  []Probe // in the order their events are listed
	Tracefs string  // tracefs mount (for events/header_page, header_event)
}

// uprobeSource is an UprobeSource at work in a session.
type uprobeSource struct {
	*UprobeSource
	s *session
}

func (u *UprobeSource) start(s *session) (source, error) {
	return &uprobeSource{UprobeSource: u, s: s}, nil
}

// traits: a recorder that falls behind loses events (the kernel's rings
// overflow), so what the compressor cannot keep up with is written
// uncompressed (perfdata KeepUp).
func (u *uprobeSource) traits() sourceTraits {
	return sourceTraits{method: "uprobes", writer: perfdata.WriterOptions{KeepUp: true}}
}

// events adds the probes' events to the range ring, then the stack ring's
// owner and two stack instances of each sized entry.
func (u *uprobeSource) events(l *specList) {
	cfg := u.s.cfg
	tp := func(p Probe, st perfdata.SampleFormat, period uint64) perfdata.Attr {
		return perfdata.Attr{Type: perfdata.TypeTracepoint, Config: p.ID, SamplePeriod: period,
			SampleType: st, ReadFormat: readFormat, Flags: l.flags, ClockID: l.clock}
	}
	for _, p := range u.Probes {
		l.add(&spec{name: u.Group + ":" + p.Event, kind: kindRange, attr: tp(p, baseSampleType|perfdata.SampleRaw, 1)})
	}
	l.addDummy(kindStack)
	big, small := sizeFilters(cfg.StackMin)
	bigN, smallN := sizeFiltersNmemb(cfg.StackMin)
	for _, p := range u.Probes {
		if !p.Sized {
			continue
		}
		bf, sf := big, small
		if p.HasNmemb {
			bf, sf = bigN, smallN
		}
		name := u.Group + ":" + p.Event
		l.add(&spec{name: name + stackBigSuffix, kind: kindStack, stack: true, filter: bf,
			attr: l.withStack(tp(p, baseSampleType|perfdata.SampleRaw, 1))})
		l.add(&spec{name: name + stackEverySuffix(cfg.StackEvery), kind: kindStack, stack: true, filter: sf,
			attr: l.withStack(tp(p, baseSampleType|perfdata.SampleRaw, cfg.StackEvery))})
	}
}

// tracingData is the probes' formats, the memory-map calls' and those of
// faultline:rss and faultline:resident, with tracefs's page and event headers; none without
// probes.
func (u *uprobeSource) tracingData() ([]byte, error) {
	// The memory-map calls' formats come from tracefs even when nothing
	// is probed (a Go program has no malloc).
	if len(u.Probes) == 0 && len(u.s.cfg.MapCalls) == 0 {
		return nil, nil
	}
	ev := filepath.Join(u.Tracefs, "events")
	hp, err := os.ReadFile(filepath.Join(ev, "header_page"))
	if err != nil {
		return nil, fmt.Errorf("tracing data: %w", err)
	}
	he, err := os.ReadFile(filepath.Join(ev, "header_event"))
	if err != nil {
		return nil, fmt.Errorf("tracing data: %w", err)
	}
	sys := perfdata.TraceSystem{Name: u.Group}
	for _, p := range u.Probes {
		sys.Formats = append(sys.Formats, p.Format)
	}
	var systems []perfdata.TraceSystem
	if len(sys.Formats) > 0 {
		systems = append(systems, sys)
	}
	systems = append(systems, mapCallSystem(u.s.cfg)...)
	own := perfdata.TraceSystem{Name: schema.System}
	for _, sp := range []*spec{u.s.rss, u.s.snapSpec} {
		if sp != nil {
			own.Formats = append(own.Formats, sp.format)
		}
	}
	if len(own.Formats) > 0 {
		systems = append(systems, own)
	}
	return perfdata.BuildTracingData(uint32(os.Getpagesize()), hp, he, systems), nil
}

// drain copies what the kernel's rings hold to the writer.
func (u *uprobeSource) drain(bool) (int, error) { return u.s.drain() }

// wakeups: the kernel's rings wake the session.
func (u *uprobeSource) wakeups() (<-chan struct{}, func()) { return nil, func() {} }

func (u *uprobeSource) close() {}

// Source is the probes as a recording's source: group is their tracefs
// group.
func (u *Uprobes) Source(group string) *UprobeSource {
	return &UprobeSource{Group: group, Probes: u.Probes(), Tracefs: u.t.Dir()}
}
