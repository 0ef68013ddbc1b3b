package binfile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// elfFile is one opened ELF file with what the search needs to know.
type elfFile struct {
	path         string
	f            File // nil when the file was not opened through an FS
	ef           *elf.File
	buildID      string // lowercase hex, "" if none
	debuglink    string // .gnu_debuglink file name
	debuglinkCRC uint32
}

func (f *elfFile) close() {
	if f.f != nil {
		f.f.Close()
	}
}

func openELFFile(fsys FS, name string) (*elfFile, error) {
	r, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	ef, err := newELF(name, r)
	if err != nil {
		r.Close()
		return nil, err
	}
	f := &elfFile{path: name, f: r, ef: ef}
	f.buildID = readBuildID(ef)
	f.debuglink, f.debuglinkCRC = readDebuglink(ef)
	return f, nil
}

// newELF is elf.NewFile with its panics turned into errors.
func newELF(name string, r interface {
	ReadAt([]byte, int64) (int, error)
}) (ef *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			ef, err = nil, &FormatError{Path: name, Msg: "reading ELF headers", Err: fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()
	// Check the magic first: debug/elf's error quotes the bytes it found,
	// and a recording can name any file (the first bytes of /etc/shadow
	// must not end up in a warning).
	var magic [4]byte
	if n, _ := r.ReadAt(magic[:], 0); n < 4 || string(magic[:]) != elf.ELFMAG {
		return nil, &FormatError{Path: name, Msg: "not an ELF file (no ELF magic number)"}
	}
	ef, err = elf.NewFile(r)
	if err != nil {
		return nil, &FormatError{Path: name, Msg: "not a readable ELF file", Err: errors.New(withoutValues(err.Error()))}
	}
	return ef, nil
}

// withoutValues drops what debug/elf's FormatError quotes from the file
// (" 'VALUE' ") from its message, keeping what was wrong and where.
func withoutValues(msg string) string {
	i := strings.Index(msg, " '")
	j := strings.LastIndex(msg, "' ")
	if i < 0 || j <= i {
		return msg
	}
	return msg[:i] + msg[j+1:]
}

// sectionData reads a section's contents, refusing NOBITS sections (a debug
// file's .text), absurd sizes and panics.
func sectionData(s *elf.Section) (data []byte, err error) {
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("no data")
	}
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("debug/elf panicked reading %s: %v", s.Name, p)
		}
	}()
	return s.Data()
}

const maxNoteSize = 1 << 20

// readBuildID returns the NT_GNU_BUILD_ID note's descriptor in hex, from
// note sections or, failing that, PT_NOTE segments.
func readBuildID(ef *elf.File) string {
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > maxNoteSize {
			continue
		}
		if d, err := sectionData(s); err == nil {
			if id := noteBuildID(d, ef.ByteOrder); id != "" {
				return id
			}
		}
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > maxNoteSize {
			continue
		}
		d := make([]byte, p.Filesz)
		if _, err := p.ReadAt(d, 0); err != nil {
			continue
		}
		if id := noteBuildID(d, ef.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

func noteBuildID(d []byte, bo binary.ByteOrder) string {
	for len(d) >= 12 {
		namesz, descsz, typ := uint64(bo.Uint32(d)), uint64(bo.Uint32(d[4:])), bo.Uint32(d[8:])
		d = d[12:]
		nameEnd := (namesz + 3) &^ 3
		descEnd := nameEnd + (descsz+3)&^3
		if nameEnd > uint64(len(d)) || nameEnd+descsz > uint64(len(d)) {
			return ""
		}
		if typ == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 && bytes.Equal(d[:4], []byte("GNU\x00")) && descsz > 0 {
			return hex.EncodeToString(d[nameEnd : nameEnd+descsz])
		}
		if descEnd > uint64(len(d)) {
			return ""
		}
		d = d[descEnd:]
	}
	return ""
}

// readDebuglink parses .gnu_debuglink: a NUL-terminated name, padding to 4,
// then a CRC32 of the debug file.
func readDebuglink(ef *elf.File) (string, uint32) {
	s := ef.Section(".gnu_debuglink")
	if s == nil || s.Size > 4096 {
		return "", 0
	}
	d, err := sectionData(s)
	if err != nil {
		return "", 0
	}
	i := bytes.IndexByte(d, 0)
	if i <= 0 {
		return "", 0
	}
	off := (i + 4) &^ 3
	if off+4 > len(d) {
		return "", 0
	}
	name := string(d[:i])
	if bytes.ContainsRune(d[:i], '/') {
		return "", 0 // a debuglink is a file name, never a path
	}
	return name, ef.ByteOrder.Uint32(d[off:])
}

func (f *elfFile) hasDWARF() bool {
	s := f.ef.Section(".debug_info")
	if s == nil {
		s = f.ef.Section(".zdebug_info")
	}
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

func (f *elfFile) hasSymtab() bool {
	s := f.ef.Section(".symtab")
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}
