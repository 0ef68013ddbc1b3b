package repocheck

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/faultline/faultline/perfdata/perftest"
)

// upstream lists the files of other projects that comments may cite, each
// by the path it is cited with, and whose it is: a reader opens them in
// that project's source. A comment that names any other file must name one
// in this repository.
var upstream = map[string]string{
	"include/trace/events/syscalls.h":         "Linux",
	"mm/mmap.c":                               "Linux",
	"mm/mremap.c":                             "Linux",
	"mm/madvise.c":                            "Linux",
	"arch/x86/kernel/sys_x86_64.c":            "Linux",
	"kernel/trace/trace_syscalls.c":           "Linux",
	"kernel/events/core.c":                    "Linux",
	"malloc/arena.c":                          "glibc",
	"elf/rtld.c":                              "glibc",
	"elf/dl-lookup.c":                         "glibc",
	"sysdeps/generic/dl-cache.h":              "glibc",
	"include/jemalloc/jemalloc_protos.h":      "jemalloc",
	"gperftools/tcmalloc.h":                   "gperftools",
	"libc_override_gcc_and_weak.h":            "gperftools (src/)",
	"include/mimalloc.h":                      "mimalloc",
	"alloc-override.c":                        "mimalloc (src/)",
	"include/uapi/linux/perf_event.h":         "Linux",
	"perf_event.h":                            "Linux (include/uapi/linux/perf_event.h)",
	"include/uapi/linux/fs.h":                 "Linux",
	"include/uapi/asm-generic/mman-common.h":  "Linux",
	"arch/x86/include/uapi/asm/perf_regs.h":   "Linux",
	"arch/arm64/include/uapi/asm/perf_regs.h": "Linux",
	"kernel/trace/trace_uprobe.c":             "Linux",
	"tools/perf/util/event.h":                 "Linux (perf)",
	"tools/perf/util/header.c":                "Linux (perf)",
	"tools/perf/util/header.h":                "Linux (perf)",
	"tools/perf/util/build-id.c":              "Linux (perf)",
	"tools/perf/util/symbol.c":                "Linux (perf)",
	"tools/perf/util/synthetic-events.c":      "Linux (perf)",
	"tools/perf/util/trace-event-info.c":      "Linux (perf)",
	"tools/perf/util/zstd.c":                  "Linux (perf)",
	"tools/lib/perf/include/perf/event.h":     "Linux (libperf)",
	"session.c":                               "Linux (perf: tools/perf/util/session.c)",
	"ordered-events.c":                        "Linux (perf: tools/perf/util/ordered-events.c)",
	"trace-event-info.c":                      "Linux (perf: tools/perf/util/trace-event-info.c)",
	"trace-event-read.c":                      "Linux (perf: tools/perf/util/trace-event-read.c)",
	"symbol.c":                                "Linux (perf: tools/perf/util/symbol.c)",
	"dso.c":                                   "Linux (perf: tools/perf/util/dso.c)",
	"build-id.c":                              "Linux (perf: tools/perf/util/build-id.c)",
	"malloc/malloc.c":                         "glibc",
	"malloc.c":                                "glibc (malloc/malloc.c)",
	"sysdeps/x86_64/dl-machine.h":             "glibc",
	"elf.h":                                   "glibc (elf/elf.h)",
	"debuginfod-client.c":                     "elfutils (debuginfod/debuginfod-client.c)",
	"unwind-pe.h":                             "gcc (libgcc/unwind-pe.h)",
	"elf.c":                                   "binutils (bfd/elf.c)",
	"debug/dwarf/buf.go":                      "Go",
	"debug/dwarf/line.go":                     "Go",
	"internal/driver/fetch.go":                "github.com/google/pprof",
}

// cited matches a file name with one of the endings that name a document,
// a source file or a script, and the character before it.
var cited = regexp.MustCompile(`(^|[^\w./$-])([\w./-]+\.(?:md|c|h|go|sh|py))\b`)

