package recorder

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/internal/tracefs"
	"github.com/faultline/faultline/perfdata/schema"
)

// ProbeSystem is the outside world the recorder's probes reach: tracefs'
// files, and whether a process is alive (to tell a dead run's probes from
// a live one's). Tests substitute a fake.
type ProbeSystem interface {
	tracefs.FS
	Getpid() int
	// ProcessAlive reports whether a process with this pid exists.
	ProcessAlive(pid int) bool
}

// ProbeGroupPrefix starts the tracefs group of every probe record adds;
// the group is ProbeGroup(pid), so two runs never share probes and a group
// whose pid is gone is known to be stale. Nothing outside such a group is
// ever added or removed.
const ProbeGroupPrefix = "faultline"

// ProbeGroup is the probe group of the run with process id pid.
func ProbeGroup(pid int) string { return ProbeGroupPrefix + "_" + strconv.Itoa(pid) }

// Tracefs is the tracefs mount the recorder adds its probes in.
type Tracefs struct {
	sys ProbeSystem
	t   *tracefs.Tracefs
}

// OpenTracefs finds tracefs, mounting it when it is not mounted (mounted
// says so; it is left mounted).
func OpenTracefs(sys ProbeSystem) (t *Tracefs, mounted bool, err error) {
	tf, mounted, err := tracefs.Find(sys)
	if err != nil {
		return nil, mounted, err
	}
	return &Tracefs{sys: sys, t: tf}, mounted, nil
}

// Dir is the mount point.
func (t *Tracefs) Dir() string { return t.t.Dir() }

// StaleGroup is the probe group of a run that was killed before it could
// remove its probes, as RemoveStale found it.
type StaleGroup struct {
	Group   string
	Removed []string // its events, removed
	Busy    []string // its events that a process still has open: left alone
}

