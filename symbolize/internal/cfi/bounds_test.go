package cfi

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// testdata/crafted/dwarfbomb.debug's .debug_frame is a 204 KB zlib blob
// claiming 200 MiB (1028×): refused before it is inflated.
func TestLoadRefusesZlibBomb(t *testing.T) {
	f := perftest.OpenELF(t, perftest.Testdata(t, "crafted", "dwarfbomb.debug"))
	_, err := Load(f, nil)
	if err == nil || !strings.Contains(err.Error(), ".debug_frame claims 209715200 bytes from 203872 compressed") {
		t.Fatalf("Load = %v, want the zlib bomb refused", err)
	}
}

// TestFrameSizeClaimCapped: an .eh_frame marked SHF_COMPRESSED whose header
// claims 8 GiB (a zlib bomb's header) is refused before anything is
// inflated.
func TestFrameSizeClaimCapped(t *testing.T) {
	data := perftest.ReadTestdata(t, "symfs/tmp/faultline-fixtures/bin/basic")
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	shoff, shentsize := le.Uint64(data[0x28:]), uint64(le.Uint16(data[0x3a:]))
	out := append([]byte(nil), data...)
	for i, s := range ef.Sections {
		if s.Name == ".eh_frame" {
			sh := shoff + uint64(i)*shentsize
			le.PutUint64(out[sh+8:], le.Uint64(out[sh+8:])|uint64(elf.SHF_COMPRESSED))
			le.PutUint32(out[s.Offset:], uint32(elf.COMPRESS_ZLIB))
			le.PutUint64(out[s.Offset+8:], 8<<30)
			le.PutUint64(out[s.Offset+16:], 1)
		}
	}
	bomb, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(bomb, bomb)
	if err == nil || !strings.Contains(err.Error(), "claims 8589934592 bytes") {
		t.Errorf("Load: %v; want the size claim refused", err)
	}
}