// TestCommentsCiteFilesThatExist: every file name a comment cites is a file
// of this repository (beside the commenting file, from the root, or the
// end of a path in it) or one of upstream's. Not citations, and so passed
// over: quoted names ("x.c"), names in <...> or `...`, file:line as a tool
// prints it, paths with a placeholder segment (testdata/DIR/gen.sh) or
// under a shell variable ($WORK/a.c), and URLs.
func TestCommentsCiteFilesThatExist(t *testing.T) {
	root := perftest.Root(t)
	var files []string
	all := map[string]bool{}
	base := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			all[rel] = true
			return nil
		}
		all[rel] = true
		base[d.Name()] = true
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(from, name string) bool {
		clean := strings.TrimPrefix(name, "./")
		if all[filepath.ToSlash(filepath.Join(filepath.Dir(from), name))] || all[clean] {
			return true
		}
		if !strings.Contains(clean, "/") {
			return base[clean]
		}
		for f := range all {
			if strings.HasSuffix(f, "/"+clean) {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, f := range files {
		var cs []comment
		switch filepath.Ext(f) {
		case ".go":
			cs = goComments(t, filepath.Join(root, f))
		case ".c", ".h", ".S":
			cs = cComments(readFile(t, filepath.Join(root, f)))
		case ".sh", ".py":
			cs = hashComments(readFile(t, filepath.Join(root, f)))
		default:
			continue
		}
		checked++
		for _, c := range cs {
			for _, name := range citations(c.text) {
				if !exists(f, name) && upstream[strings.TrimPrefix(name, "./")] == "" {
					t.Errorf("%s:%d: a comment cites %s, which is not in the repository (cite a file a reader of it can open, or add an upstream file to upstream with its project)", f, c.line, name)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("read the comments of %d source files under %s, want the repository's (over 100)", checked, root)
	}
}

// citations returns the file names text cites, less what is not a citation
// (see TestCommentsCiteFilesThatExist).
func citations(text string) []string {
	var out []string
	for _, m := range cited.FindAllStringSubmatchIndex(text, -1) {
		s, e := m[4], m[5]
		name := text[s:e]
		if s > 0 && strings.ContainsRune("\"'<`", rune(text[s-1])) {
			continue
		}
		if e+1 < len(text) && text[e] == ':' && text[e+1] >= '0' && text[e+1] <= '9' {
			continue
		}
		if w := strings.LastIndexAny(text[:s], " \t\n("); strings.Contains(text[w+1:s], "://") || strings.HasPrefix(name, "//") {
			continue
		}
		if hasPlaceholder(name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// hasPlaceholder reports whether a path has a segment in capitals (DIR,
// NAME) standing for any name.
func hasPlaceholder(name string) bool {
	segs := strings.Split(name, "/")
	for _, seg := range segs[:len(segs)-1] {
		if seg != "" && strings.IndexFunc(seg, func(r rune) bool { return !unicode.IsUpper(r) }) < 0 {
			return true
		}
	}
	return false
}

type comment struct {
	line int
	text string
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goComments returns a Go file's comments, as go/scanner finds them.
func goComments(t *testing.T, path string) []comment {
	src := readFile(t, path)
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { t.Errorf("%s: %s", pos, msg) }, scanner.ScanComments)
	var out []comment
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, comment{fset.Position(pos).Line, lit})
		}
	}
}

// cComments returns the comments of C (and assembler run through cpp):
// // to the end of the line and /* ... */, outside string and character
// literals.
func cComments(src []byte) []comment {
	var out []comment
	line := 1
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\n':
			line++
		case c == '"' || c == '\'':
			for i++; i < len(src) && src[i] != c && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			if i < len(src) && src[i] == '\n' {
				line++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := i
			for end < len(src) && src[end] != '\n' {
				end++
			}
			out = append(out, comment{line, string(src[i:end])})
			i = end - 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(string(src[i+2:]), "*/")
			if end < 0 {
				end = len(src)
			} else {
				end += i + 4
			}
			out = append(out, comment{line, string(src[i:end])})
			line += strings.Count(string(src[i:end]), "\n")
			i = end - 1
		}
	}
	return out
}

// hashComments returns the # comments of a shell or Python script: from a
// # that starts a word, outside quotes, to the end of the line (quotes are
// followed within a line only; the #! line is not a comment).
func hashComments(src []byte) []comment {
	var out []comment
	for n, l := range strings.Split(string(src), "\n") {
		if n == 0 && strings.HasPrefix(l, "#!") {
			continue
		}
		var quote byte
		for i := 0; i < len(l); i++ {
			switch c := l[i]; {
			case quote != 0:
				if c == '\\' && quote == '"' {
					i++
				} else if c == quote {
					quote = 0
				}
			case c == '\\':
				i++
			case c == '"' || c == '\'':
				quote = c
			case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
				out = append(out, comment{n + 1, l[i:]})
				i = len(l)
			}
		}
	}
	return out
}

// What citations takes for a citation and what it passes over.
func TestCitations(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"// see RULES.md and ../other/GUIDE.md.", []string{"RULES.md", "../other/GUIDE.md"}},
		{"// (include/uapi/linux/perf_event.h), gen.sh's note", []string{"include/uapi/linux/perf_event.h", "gen.sh"}},
		{`// named "x.c" in the fake stack, <stdio.h>, ` + "`a.go`", nil},
		{"//\tread_input io.c:12 ← main", nil},
		{"// testdata/DIR/gen.sh makes both; $WORK/moved/alloc.c", nil},
		{"// https://example.org/src/foo.c", nil},
		{"// profiles.golden and a.gob are no file names of these kinds", nil},
	} {
		got := citations(c.text)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("citations(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
