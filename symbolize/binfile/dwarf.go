package binfile

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// dwarfIndex answers "which functions, inlined ones included, and which
// source line cover this address". Compile units are indexed when the
// binary is opened (from .debug_aranges when lazy is set, see
// lazydwarf.go); a unit's functions and line table are read the first
// time an address inside it is asked about.
type dwarfIndex struct {
	path  string
	cus   []span // sorted by lo; node is the index into units
	units []*cuInfo
	// line is the raw .debug_line (nil when not at hand) in byte order
	// order, for checkLineHeader.
	line  []byte
	order binary.ByteOrder
	// lazy, when set, reads each unit on its own from lazily inflated
	// sections; nil once the index holds every unit's own ranges.
	lazy *lazyDWARF
}

// span is one address range [lo, hi) and what covers it.
type span struct {
	lo, hi uint64
	node   int32
}

type cuInfo struct {
	off dwarf.Offset // in .debug_info
	// d holds the unit, at offset start; names reads it for following
	// abstract_origin/specification. Shared by all units unless lazy.
	d       *dwarf.Data
	names   *dwarf.Reader
	start   dwarf.Offset
	aranges [][2]uint64 // lazy: the unit's ranges as .debug_aranges gives them
	state   uint8       // 0 not read, 1 read, 2 read failed
	err     error
	files   []string
	lines   []lineRow // sequences sorted by start address, then concatenated
	funcs   []span    // subprogram ranges sorted by lo
	nodes   []inode
}

type lineRow struct {
	addr uint64
	file int32 // index into cuInfo.files; -1 at an end_sequence
	line int32
}

// inode is a subprogram with code or an inlined_subroutine.
type inode struct {
	off      dwarf.Offset
	ranges   [][2]uint64
	children []int32
	callFile string // the caller's file and line of an inlined call
	callLine int32
	resolved bool
	name     string // demangled
	linkage  string // as in the DWARF (mangled, if it was)
	entry    uint64 // lowest address, for SymOffset without an ELF symbol
}

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name, which older GCCs write
// for DW_AT_linkage_name.
const attrMIPSLinkageName dwarf.Attr = 0x2007

// maxRefChain bounds the abstract_origin/specification links followed.
const maxRefChain = 16

// newDWARFIndex indexes the compile units of d by their address ranges.
func newDWARFIndex(path string, d *dwarf.Data) (x *dwarfIndex, err error) {
	defer func() {
		if p := recover(); p != nil {
			x, err = nil, &FormatError{Path: path, Msg: "indexing DWARF compile units", Err: fmt.Errorf("debug/dwarf panicked: %v", p)}
		}
	}()
	x = &dwarfIndex{path: path}
	if err := x.indexUnits(d); err != nil {
		return nil, err
	}
	return x, nil
}

// indexUnits indexes every unit of d by the ranges of its DIE.
func (x *dwarfIndex) indexUnits(d *dwarf.Data) error {
	x.units, x.cus = nil, nil
	names := d.Reader()
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			if len(x.units) == 0 {
				return &FormatError{Path: x.path, Msg: "reading .debug_info", Err: err}
			}
			break // keep the units read so far
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			rs, err := d.Ranges(e)
			if err == nil {
				cu := int32(len(x.units))
				x.units = append(x.units, &cuInfo{off: e.Offset, d: d, names: names, start: e.Offset})
				for _, rg := range rs {
					if rg[0] != 0 && rg[0] < rg[1] {
						x.cus = append(x.cus, span{rg[0], rg[1], cu})
					}
				}
			}
		}
		r.SkipChildren()
	}
	sort.Slice(x.cus, func(i, j int) bool { return x.cus[i].lo < x.cus[j].lo })
	return nil
}

// findSpan returns the index of a span containing pc, or -1. Spans may
// nest or overlap a little (hot/cold splits, aliases), so look back a few.
func findSpan(spans []span, pc uint64) int {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].lo > pc }) - 1
	for j := i; j >= 0 && j > i-8; j-- {
		if pc < spans[j].hi {
			return j
		}
	}
	return -1
}

