package recorder

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/internal/tracefs"
	"github.com/faultline/faultline/perfdata/schema"
)

// tracepointFS is a filesystem where tracefs is mounted at the dirs in
// have, each with the syscall tracepoints, and a mount of tracefs at a
// dir (allowed when canMount) adds them there.
type tracepointFS struct {
	files    map[string]string
	canMount bool
	mounted  []string
}

func newTracepointFS(canMount bool, have ...string) *tracepointFS {
	f := &tracepointFS{files: map[string]string{}, canMount: canMount}
	for _, d := range have {
		f.addTracefs(d)
	}
	return f
}

func (f *tracepointFS) addTracefs(dir string) {
	for i, name := range schema.SyscallEvents {
		ev := filepath.Join(dir, "events", schema.SyscallSystem, name)
		f.files[filepath.Join(ev, "id")] = strconv.Itoa(600+i) + "\n"
		f.files[filepath.Join(ev, "format")] = "name: " + name + "\n"
	}
}

func (f *tracepointFS) ReadFile(path string) ([]byte, error) {
	s, ok := f.files[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(s), nil
}

func (f *tracepointFS) AppendLine(path, line string) error { return syscall.EPERM }

func (f *tracepointFS) Exists(path string) bool {
	if _, ok := f.files[path]; ok {
		return true
	}
	for p := range f.files {
		if strings.HasPrefix(p, path+"/") {
			return true
		}
	}
	return false
}

func (f *tracepointFS) MountTracefs(dir string) error {
	if !f.canMount {
		return syscall.EPERM
	}
	f.mounted = append(f.mounted, dir)
	f.addTracefs(dir)
	return nil
}

// TestMapCallProbesMounts: the syscall tracepoints are read from the
// tracefs mount that has them; where none is mounted, record mounts
// tracefs as the uprobe method does, and says what to do when it cannot.
func TestMapCallProbesMounts(t *testing.T) {
	for _, c := range []struct {
		name    string
		fs      *tracepointFS
		mounts  int
		wantErr bool
		firstID uint64
	}{
		{"mounted", newTracepointFS(true, tracefs.Dirs[0]), 0, false, 600},
		{"debugfs only", newTracepointFS(true, tracefs.Dirs[1]), 0, false, 600},
		{"none, mountable", newTracepointFS(true), 1, false, 600},
		{"none, not mountable", newTracepointFS(false), 0, true, 0},
	} {
		probes, mounted, err := MapCallProbes(c.fs)
		if (err != nil) != c.wantErr || len(c.fs.mounted) != c.mounts || (mounted != "") != (c.mounts > 0) {
			t.Errorf("%s: err %v, mounted %v (says %q); want error %v, %d mounts", c.name, err, c.fs.mounted, mounted, c.wantErr, c.mounts)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "mount -t tracefs") {
				t.Errorf("%s: error %q does not say how to mount tracefs", c.name, err)
			}
			continue
		}
		if len(probes) != len(schema.SyscallEvents) || probes[0].ID != c.firstID || probes[0].Event != schema.SyscallEvents[0] {
			t.Errorf("%s: probes %+v", c.name, probes)
		}
	}
}
