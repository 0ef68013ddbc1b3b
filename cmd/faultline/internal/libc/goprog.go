package libc

import "debug/elf"

// IsGoProgram reports whether the program at path was built by the Go
// toolchain: it has the sections Go's linker writes (the build
// information, the runtime's function table, or the Go build ID note).
// Its allocations are the Go runtime's, which never call malloc.
func IsGoProgram(sys System, path string) bool {
	prog, err := followShebang(sys, path)
	if err != nil {
		return false
	}
	goProg, err := readELF(sys, prog, func(f *elf.File, _ string) bool {
		for _, name := range []string{".go.buildinfo", ".gopclntab", ".note.go.buildid"} {
			if f.Section(name) != nil {
				return true
			}
		}
		return false
	})
	return err == nil && goProg
}