// unitFor returns the compile unit covering pc, reading it if need be.
func (x *dwarfIndex) unitFor(pc uint64) *cuInfo {
	i := findSpan(x.cus, pc)
	if i < 0 {
		return nil
	}
	cu := x.units[x.cus[i].node]
	if cu.state == 0 {
		cu.err = x.readUnit(cu)
		cu.state = 1
		if cu.err != nil {
			cu.state = 2
		}
		if x.lazy != nil && x.lazy.mismatch {
			x.readAll()
			return x.unitFor(pc)
		}
	}
	return cu
}

// readAll turns a lazy index into one of every unit's own ranges: all
// sections read whole, one Data for all units. Units read so far are
// dropped (and read again when asked about). If that fails, the index is
// left empty: frames are named from ELF symbols.
func (x *dwarfIndex) readAll() {
	l := x.lazy
	x.lazy, x.units, x.cus, x.line = nil, nil, nil, nil
	defer func() {
		if p := recover(); p != nil {
			x.units, x.cus = nil, nil
		}
	}()
	sect := map[string][]byte{}
	for name, s := range l.sect {
		data, err := s.all()
		if err != nil {
			return
		}
		sect[name] = data
	}
	d, err := dwarf.New(sect["abbrev"], nil, nil, sect["info"], sect["line"], nil, sect["ranges"], sect["str"])
	if err != nil {
		return
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if data := sect[name]; data != nil {
			if d.AddSection(".debug_"+name, data) != nil {
				return
			}
		}
	}
	if x.indexUnits(d) == nil {
		x.line = sect["line"]
	}
}

// langC are the DW_AT_language values of C (DW_LANG_C89, C, C99, C11,
// C17), whose structures and unions hold no functions: their members are
// not read (with DW_AT_sibling, not even decoded).
var langC = map[int64]bool{0x1: true, 0x2: true, 0xc: true, 0x1d: true, 0x2c: true}

// Tags whose children never hold code.
func skipTag(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagEnumerationType, dwarf.TagArrayType, dwarf.TagSubroutineType,
		dwarf.TagFormalParameter, dwarf.TagVariable, dwarf.TagBaseType,
		dwarf.TagMember, dwarf.TagTypedef, dwarf.Tag(0x4109), dwarf.TagCallSite:
		return true
	}
	return false
}

// readUnit reads a compile unit's line table and its function tree. It
// keeps what it read before an error.
func (x *dwarfIndex) readUnit(cu *cuInfo) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &FormatError{Path: x.path, Msg: fmt.Sprintf("reading compile unit at %#x", cu.off), Err: fmt.Errorf("debug/dwarf panicked: %v", p)}
		}
		sort.Slice(cu.funcs, func(i, j int) bool { return cu.funcs[i].lo < cu.funcs[j].lo })
	}()
	line := x.line
	if x.lazy != nil {
		if line, err = x.openLazyUnit(cu); err != nil {
			return &FormatError{Path: x.path, Msg: fmt.Sprintf("compile unit at %#x", cu.off), Err: err}
		}
	}
	r := cu.d.Reader()
	r.Seek(cu.start)
	e, err := r.Next()
	if err != nil || e == nil {
		return &FormatError{Path: x.path, Msg: fmt.Sprintf("compile unit at %#x", cu.off), Err: err}
	}
	var fileTab []*dwarf.LineFile
	var lr *dwarf.LineReader
	var lerr error
	if off, ok := e.Val(dwarf.AttrStmtList).(int64); ok {
		lerr = checkLineHeader(line, off, x.order)
	}
	if lerr == nil {
		lr, lerr = cu.d.LineReader(e)
	}
	compDir, _ := e.Val(dwarf.AttrCompDir).(string)
	lang, _ := e.Val(dwarf.AttrLanguage).(int64)
	isC := langC[lang]
	if lr != nil && lerr == nil {
		fileTab = cu.readLines(lr, compDir)
	}
	if !e.Children {
		return nil
	}
	stack := []int32{-1}
	for len(stack) > 0 {
		e, err := r.Next()
		if err != nil {
			return &FormatError{Path: x.path, Msg: fmt.Sprintf("compile unit at %#x", cu.off), Err: err}
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		cur := stack[len(stack)-1]
		self := cur
		switch e.Tag {
		case dwarf.TagSubprogram:
			if rs := codeRanges(cu.d, e); len(rs) > 0 {
				self = cu.addNode(e, rs)
				for _, rg := range rs {
					cu.funcs = append(cu.funcs, span{rg[0], rg[1], self})
				}
			}
		case dwarf.TagInlinedSubroutine:
			if cur < 0 {
				break
			}
			if rs := codeRanges(cu.d, e); len(rs) > 0 {
				self = cu.addNode(e, rs)
				n := &cu.nodes[self]
				if f, ok := e.Val(dwarf.AttrCallFile).(int64); ok && f >= 0 && f < int64(len(fileTab)) && fileTab[f] != nil {
					n.callFile = fixV5Path(fileTab, fileTab[f].Name, compDir)
				}
				if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
					n.callLine = int32(l)
				}
				cu.nodes[cur].children = append(cu.nodes[cur].children, self)
			}
		default:
			if skipTag(e.Tag) || isC && (e.Tag == dwarf.TagStructType || e.Tag == dwarf.TagUnionType) {
				if e.Children {
					r.SkipChildren()
				}
				continue
			}
		}
		if e.Children {
			stack = append(stack, self)
		}
	}
	return nil
}

