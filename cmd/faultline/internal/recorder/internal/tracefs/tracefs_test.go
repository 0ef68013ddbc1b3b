package tracefs

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// memFS is a tracefs in memory: uprobe_events takes "p:G/E ..." and
// "-:G/E" lines as the kernel does (a new probe gets events/G/E/id and
// format; removing an unknown one is ENOENT, a busy one EBUSY).
type memFS struct {
	files  map[string]string
	probes []string
	busy   map[string]bool
	writes []string
}

const dir = "/sys/kernel/tracing"

func newMemFS() *memFS {
	return &memFS{files: map[string]string{dir + "/uprobe_events": ""}, busy: map[string]bool{}}
}

func (m *memFS) ReadFile(path string) ([]byte, error) {
	if path == dir+"/uprobe_events" {
		return []byte(strings.Join(m.probes, "\n") + "\n"), nil
	}
	if s, ok := m.files[path]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
}

func (m *memFS) Exists(path string) bool { _, ok := m.files[path]; return ok }

func (m *memFS) MountTracefs(string) error { return syscall.EPERM }

func (m *memFS) AppendLine(path, line string) error {
	m.writes = append(m.writes, line)
	if name, ok := strings.CutPrefix(line, "-:"); ok {
		for i, p := range m.probes {
			if strings.HasPrefix(p[2:], name+" ") {
				if m.busy[name] {
					return syscall.EBUSY
				}
				m.probes = append(m.probes[:i], m.probes[i+1:]...)
				return nil
			}
		}
		return syscall.ENOENT
	}
	m.probes = append(m.probes, line)
	name, _, _ := strings.Cut(line[2:], " ")
	m.files[dir+"/events/"+name+"/id"] = "1234\n"
	if !strings.Contains(line, "noformat") {
		m.files[dir+"/events/"+name+"/format"] = "name: " + name + "\n"
	}
	return nil
}

func TestAddUprobeClose(t *testing.T) {
	m := newMemFS()
	tf, mounted, err := Find(m)
	if err != nil || mounted || tf.Dir() != dir {
		t.Fatalf("Find: %v %v %v", tf, mounted, err)
	}
	m.probes = []string{"p:other/malloc /lib/libc.so.6:0x1"}
	e, err := tf.AddUprobe("p:g_1/malloc /lib/libc.so.6:0x98930 size=%di:u64")
	if err != nil {
		t.Fatal(err)
	}
	if e.Group() != "g_1" || e.Name() != "malloc" || e.ID() != 1234 || string(e.Format()) != "name: g_1/malloc\n" {
		t.Errorf("event %s:%s id %d format %q", e.Group(), e.Name(), e.ID(), e.Format())
	}
	if miss := tf.Missing([]*Event{e}); len(miss) != 0 {
		t.Errorf("missing %v", miss)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil { // idempotent: nothing more written
		t.Fatal(err)
	}
	if got := strings.Join(m.writes, "|"); got != "p:g_1/malloc /lib/libc.so.6:0x98930 size=%di:u64|-:g_1/malloc" {
		t.Errorf("writes %q", got)
	}
	if strings.Join(m.probes, "|") != "p:other/malloc /lib/libc.so.6:0x1" {
		t.Errorf("probes left %q", m.probes)
	}
	// Removed by someone else: Missing says so, Close is content.
	e, _ = tf.AddUprobe("r:g_1/malloc__return /lib/libc.so.6:0x98930 ptr=$retval")
	m.probes = m.probes[:1]
	if miss := tf.Missing([]*Event{e}); strings.Join(miss, ",") != "g_1:malloc__return" {
		t.Errorf("missing %v", miss)
	}
	if err := e.Close(); err != nil {
		t.Errorf("closing a probe removed by someone else: %v", err)
	}
}

func TestAddUprobeRefuses(t *testing.T) {
	for _, line := range []string{
		"p:g_1/malloc /x:0x1\n-:other/ev", // a second command
		"-:other/ev",                      // a removal
		"p:malloc /x:0x1",                 // no group
		"p:g_1/ /x:0x1",
		"garbage",
	} {
		m := newMemFS()
		if _, err := At(m, dir).AddUprobe(line); err == nil || len(m.writes) != 0 {
			t.Errorf("%q: err %v, writes %q", line, err, m.writes)
		}
	}
	// A probe whose format cannot be read is removed again.
	m := newMemFS()
	if _, err := At(m, dir).AddUprobe("p:g_1/malloc /x:0x1 noformat"); err == nil || len(m.probes) != 0 {
		t.Errorf("err %v, probes %q", err, m.probes)
	}
}

func TestCloseBusy(t *testing.T) {
	m := newMemFS()
	e, err := At(m, dir).AddUprobe("p:g_1/free /x:0x2 ptr=%di:u64")
	if err != nil {
		t.Fatal(err)
	}
	m.busy["g_1/free"] = true
	err = e.Close()
	if !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), "echo '-:g_1/free' >> "+dir+"/uprobe_events") {
		t.Errorf("busy: %v", err)
	}
	if n := len(m.writes); n != 1+20 {
		t.Errorf("%d writes, want the add and 20 tries", n)
	}
	// Once released, a later Close removes it.
	m.busy["g_1/free"] = false
	if err := e.Close(); err != nil || len(m.probes) != 0 {
		t.Errorf("after release: %v %q", err, m.probes)
	}
}

func TestFindMount(t *testing.T) {
	m := newMemFS()
	delete(m.files, dir+"/uprobe_events")
	if _, _, err := Find(m); err == nil || !strings.Contains(err.Error(), "mount -t tracefs nodev "+dir) {
		t.Errorf("no tracefs, cannot mount: %v", err)
	}
}

// TestRemoveGroup: a group is removed with the one line "-:GROUP/", and
// the kernel's answer is returned as it comes (memFS takes no group
// alone: ENOENT); a name that would make the line mean something else is
// refused before anything is written.
func TestRemoveGroup(t *testing.T) {
	m := newMemFS()
	if err := At(m, dir).RemoveGroup("faultline_999"); !errors.Is(err, syscall.ENOENT) || strings.Join(m.writes, "|") != "-:faultline_999/" {
		t.Errorf("err %v, writes %q", err, m.writes)
	}
	for _, g := range []string{"", "a/b", "g\n-:other/ev"} {
		m := newMemFS()
		if err := At(m, dir).RemoveGroup(g); err == nil || len(m.writes) != 0 {
			t.Errorf("%q: err %v, writes %q", g, err, m.writes)
		}
	}
}
