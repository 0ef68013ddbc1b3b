package cfi

import (
	"debug/elf"
	"strings"
	"testing"
)

// testdata/crafted/dwarfbomb.debug's .debug_frame is a 204 KB zlib blob
// claiming 200 MiB (1028×): refused before it is inflated.
func TestLoadRefusesZlibBomb(t *testing.T) {
	f, err := elf.Open("../../../testdata/crafted/dwarfbomb.debug")
	if err != nil {
		t.Fatalf("crafted input missing (regenerate with testdata/crafted/gen.sh): %v", err)
	}
	defer f.Close()
	_, err = Load(f, nil)
	if err == nil || !strings.Contains(err.Error(), ".debug_frame claims 209715200 bytes from 203872 compressed") {
		t.Fatalf("Load = %v, want the zlib bomb refused", err)
	}
}