// RemoveStale removes the probes of earlier runs that were killed before
// they could clean up: groups ProbeGroup(PID) whose process is gone (our
// own pid's can only be a dead run's whose pid was reused). Groups of runs
// still alive, and every other group, are left alone.
//
// uprobe_events is a seq_file read in pages: while another process
// removes probes listed before a stale group's, one read can skip lines of
// that group that are still there (tracefs.Tracefs.Missing says more). So
// a stale group is removed whole (tracefs.Tracefs.RemoveGroup) where the
// kernel can, else event by event as the reads list them; and it reads
// again until staleCleanReads reads in a row list nothing more to remove
// (staleReads reads at most). Removed lists the events the reads saw.
func (t *Tracefs) RemoveStale() ([]StaleGroup, error) {
	found := map[string]*StaleGroup{}
	busy := map[string]bool{}
	var err error
	for try, clean := 0, 0; try < staleReads && clean < staleCleanReads && err == nil; try++ {
		if try > 0 {
			time.Sleep(staleReadGap)
		}
		var removed bool
		removed, err = t.removeStaleOnce(found, busy)
		if removed {
			clean = 0
		} else {
			clean++
		}
	}
	out := make([]StaleGroup, 0, len(found))
	for _, sg := range found {
		out = append(out, *sg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, err
}

// The rereads of RemoveStale: a read that skips lines is one that
// overlaps another process's removals, which take a few milliseconds
// each, so a read a moment later rarely skips the same ones.
const (
	staleReads      = 8
	staleCleanReads = 2
	staleReadGap    = 10 * time.Millisecond
)

// removeStaleOnce reads uprobe_events once and removes the events it lists
// of dead runs' groups into found, except those busy already said are in
// use; removed reports whether it removed any.
func (t *Tracefs) removeStaleOnce(found map[string]*StaleGroup, busy map[string]bool) (removed bool, err error) {
	groups, err := t.t.Groups()
	if err != nil {
		return false, err
	}
	var stale []string
	for group := range groups {
		pidStr, ok := strings.CutPrefix(group, ProbeGroupPrefix+"_")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if pid != t.sys.Getpid() && t.sys.ProcessAlive(pid) {
			continue
		}
		stale = append(stale, group)
	}
	sort.Strings(stale)
	for _, g := range stale {
		sg := found[g]
		if sg == nil {
			sg = &StaleGroup{Group: g}
			found[g] = sg
			if t.t.RemoveGroup(g) == nil {
				// Whole: the events this read lists are gone, and any it
				// skipped.
				sg.Removed = append(sg.Removed, groups[g]...)
				removed = true
				continue
			}
			// Not whole (an older kernel; a busy probe; gone already):
			// event by event.
		}
		for _, ev := range groups[g] {
			if busy[g+"/"+ev] {
				continue
			}
			switch err := t.t.Remove(g, ev); {
			case err == nil || errors.Is(err, syscall.ENOENT):
				sg.Removed = append(sg.Removed, ev)
				removed = true
			case errors.Is(err, syscall.EBUSY):
				sg.Busy = append(sg.Busy, ev)
				busy[g+"/"+ev] = true
			default:
				return removed, fmt.Errorf("removing stale probe %s:%s: %w", g, ev, err)
			}
		}
	}
	return removed, nil
}

// UprobeDef is one uprobe to add: its event name in the group and its
// uprobe_events line.
type UprobeDef struct {
	Event string
	Line  string
	// Sized: an allocation entry with a size argument (it gets stack
	// instances); HasNmemb: it has nmemb too.
	Sized, HasNmemb bool
}

// Uprobes are one run's probes, added to tracefs; Close removes exactly
// them.
type Uprobes struct {
	t    *Tracefs
	defs []UprobeDef
	evs  []*tracefs.Event
}

// AddUprobes adds the probes defs, in order. When one cannot be added,
// those added before it are removed again and the error says which failed.
func (t *Tracefs) AddUprobes(defs []UprobeDef) (*Uprobes, error) {
	u := &Uprobes{t: t}
	for _, d := range defs {
		ev, err := t.t.AddUprobe(d.Line)
		if err == nil && ev.Name() != d.Event {
			err = fmt.Errorf("probe line %q does not define event %s", d.Line, d.Event)
			err = errors.Join(err, ev.Close())
		}
		if err != nil {
			return nil, errors.Join(err, u.Close())
		}
		u.defs = append(u.defs, d)
		u.evs = append(u.evs, ev)
	}
	return u, nil
}

// Probes are the probes as Config.Probes wants them.
func (u *Uprobes) Probes() []Probe {
	out := make([]Probe, len(u.evs))
	for i, ev := range u.evs {
		d := u.defs[i]
		out[i] = Probe{Event: d.Event, ID: ev.ID(), Format: ev.Format(), Sized: d.Sized, HasNmemb: d.HasNmemb}
	}
	return out
}

// Missing lists, as GROUP:EVENT, the probes that are no longer in
// uprobe_events: someone removed them while the run recorded.
func (u *Uprobes) Missing() []string { return u.t.t.Missing(u.evs) }

// Close removes the probes, newest first. Close is idempotent: a probe
// removed once is not removed again.
func (u *Uprobes) Close() error {
	var errs []error
	for i := len(u.evs) - 1; i >= 0; i-- {
		errs = append(errs, u.evs[i].Close())
	}
	return errors.Join(errs...)
}

// CheckTracefsString refuses a string (a library path, a group name) that
// would change the meaning of the uprobe_events line it is part of:
// whitespace, control characters, ':'. what names it in the error.
func CheckTracefsString(what, s string) error { return tracefs.CheckString(what, s) }

// MapCallProbes reads the memory-map calls' syscall tracepoints
// (schema.SyscallEvents, group schema.SyscallSystem) from the first tracefs
// mount that has them: their ids and formats, for Config.MapCalls. Any
// user may read them where tracefs is readable; where none is mounted, it
// mounts tracefs at tracefs.Dirs[0] as the uprobe method does (root only;
// it stays mounted: mounted is that directory).
func MapCallProbes(fs tracefs.FS) (probes []Probe, mounted string, err error) {
	find := func() *tracefs.Tracefs {
		for _, d := range tracefs.Dirs {
			if fs.Exists(filepath.Join(d, "events", schema.SyscallSystem, schema.SyscallEvents[0], "id")) {
				return tracefs.At(fs, d)
			}
		}
		return nil
	}
	t := find()
	if t == nil && !fs.Exists(filepath.Join(tracefs.Dirs[0], "events")) && fs.MountTracefs(tracefs.Dirs[0]) == nil {
		mounted = tracefs.Dirs[0]
		t = find()
	}
	if t == nil {
		return nil, mounted, errors.New("no syscall tracepoints in tracefs (mount it: mount -t tracefs nodev /sys/kernel/tracing; the kernel needs CONFIG_FTRACE_SYSCALLS)")
	}
	for _, name := range schema.SyscallEvents {
		ev, err := t.Tracepoint(schema.SyscallSystem, name)
		if err != nil {
			return nil, mounted, err
		}
		probes = append(probes, Probe{Event: name, ID: ev.ID(), Format: ev.Format(), Stack: name == "sys_enter_mmap"})
	}
	return probes, mounted, nil
}

// ParseProbeGroups maps each group in uprobe_events text to its events.
func ParseProbeGroups(uprobeEvents string) map[string][]string {
	return tracefs.ParseGroups(uprobeEvents)
}