// openLazyUnit sets cu.d to a Data holding only the unit and returns
// .debug_line as far as its line table. The unit entry is read twice: its
// DW_AT_stmt_list says how much of .debug_line the Data must hold.
func (x *dwarfIndex) openLazyUnit(cu *cuInfo) ([]byte, error) {
	d, err := x.lazy.openUnit(cu, nil)
	if err != nil {
		return nil, err
	}
	e, err := d.Reader().Next()
	if err != nil || e == nil {
		return nil, fmt.Errorf("no unit entry: %w", err)
	}
	if !x.sameRanges(d, cu, e) {
		x.lazy.mismatch = true
		return nil, errors.New("ranges differ from .debug_aranges")
	}
	var line []byte
	if off, ok := e.Val(dwarf.AttrStmtList).(int64); ok {
		line = x.lazy.lineFor(off)
		if d, err = x.lazy.openUnit(cu, line); err != nil {
			return nil, err
		}
	}
	cu.d, cu.names, cu.start = d, d.Reader(), 0
	return line, nil
}

// codeRanges returns e's address ranges without the empty ones and those
// of code the linker discarded (address 0).
func codeRanges(d *dwarf.Data, e *dwarf.Entry) [][2]uint64 {
	rs, err := d.Ranges(e)
	if err != nil {
		return nil
	}
	out := rs[:0]
	for _, rg := range rs {
		if rg[0] != 0 && rg[0] < rg[1] && rg[1] != ^uint64(0) {
			out = append(out, rg)
		}
	}
	return out
}

func (cu *cuInfo) addNode(e *dwarf.Entry, rs [][2]uint64) int32 {
	entry := rs[0][0]
	for _, rg := range rs {
		entry = min(entry, rg[0])
	}
	cu.nodes = append(cu.nodes, inode{off: e.Offset, ranges: rs, entry: entry})
	return int32(len(cu.nodes) - 1)
}

// readLines reads the unit's line table into sorted rows and returns its
// file table (for DW_AT_call_file).
func (cu *cuInfo) readLines(lr *dwarf.LineReader, compDir string) []*dwarf.LineFile {
	fileIdx := map[*dwarf.LineFile]int32{}
	var seqs [][]lineRow
	var cur []lineRow
	var le dwarf.LineEntry
	for {
		err := lr.Next(&le)
		if err != nil {
			if !errors.Is(err, io.EOF) && len(cur) > 0 {
				seqs = append(seqs, cur)
			}
			break
		}
		if le.EndSequence {
			if len(cur) > 0 && cur[0].addr != 0 {
				cur = append(cur, lineRow{addr: le.Address, file: -1})
				seqs = append(seqs, cur)
			}
			cur = nil
			continue
		}
		fi := int32(-1)
		if le.File != nil {
			var ok bool
			if fi, ok = fileIdx[le.File]; !ok {
				fi = int32(len(cu.files))
				fileIdx[le.File] = fi
				cu.files = append(cu.files, le.File.Name)
			}
		}
		cur = append(cur, lineRow{addr: le.Address, file: fi, line: int32(le.Line)})
	}
	files := lr.Files()
	for i, name := range cu.files {
		cu.files[i] = fixV5Path(files, name, compDir)
	}
	sort.SliceStable(seqs, func(i, j int) bool { return seqs[i][0].addr < seqs[j][0].addr })
	n := 0
	for _, s := range seqs {
		n += len(s)
	}
	cu.lines = make([]lineRow, 0, n)
	for _, s := range seqs {
		cu.lines = append(cu.lines, s...)
	}
	return files
}

