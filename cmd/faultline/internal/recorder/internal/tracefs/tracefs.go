// Package tracefs adds and removes the kernel's uprobe events and reads
// the ids and formats of trace events, for the recorder (the kernel's
// Documentation/trace/uprobetracer.rst describes uprobe_events). A probe
// is a value: AddUprobe writes one validated line and returns an *Event
// whose Close removes exactly that probe, as cilium/ebpf's
// internal/tracefs does; nothing else in uprobe_events is touched.
package tracefs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// FS is the file access tracefs needs; tests substitute a fake.
type FS interface {
	ReadFile(path string) ([]byte, error)
	// AppendLine writes line to path in one write(2), as tracefs control
	// files want.
	AppendLine(path, line string) error
	Exists(path string) bool
	MountTracefs(dir string) error
}

// Dirs are where tracefs is found, the preferred mount point first.
var Dirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// Tracefs is a tracefs mount that has uprobe_events.
type Tracefs struct {
	fs  FS
	dir string
}

// Find returns the mounted tracefs that has uprobe_events, or mounts
// tracefs at Dirs[0] (mounted reports it; it stays mounted).
func Find(fs FS) (t *Tracefs, mounted bool, err error) {
	for _, d := range Dirs {
		if fs.Exists(filepath.Join(d, "uprobe_events")) {
			return &Tracefs{fs: fs, dir: d}, false, nil
		}
	}
	dir := Dirs[0]
	if err := fs.MountTracefs(dir); err != nil {
		return nil, false, fmt.Errorf("tracefs is not mounted and mounting it failed (%v); run: mount -t tracefs nodev %s", err, dir)
	}
	if !fs.Exists(filepath.Join(dir, "uprobe_events")) {
		return nil, true, fmt.Errorf("%s has no uprobe_events: the kernel lacks uprobe events (CONFIG_UPROBE_EVENTS=y); use a kernel built with it", dir)
	}
	return &Tracefs{fs: fs, dir: dir}, true, nil
}

// Dir is the mount point.
func (t *Tracefs) Dir() string { return t.dir }

func (t *Tracefs) uprobeEvents() string { return filepath.Join(t.dir, "uprobe_events") }

// Event is one trace event: a uprobe this process added (Close removes
// it), or a tracepoint that was there (Close does nothing).
type Event struct {
	t           *Tracefs
	group, name string
	id          uint64
	format      []byte
	added       bool // by AddUprobe: Close removes it
}

// Group and Name are the event's group and name in tracefs.
func (e *Event) Group() string { return e.group }
func (e *Event) Name() string  { return e.name }

// ID is the event's id (events/GROUP/NAME/id): perf_event_attr.config of
// a PERF_TYPE_TRACEPOINT event.
func (e *Event) ID() uint64 { return e.id }

// Format is events/GROUP/NAME/format, for perf.data's TRACING_DATA.
func (e *Event) Format() []byte { return e.format }

// Close removes a probe AddUprobe added. Closing the perf events on it
// releases the probe, which the kernel finishes a moment later: while it
// says EBUSY Close tries again, for about a second. A probe already gone
// is not an error; a probe left behind is, and the error says how to
// remove it. Close is idempotent.
func (e *Event) Close() error {
	if !e.added {
		return nil
	}
	line := "-:" + e.group + "/" + e.name
	var err error
	for try := 0; try < 20; try++ {
		if err = e.t.write(line); !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("could not remove probe %s:%s: %w; remove it with: echo '%s' >> %s", e.group, e.name, err, line, e.t.uprobeEvents())
	}
	e.added = false
	return nil
}

