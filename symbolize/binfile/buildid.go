package binfile

import (
	"encoding/hex"
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
	ef, err := newELF(path, f)
	if err != nil {
		return nil, err
	}
	id := readBuildID(ef)
	if id == "" {
		return nil, nil
	}
	return hex.DecodeString(id)
}
