package binfile

import (
	"encoding/hex"
	"io"
	"os"
)

// FileBuildID returns the GNU build ID of the ELF file at path (nil when it
// has none), as a recorder stores it in a recording's BUILD_ID feature.
func FileBuildID(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReaderBuildID(path, f)
}

// ReaderBuildID returns the GNU build ID of an open ELF file named name
// (nil when it has none): for a caller that must check the very file it
// goes on to read.
func ReaderBuildID(name string, r io.ReaderAt) ([]byte, error) {
	ef, err := newELF(name, r)
	if err != nil {
		return nil, err
	}
	id := readBuildID(ef)
	if id == "" {
		return nil, nil
	}
	return hex.DecodeString(id)
}