// AddUprobe writes line, a uprobe definition "p:GROUP/NAME PATH:OFFSET
// ARGS..." or "r:GROUP/NAME ...", to uprobe_events and reads the new
// event's id and format. The line is refused, before anything is written,
// unless it names its group and event and holds no control character (a
// newline would start a command of its own). When the id or format cannot
// be read the probe is removed again.
func (t *Tracefs) AddUprobe(line string) (*Event, error) {
	group, name, err := probeName(line)
	if err != nil {
		return nil, err
	}
	if err := t.write(line); err != nil {
		return nil, fmt.Errorf("adding probe %s:%s (%q to %s): %w", group, name, line, t.uprobeEvents(), err)
	}
	e := &Event{t: t, group: group, name: name, added: true}
	if err := t.read(e); err != nil {
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return e, nil
}

// probeName checks a uprobe definition and returns its group and event.
func probeName(line string) (group, name string, err error) {
	if err := CheckLine(line); err != nil {
		return "", "", err
	}
	head, _, _ := strings.Cut(line, " ")
	kind, gn, ok := strings.Cut(head, ":")
	if ok && (kind == "p" || kind == "r") {
		group, name, ok = strings.Cut(gn, "/")
	}
	if !ok || group == "" || name == "" {
		return "", "", fmt.Errorf("refusing to write %q to uprobe_events: a probe is added as p:GROUP/EVENT or r:GROUP/EVENT", line)
	}
	return group, name, nil
}

// Tracepoint reads the id and format of an event that is in tracefs (a
// kernel tracepoint such as syscalls/sys_enter_mmap).
func (t *Tracefs) Tracepoint(group, name string) (*Event, error) {
	e := &Event{t: t, group: group, name: name}
	if err := t.read(e); err != nil {
		return nil, err
	}
	return e, nil
}

// read fills in e's id and format.
func (t *Tracefs) read(e *Event) error {
	dir := filepath.Join(t.dir, "events", e.group, e.name)
	idText, err := t.fs.ReadFile(filepath.Join(dir, "id"))
	if err != nil {
		return fmt.Errorf("event %s:%s has no id in tracefs (%w): was it removed?", e.group, e.name, err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
	if err != nil {
		return fmt.Errorf("event %s:%s: bad id %q in %s", e.group, e.name, idText, dir)
	}
	format, err := t.fs.ReadFile(filepath.Join(dir, "format"))
	if err != nil {
		return fmt.Errorf("event %s:%s: reading its format: %w", e.group, e.name, err)
	}
	e.id, e.format = id, format
	return nil
}

// write writes one validated line to uprobe_events.
func (t *Tracefs) write(line string) error {
	if err := CheckLine(line); err != nil {
		return err
	}
	return t.fs.AppendLine(t.uprobeEvents(), line)
}

// CheckLine refuses a line with a control character: tracefs would read
// a newline as the end of one command and the start of another.
func CheckLine(line string) error {
	for _, c := range line {
		if unicode.IsControl(c) {
			return fmt.Errorf("refusing to write %q to uprobe_events: it contains a control character", line)
		}
	}
	return nil
}

// CheckString refuses a string that would change the meaning of a
// uprobe_events line it is part of: whitespace and control characters
// separate or end commands there, and ':' separates a path from its
// offset. what names the string in the error.
func CheckString(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == ':' || c > unicode.MaxASCII && !unicode.IsPrint(c) {
			return fmt.Errorf("%s %q contains %q, which the tracefs probe syntax gives a meaning to; refusing to write it to uprobe_events", what, s, c)
		}
	}
	return nil
}

// Groups maps each uprobe group in uprobe_events to its events.
func (t *Tracefs) Groups() (map[string][]string, error) {
	data, err := t.fs.ReadFile(t.uprobeEvents())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.uprobeEvents(), err)
	}
	return ParseGroups(string(data)), nil
}

// ParseGroups maps each group in uprobe_events text to its events; lines
// read "p:GROUP/EVENT PATH:OFFSET ARGS" or "r:GROUP/EVENT ...".
func ParseGroups(uprobeEvents string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(uprobeEvents, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		_, name, ok := strings.Cut(f[0], ":")
		if !ok {
			continue
		}
		if g, ev, ok := strings.Cut(name, "/"); ok {
			out[g] = append(out[g], ev)
		}
	}
	return out
}

// Remove removes the probe group/name that this process did not add (a
// dead run's): EBUSY (a process has it open) and ENOENT (gone already)
// are returned as they come.
func (t *Tracefs) Remove(group, name string) error {
	return t.write("-:" + group + "/" + name)
}

// RemoveGroup removes every probe of group, which this process did not
// add (a dead run's), in one write of "-:GROUP/", under the kernel's lock
// of the event list: no read of uprobe_events has to find them all first.
// A kernel that does not take a group alone answers EINVAL; a probe of
// the group that a process has open makes it stop there with EBUSY, some
// removed and some not; ENOENT: the group has no probes (left).
func (t *Tracefs) RemoveGroup(group string) error {
	if group == "" || strings.ContainsRune(group, '/') {
		return fmt.Errorf("refusing to remove probe group %q", group)
	}
	return t.write("-:" + group + "/")
}

// Missing lists, as GROUP:NAME, the probes of evs that are no longer in
// uprobe_events (someone removed them). uprobe_events is a seq_file read
// in pages: while another process removes its probes, a read can skip
// lines that are still there (the file shifts under the reader's offset).
// So a probe counts as missing only when none of a few reads, apart in
// time, lists it.
func (t *Tracefs) Missing(evs []*Event) []string {
	want := 0
	for _, e := range evs {
		if e.added {
			want++
		}
	}
	have := map[string]bool{}
	for try := 0; try < 4 && len(have) < want; try++ {
		if try > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if g, err := t.Groups(); err == nil {
			for _, e := range evs {
				for _, name := range g[e.group] {
					if name == e.name {
						have[e.group+":"+e.name] = true
					}
				}
			}
		}
	}
	var missing []string
	for _, e := range evs {
		if k := e.group + ":" + e.name; e.added && !have[k] {
			missing = append(missing, k)
		}
	}
	return missing
}

// At is the tracefs mounted at dir, for reading its events (Tracepoint)
// where uprobe_events is not needed.
func At(fs FS, dir string) *Tracefs { return &Tracefs{fs: fs, dir: dir} }
