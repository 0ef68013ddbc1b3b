package binfile

import (
	"io"
	"io/fs"
	"os"
)

// FS is how a Locator sees the file system: the only way this package
// reaches the outside world, so tests can hand it a fake. Names are OS paths
// (absolute or relative to the working directory), not io/fs paths.
type FS interface {
	// Open opens name for reading.
	Open(name string) (File, error)
	// Stat describes name, following symbolic links (like os.Stat).
	Stat(name string) (fs.FileInfo, error)
}

// File is an open file as FS returns it; *os.File satisfies it.
type File interface {
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

// osFS is the real file system.
type osFS struct{}

// Open implements FS with os.Open.
func (osFS) Open(name string) (File, error) { return os.Open(name) }

// Stat implements FS with os.Stat.
func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// isRegular reports whether name exists (after symlinks) and is a regular file.
func isRegular(fsys FS, name string) bool {
	fi, err := fsys.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}