// fixV5Path makes a DWARF 5 file name relative to the compilation
// directory again. debug/dwarf (Go 1.26) joins a DWARF 5 file name with its
// directory entry but, unlike for DWARF 4, not a relative directory with
// DW_AT_comp_dir: glibc's "../libio" + "libioP.h" under comp_dir "./libio"
// comes out "../libio/libioP.h" instead of "libio/libioP.h". Directory
// entry 0 is the compilation directory itself, so names under it are
// left alone. A DWARF 5 table is one whose file 0 exists (debug/dwarf
// leaves entry 0 nil before version 5).
func fixV5Path(files []*dwarf.LineFile, name, compDir string) string {
	if len(files) == 0 || files[0] == nil || compDir == "" || name == "" || path.IsAbs(name) {
		return name
	}
	if c := path.Clean(compDir); c != "." && strings.HasPrefix(name, c+"/") {
		return name
	}
	return path.Join(compDir, name)
}

// line returns the source position of pc: the last row at or before pc,
// unless that row ends a sequence.
func (cu *cuInfo) line(pc uint64) (string, int) {
	i := sort.Search(len(cu.lines), func(i int) bool { return cu.lines[i].addr > pc }) - 1
	if i < 0 || cu.lines[i].file < 0 {
		return "", 0
	}
	return cu.files[cu.lines[i].file], int(cu.lines[i].line)
}

// chain appends to buf the nodes covering pc, outermost (the subprogram)
// first.
func (cu *cuInfo) chain(pc uint64, buf []int32) []int32 {
	i := findSpan(cu.funcs, pc)
	if i < 0 {
		return buf
	}
	n := cu.funcs[i].node
	for depth := 0; depth < 1000; depth++ {
		buf = append(buf, n)
		next := int32(-1)
		for _, c := range cu.nodes[n].children {
			if inRanges(cu.nodes[c].ranges, pc) {
				next = c
				break
			}
		}
		if next < 0 {
			break
		}
		n = next
	}
	return buf
}

func inRanges(rs [][2]uint64, pc uint64) bool {
	for _, rg := range rs {
		if rg[0] <= pc && pc < rg[1] {
			return true
		}
	}
	return false
}

// resolve fills in n's names by following DW_AT_abstract_origin and
// DW_AT_specification. Like binutils, a linkage name anywhere on the chain
// wins over DW_AT_name.
func (cu *cuInfo) resolve(n *inode) {
	if n.resolved {
		return
	}
	n.resolved = true
	defer func() {
		if p := recover(); p != nil {
			n.name, n.linkage = "", ""
		}
	}()
	var name, linkage string
	off := n.off
	for i := 0; i < maxRefChain; i++ {
		cu.names.Seek(off)
		e, err := cu.names.Next()
		if err != nil || e == nil {
			break
		}
		if linkage == "" {
			if s, ok := e.Val(dwarf.AttrLinkageName).(string); ok {
				linkage = s
			} else if s, ok := e.Val(attrMIPSLinkageName).(string); ok {
				linkage = s
			}
		}
		if name == "" {
			if s, ok := e.Val(dwarf.AttrName).(string); ok {
				name = s
			}
		}
		if linkage != "" {
			break
		}
		next, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok || next == off {
			break
		}
		off = next
	}
	if linkage != "" {
		n.linkage = linkage
		n.name = demangleName(linkage)
	} else {
		n.linkage = name
		n.name = name
	}
}

func (x *dwarfIndex) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d units, %d ranges", len(x.units), len(x.cus))
	return b.String()
}

// sameRanges reports whether the unit entry e covers what .debug_aranges
// said it does (the ranges newDWARFIndex would index, in the same order).
func (x *dwarfIndex) sameRanges(d *dwarf.Data, cu *cuInfo, e *dwarf.Entry) bool {
	rs, err := d.Ranges(e)
	if err != nil {
		return false
	}
	i := 0
	for _, rg := range rs {
		if rg[0] == 0 || rg[0] >= rg[1] {
			continue
		}
		if i >= len(cu.aranges) || cu.aranges[i] != rg {
			return false
		}
		i++
	}
	return i == len(cu.aranges)
}
