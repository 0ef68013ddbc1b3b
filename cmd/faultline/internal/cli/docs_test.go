package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// cliReference renders docs/cli.md: 'faultline help', then 'faultline help
// NAME' for every command and help topic, each in a fenced block under a
// heading of its own. The help text is the one source; the page is its
// copy for readers of the repository.
func cliReference(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# Command reference\n\n")
	b.WriteString("<!-- Generated from the commands' help by\n")
	b.WriteString("     go test ./cmd/faultline/internal/cli -run TestCLIReference -update\n")
	b.WriteString("     Edit the help text in cmd/faultline/internal/cli, not this page. -->\n\n")
	b.WriteString("What `faultline help`, `faultline help COMMAND` and `faultline help TOPIC`\nprint.\n")
	section := func(title string, args ...string) {
		var out, errOut bytes.Buffer
		env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
		if code := Main(args, env); code != ExitOK {
			t.Fatalf("faultline %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		text := out.String()
		if strings.Contains(text, "```") {
			t.Fatalf("faultline %s: the help contains a code fence, which would end the block", strings.Join(args, " "))
		}
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s", title, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("```\n")
	}
	section("faultline", "help")
	for _, c := range commands() {
		section("faultline "+c.name, "help", c.name)
	}
	var topics []string
	for name := range helpTopics {
		topics = append(topics, name)
	}
	slices.Sort(topics)
	for _, name := range topics {
		section("faultline help "+name, "help", name)
	}
	return b.Bytes()
}

// TestCLIReference checks that docs/cli.md is what the commands' help
// prints, so the page cannot drift from the binary; -update rewrites it.
func TestCLIReference(t *testing.T) {
	path := filepath.Join(perftest.Root(t), "docs", "cli.md")
	want := cliReference(t)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/faultline/internal/cli -run TestCLIReference -update writes it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("docs/cli.md differs from the help at line %d:\n  page: %q\n  help: %q\nrun go test ./cmd/faultline/internal/cli -run TestCLIReference -update", i+1, g, w)
		}
	}
}
