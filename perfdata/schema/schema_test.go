package schema

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEntryPointsTable: every entry point has an event name of its own and
// at least one symbol, and no symbol stands for two entry points (the
// recorder attaches to a symbol once, the analysis maps an event name back
// to one entry).
func TestEntryPointsTable(t *testing.T) {
	events := map[string]bool{}
	symbols := map[string]string{}
	for _, e := range EntryPoints {
		if e.Event == "" || len(e.Symbols) == 0 {
			t.Errorf("entry point %+v: needs an event name and a symbol", e)
		}
		if events[e.Event] {
			t.Errorf("event %s listed twice", e.Event)
		}
		events[e.Event] = true
		for _, s := range e.Symbols {
			if prev, ok := symbols[s]; ok {
				t.Errorf("symbol %s stands for %s and %s", s, prev, e.Event)
			}
			symbols[s] = e.Event
			if !IsEntrySymbol(s) {
				t.Errorf("IsEntrySymbol(%s) = false", s)
			}
		}
		if strings.HasSuffix(e.Event, ReturnSuffix) || strings.HasSuffix(e.Event, CallSuffix) {
			t.Errorf("event %s ends in a suffix the analysis strips", e.Event)
		}
	}
	if IsEntrySymbol("main") {
		t.Error("IsEntrySymbol(main) = true")
	}
}

// TestIsSystemFile: shared objects under the library directories and the
// kernel's pseudo-files are system code; a program, a static archive or a
// library outside those directories is not.
func TestIsSystemFile(t *testing.T) {
	for file, want := range map[string]bool{
		"/usr/lib/x86_64-linux-gnu/libc.so.6":       true,
		"/lib/x86_64-linux-gnu/libstdc++.so.6.0.30": true,
		"/lib64/ld-linux-x86-64.so.2":               true,
		"[vdso]":                                    true,
		"/usr/lib/x86_64-linux-gnu/libjemalloc.a":   false,
		"/usr/lib/python3/dist-packages/foo/bar.py": false,
		"/usr/local/lib/libmine.so":                 false,
		"/home/u/build/libapp.so":                   false,
		"/usr/bin/python3.11":                       false,
		"[heap]":                                    false,
		"/usr/lib/jvm/java-17/lib/server/libjvm.so": true,
	} {
		if got := IsSystemFile(file); got != want {
			t.Errorf("IsSystemFile(%q) = %v, want %v", file, got, want)
		}
	}
}

// TestTopStackWord: the word fields are s0, s1, … as the recorder's probe
// lines and the in-process events name them.
func TestTopStackWord(t *testing.T) {
	for i := range MaxTopWords {
		if got := TopStackWord(i); got != "s"+strconv.Itoa(i) {
			t.Fatalf("TopStackWord(%d) = %q", i, got)
		}
	}
}

// TestImportsNothingOfFaultline: the schema sits below both halves, so it
// imports only the standard library.
func TestImportsNothingOfFaultline(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, ".") {
				t.Errorf("%s imports %s: the schema imports only the standard library", name, p)
			}
		}
	}
}
