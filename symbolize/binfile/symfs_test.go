package binfile

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// loggingFS records every name the Locator asks for.
type loggingFS struct {
	FS
	names *[]string
}

func (l loggingFS) Open(name string) (File, error) {
	*l.names = append(*l.names, name)
	return l.FS.Open(name)
}

func (l loggingFS) Stat(name string) (fs.FileInfo, error) {
	*l.names = append(*l.names, name)
	return l.FS.Stat(name)
}

// A recording naming /../../../../../../../etc/shadow (as
// testdata/crafted/escape.data does): with a symfs, nothing outside it is
// looked at, and the file's bytes appear in no message.
func TestSymfsConfined(t *testing.T) {
	const rec = "/../../../../../../../etc/shadow"
	secret := []byte("root:$y$j9T$secret:19000:0:99999:7:::\n")
	files := memFS{"/etc/shadow": secret, "/sym/etc/shadow": secret, "/usr/lib/debug/etc/shadow": secret}
	for _, c := range []struct {
		name    string
		loc     Locator
		outside bool // the host may be searched
	}{
		{"symfs only", Locator{Symfs: "/sym", DebugDirs: []string{"/usr/lib/debug"}}, false},
		{"with fallback", Locator{Symfs: "/sym", DebugDirs: []string{"/usr/lib/debug"}, HostFallback: true}, true},
	} {
		var names []string
		c.loc.FS = loggingFS{files, &names}
		_, err := c.loc.Open(rec, "")
		if err == nil {
			t.Fatalf("%s: opened %s", c.name, rec)
		}
		msg := err.Error() // with the fix, as the command shows it
		if nf := (*NotFoundError)(nil); errors.As(err, &nf) {
			msg += ". " + nf.Fix()
		}
		if strings.Contains(msg, "root") || strings.Contains(msg, "114 111 111 116") || strings.Contains(msg, "..") && !strings.HasPrefix(msg, "binfile: no file for "+rec+";") {
			t.Errorf("%s: message shows file contents or an uncleaned path: %s", c.name, msg)
		}
		if !strings.Contains(msg, "/sym/etc/shadow: not an ELF file") {
			t.Errorf("%s: %s", c.name, msg)
		}
		var out []string
		for _, n := range names {
			if !strings.HasPrefix(n, "/sym/") {
				out = append(out, n)
			}
			if strings.Contains(n, "..") {
				t.Errorf("%s: looked at uncleaned %s", c.name, n)
			}
		}
		if c.outside != (len(out) > 0) {
			t.Errorf("%s: looked outside the symfs at %q", c.name, out)
		}
		if strings.Contains(msg, "--symfs-fallback") == c.outside {
			t.Errorf("%s: hint about --symfs-fallback wrong: %s", c.name, msg)
		}
	}
}

// Other ELF errors keep what was wrong and where, not the bytes found.
func TestWithoutValues(t *testing.T) {
	for in, want := range map[string]string{
		"bad magic number '[114 111 111 116]' in record at byte 0x0": "bad magic number in record at byte 0x0",
		"unknown ELF class '7' in record at byte 0x4":                "unknown ELF class in record at byte 0x4",
		"invalid section header":                                     "invalid section header",
	} {
		if got := withoutValues(in); got != want {
			t.Errorf("withoutValues(%q) = %q, want %q", in, got, want)
		}
	}
}
