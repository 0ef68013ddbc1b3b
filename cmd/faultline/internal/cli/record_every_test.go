package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestRecordEveryFlags: --every's folder is -o's, else faultline-windows,
// or none when only pushing; --push wants --every; a window under 100 ms
// and -o - are refused with what to do.
func TestRecordEveryFlags(t *testing.T) {
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	for _, c := range []struct {
		args []string
		dir  string
	}{
		{[]string{"-p", "1", "--every", "60s"}, defaultWindowDir},
		{[]string{"-p", "1", "--every", "60s", "-o", "w"}, "w"},
		{[]string{"-p", "1", "--every", "60s", "--push", "http://localhost:4040"}, ""},
		{[]string{"-p", "1", "--every", "60s", "--push", "http://localhost:4040", "-o", "w", "--push-label", "env=prod"}, "w"},
	} {
		o, err := parseRecordFlags(env, c.args)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if o.dir != c.dir || o.compress {
			t.Errorf("%q: folder %q (compress %v), want %q", c.args, o.dir, o.compress, c.dir)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "1", "--push", "http://localhost:4040"}, "give --every D too"},
		{[]string{"-p", "1", "--every", "10ms"}, "want 100ms or more"},
		{[]string{"-p", "1", "--every", "1s", "-o", "-"}, "-o names their folder"},
		{[]string{"-p", "1", "--every", "1s", "--push-label", "bad"}, "record:"},
	} {
		_, err := parseRecordFlags(env, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}
