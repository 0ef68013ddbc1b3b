package schema

import "strings"

// systemLibDirs hold system libraries (libc, libstdc++, the loader).
var systemLibDirs = []string{"/lib/", "/lib64/", "/lib32/", "/usr/lib/", "/usr/lib64/", "/usr/lib32/", "/usr/libexec/"}

// IsSystemFile reports whether a mapping's file is a system library: a
// shared object under the system library directories, or the vdso. The
// in-process recorder gives a call to the allocator from such code the top
// words of the stack, for the analysis to find the caller outside it; the
// report counts its frames as the system's code, not the user's.
func IsSystemFile(file string) bool {
	if file == "[vdso]" || file == "[vsyscall]" {
		return true
	}
	for _, d := range systemLibDirs {
		if strings.HasPrefix(file, d) {
			return strings.Contains(file[strings.LastIndexByte(file, '/'):], ".so")
		}
	}
	return false
}
