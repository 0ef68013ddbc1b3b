package recorder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/perfdata/schema"
)

// TestInprocFormats parses the in-process events' formats with perfdata's
// tracefs format parser and checks that each field sits where writeShim
// and writeCall put it: fields back to back from offset 8, in the order
// the uprobe method's probes list them.
func TestInprocFormats(t *testing.T) {
	ip := testInproc(testConfig())
	specs := ip.s.buildSpecs()
	seen := map[string]bool{}
	for _, sp := range specs {
		if sp.format == nil {
			continue
		}
		f, err := perfdata.ParseTraceFormat(schema.System, sp.format)
		if err != nil {
			t.Fatalf("%s: %v\n%s", sp.name, err, sp.format)
		}
		if uint64(f.ID) != sp.attr.Config || schema.System+":"+f.Name != sp.name {
			t.Errorf("%s: format says %s id %d, attr config %d", sp.name, f.Name, f.ID, sp.attr.Config)
		}
		seen[f.Name] = true
		off := 8
		for _, fld := range f.Fields {
			if fld.Offset < 8 {
				continue // common fields
			}
			if fld.Offset != off {
				t.Errorf("%s: field %s at %d, want %d", sp.name, fld.Name, fld.Offset, off)
			}
			off += fld.Size
		}
	}
	for _, name := range []string{"malloc", "malloc_short", "malloc__return", "malloc__call", "free",
		"calloc__call", "posix_memalign__call", "reallocarray_short"} {
		if !seen[name] {
			t.Errorf("no event %s", name)
		}
	}
	call := ip.call[shim.FuncCalloc]
	f, _ := perfdata.ParseTraceFormat(schema.System, call.format)
	var names []string
	for _, fld := range f.Fields {
		if fld.Offset >= 8 {
			names = append(names, fld.Name)
		}
	}
	want := []string{"__probe_ip", "nmemb", "size", "__probe_ret_ip", "ptr", "hdr"}
	if len(names) != len(want) {
		t.Fatalf("calloc__call fields %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("calloc__call fields %v, want %v", names, want)
			break
		}
	}
}

// TestProcMapsUserCode checks the caller test behind the compact events:
// the program's own code is user code, a system library's is not, and an
// address in no mapping is not (its words are kept).
func TestProcMapsUserCode(t *testing.T) {
	m := &procMaps{}
	m.addCode(codeRange{addrRange{0x7f0000, 0x7f8000}, true}) // libc
	m.addCode(codeRange{addrRange{0x400000, 0x401000}, false})
	m.addCode(codeRange{addrRange{0x500000, 0x502000}, false})
	for _, c := range []struct {
		pc   uint64
		user bool
	}{{0x400000, true}, {0x400fff, true}, {0x401000, false}, {0x501234, true}, {0x7f1000, false}, {0x3fffff, false}, {0x900000, false}} {
		if got := m.userCode(c.pc); got != c.user {
			t.Errorf("userCode(%#x) = %v, want %v", c.pc, got, c.user)
		}
	}
	// A new mapping over an old one replaces it (dlclose, then dlopen).
	m.addCode(codeRange{addrRange{0x500000, 0x501000}, true})
	if m.userCode(0x500800) || m.userCode(0x501800) {
		t.Errorf("the replaced mapping still counts: %+v", m.code)
	}
}

// TestFinishRaw checks the RAW part's padding: u32 size + payload rounded
// up to 8 bytes, the size being what follows it, as the kernel writes.
func TestFinishRaw(t *testing.T) {
	for n := 0; n < 20; n++ {
		b := binary.NativeEndian.AppendUint32([]byte{9, 9, 9}, 0)
		b = append(b, make([]byte, n)...)
		b = finishRaw(b, 3)
		if (len(b)-3)%8 != 0 || int(binary.NativeEndian.Uint32(b[3:])) != len(b)-3-4 {
			t.Errorf("payload %d: %d bytes, size field %d", n, len(b)-3, binary.NativeEndian.Uint32(b[3:]))
		}
	}
}

// writeSession returns an in-process source writing to a file (or to
// nowhere, in pipe mode, when discard), its session's specs counted.
func writeSession(tb testing.TB, discard bool) *inproc {
	var s *inproc
	if discard {
		s, _ = writeSessionTo(tb, io.Discard)
	} else {
		s, _ = writeSessionTo(tb, nil)
	}
	return s
}

// TestInprocLostCalls: the calls the shim could not record are written
// as lost samples of malloc: those after a thread gave up waiting,
// stamped when it did, and those a signal handler made while the shim was
// mid-record, stamped at the end.
func TestInprocLostCalls(t *testing.T) {
	ip, path := writeSessionTo(t, nil)
	s := ip.s
	w := s.w
	s.lastT = 2000
	s.res.Shim.Unrecorded, s.res.Shim.Interrupted = 3, 5
	s.res.Abandoned, s.res.AbandonedAt = true, 1500
	if err := ip.writeUnrecorded(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(&perfdata.WriterFeatures{}); err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for r.Next() {
		if l, ok := r.Record().(*perfdata.LostSamples); ok && l.Event != nil {
			got = append(got, fmt.Sprintf("%s %d at %d", l.Event.Name, l.Count, l.SampleID.Time))
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"faultline:malloc 3 at 1500", "faultline:malloc 5 at 2000"}
	if fmt.Sprint(got) != fmt.Sprint(want) || s.lost[ip.entry[shim.FuncMalloc]] != 8 {
		t.Errorf("lost samples %v (counted %d), want %v (8)", got, s.lost[ip.entry[shim.FuncMalloc]], want)
	}
}

// writeSessionTo is writeSession writing in pipe mode to out, or, when out
// is nil, to a file: its path is returned.
func writeSessionTo(tb testing.TB, out io.Writer) (*inproc, string) {
	ip := testInproc(testConfig())
	s := ip.s
	s.specs = s.buildSpecs()
	s.perSpec = map[*spec]*uint64{}
	s.lost = map[*spec]uint64{}
	var events []perfdata.WriterEvent
	for i, sp := range s.specs {
		sp.count = new(uint64)
		s.perSpec[sp] = sp.count
		id := sp.synthID // what the shim's samples carry; the kernel's events get ids of their own
		if !sp.synthetic {
			id = uint64(i + 1)
		}
		events = append(events, perfdata.WriterEvent{Attr: sp.attr, Name: sp.name, IDs: []uint64{id}})
	}
	var w *perfdata.Writer
	var err error
	path := ""
	if out != nil {
		w, err = perfdata.NewPipeWriter(out, events, &perfdata.WriterFeatures{}, nil)
	} else {
		var f *os.File
		f, path = perftest.Create(tb, "w.data")
		w, err = perfdata.NewWriter(f, events, nil)
	}
	if err != nil {
		tb.Fatal(err)
	}
	s.w = w
	return ip, path
}

// wholeRecord returns a whole call of malloc (shim.KindCall) from t0 to
// t: size, sp, the return address ret, the pointer and its chunk header.
func wholeRecord(t0, t, size, sp, ret, ptr, hdr uint64) shim.Record {
	ne := binary.NativeEndian
	b := make([]byte, shim.CallSize)
	for i, v := range []uint64{0x7f1000, ptr, hdr, ret, t0, size, 0, sp} {
		ne.PutUint64(b[8*i:], v)
	}
	return shim.Record{Kind: shim.KindCall, Func: shim.FuncMalloc, Flags: shim.FlagShort, Time: t, Body: b}
}

// BenchmarkInprocWrite: a malloc from the program's code, written whole
// by the shim, as one call sample, and its free, as drainRing writes
// churn's (to nowhere: the recorder's own work).
func BenchmarkInprocWrite(b *testing.B) {
	for _, packed := range []bool{false, true} {
		b.Run(fmt.Sprintf("packed=%v", packed), func(b *testing.B) { benchInprocWrite(b, packed) })
	}
}

func benchInprocWrite(b *testing.B, packed bool) {
	s := writeSession(b, true)
	if packed {
		if pk, err := s.packer(); pk == nil || err != nil {
			b.Fatalf("no packer: %v", err)
		}
	}
	ne := binary.NativeEndian
	c := wholeRecord(0, 0, 0, 0x7ffff000, 0x401000, 0, 0)
	fb := make([]byte, shim.FreeSize)
	f := shim.Record{Kind: shim.KindFree, Func: shim.FuncFree, Body: fb}
	g := owner{7, 8}
	b.ResetTimer()
	for i := range b.N {
		t := uint64(1000 + 3*i)
		c.Time, f.Time = t+1, t+2
		ne.PutUint64(c.Body[32:], t)
		ne.PutUint64(c.Body[40:], uint64(16+i%61*8))
		ne.PutUint64(c.Body[8:], uint64(0x5000+i%64*512))
		ne.PutUint64(fb[8:], uint64(0x5000+i%64*512))
		var err error
		if packed { // drainRing's way when packing
			_, err = s.packFast(g, &c)
			if err == nil {
				_, err = s.packFast(g, &f)
			}
		} else {
			_, err = s.writeWhole(g, &c)
			if err == nil {
				_, err = s.writeShim(g, &f, false)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestInprocWriteAllocs: turning shim records into samples allocates
// nothing per record once the buffers have grown.
func TestInprocWriteAllocs(t *testing.T) {
	ip := writeSession(t, false)
	s := ip.s
	const user, lib = 0x401000, 0x7f0000
	ip.maps[7] = &procMaps{code: []codeRange{{addrRange{0x400000, 0x402000}, false}, {addrRange{0x7f0000, 0x7f8000}, true}}}
	ne := binary.NativeEndian
	entryBody := func(ret uint64) []byte {
		b := make([]byte, shim.EntryFixed+8*16)
		ne.PutUint64(b, 0x7f1000) // ip
		ne.PutUint64(b[8:], 100)  // size
		ne.PutUint64(b[32:], 0x7ffff000)
		ne.PutUint64(b[shim.EntryFixed:], ret) // s0
		return b
	}
	retBody := make([]byte, shim.ReturnSize)
	ne.PutUint64(retBody[8:], 0x5000) // ptr
	freeBody := make([]byte, shim.FreeSize)
	user1 := shim.Record{Kind: shim.KindEntry, Func: shim.FuncMalloc, Time: 10, Body: entryBody(user)}
	deep := shim.Record{Kind: shim.KindEntry, Func: shim.FuncMalloc, Time: 11, Body: entryBody(lib)}
	ret := shim.Record{Kind: shim.KindReturn, Func: shim.FuncMalloc, Time: 12, Body: retBody}
	free := shim.Record{Kind: shim.KindFree, Func: shim.FuncFree, Time: 13, Body: freeBody}
	whole := wholeRecord(14, 15, 100, 0x7ffff000, user, 0x5000, 0x71)
	g := owner{7, 8}
	// A fault of thread 8 during the whole call: written as two samples.
	ip.faults = map[uint32][]uint64{8: {14}}
	ip.faultsSorted = map[uint32]bool{}
	run := func() {
		for _, r := range []*shim.Record{&user1, &deep, &ret, &free} {
			short := r.Kind == shim.KindEntry && ip.shortEntry(ip.maps[g.pid], r)
			if _, err := ip.writeShim(g, r, short); err != nil {
				t.Fatal(err)
			}
		}
		pairCall(&ip.scratch, &user1, &ret)
		if _, err := ip.writeCall(g, &ip.scratch, wholeCall); err != nil {
			t.Fatal(err)
		}
		if _, err := ip.writeWhole(g, &whole); err != nil {
			t.Fatal(err)
		}
		if _, err := ip.writeWhole(owner{7, 9}, &whole); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("%.1f allocations per 7 records", n)
	}
	// A return of free (no such event) from a corrupt ring is an error.
	bad := shim.Record{Kind: shim.KindReturn, Func: shim.FuncFree, Time: 14, Body: retBody}
	if _, err := ip.writeShim(g, &bad, false); !errors.Is(err, shim.ErrCorrupt) {
		t.Errorf("a return of free: %v, want ErrCorrupt", err)
	}
	if *s.perSpec[ip.short[shim.FuncMalloc]] == 0 || *s.perSpec[ip.entry[shim.FuncMalloc]] == 0 || *s.perSpec[ip.call[shim.FuncMalloc]] == 0 {
		t.Errorf("the user-code entry should be short, the library one full, the call whole")
	}
	// An entry the shim marked short (a call from the program's
	// executable) carries one word, and is written short without the
	// maps (none are known for pid 9); unmarked, one word is too short.
	one := shim.Record{Kind: shim.KindEntry, Func: shim.FuncMalloc, Flags: shim.FlagShort, Time: 15, Body: entryBody(user)[:shim.EntryFixed+8]}
	if !one.Valid(16) || !ip.shortEntry(nil, &one) {
		t.Fatalf("a one-word FlagShort entry: valid %v, short %v; want both", one.Valid(16), ip.shortEntry(nil, &one))
	}
	shorts := *s.perSpec[ip.short[shim.FuncMalloc]]
	n, err := ip.writeShim(owner{9, 9}, &one, true)
	if err != nil {
		t.Fatal(err)
	}
	// IDENTIFIER, TID, TIME (24), then RAW: its u32 size, the common
	// fields (8) and ip, size, sp, s0 (32), padded from 44 to 48.
	// The writer (uncompressed) builds every record in one buffer of
	// its own: this one's bytes, after the header, are still there.
	b := s.w.RecordBuffer(shimSampleMax)[8 : 8+n]
	if n != 72 || ne.Uint64(b[60:]) != user || *s.perSpec[ip.short[shim.FuncMalloc]] != shorts+1 {
		t.Errorf("FlagShort entry: %d bytes, s0 %#x, short samples %d→%d; want 72, %#x, one more",
			n, ne.Uint64(b[60:]), shorts, *s.perSpec[ip.short[shim.FuncMalloc]], user)
	}
	one.Flags = 0
	if one.Valid(16) {
		t.Errorf("an unmarked entry of one word is valid with 16 words per entry")
	}
}

// TestInprocWholeCall: a call the shim wrote whole is written as the
// same samples as the entry and return it stands for: one call sample
// when its thread took no fault during it (as drainRing pairs a short
// entry with its return), a short entry at the entry's time and a return
// when it did — byte for byte.
func TestInprocWholeCall(t *testing.T) {
	const t0, t1, size, sp, ret, ptr, hdr = 1000, 1500, 100, 0x7ffff000, 0x401234, 0x5010, 0x71
	ne := binary.NativeEndian
	eb := make([]byte, shim.EntryFixed+8)
	for i, v := range []uint64{0x7f1000, size, 0, 0, sp, 0, ret} {
		ne.PutUint64(eb[8*i:], v)
	}
	entry := shim.Record{Kind: shim.KindEntry, Func: shim.FuncMalloc, Flags: shim.FlagShort, Time: t0, Body: eb}
	rb := make([]byte, shim.ReturnSize)
	for i, v := range []uint64{0x7f1000, ptr, hdr, ret, 0} {
		ne.PutUint64(rb[8*i:], v)
	}
	retRec := shim.Record{Kind: shim.KindReturn, Func: shim.FuncMalloc, Time: t1, Body: rb}
	whole := wholeRecord(t0, t1, size, sp, ret, ptr, hdr)
	if !whole.Valid(16) || !entry.Valid(16) || !retRec.Valid(16) {
		t.Fatal("the records are not valid")
	}
	for _, fault := range []uint64{0, t0 + 1} {
		var apart, together bytes.Buffer
		a, _ := writeSessionTo(t, &apart)
		w, _ := writeSessionTo(t, &together)
		for _, s := range []*inproc{a, w} {
			s.faults = map[uint32][]uint64{8: {fault}}
			s.faultsSorted = map[uint32]bool{}
		}
		g := owner{7, 8}
		if fault == 0 {
			pairCall(&a.scratch, &entry, &retRec)
			if _, err := a.writeCall(g, &a.scratch, wholeCall); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, r := range []*shim.Record{&entry, &retRec} {
				if _, err := a.writeShim(g, r, r.Kind == shim.KindEntry); err != nil {
					t.Fatal(err)
				}
			}
		}
		n, err := w.writeWhole(g, &whole)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*inproc{a, w} {
			if err := s.s.w.Finish(&perfdata.WriterFeatures{}); err != nil {
				t.Fatal(err)
			}
		}
		// After each sample's 8-byte header: IDENTIFIER, TID, TIME (24),
		// then RAW: its u32 size, the common fields (8) and 40 bytes
		// (ip, size, ret_ip, ptr, hdr) for the call, 32 (ip, size, sp,
		// s0; ip, ret_ip, ptr, hdr) for each of the two, padded to 8.
		wantN := 24 + 56
		if fault != 0 {
			wantN = 2 * (24 + 48)
		}
		if !bytes.Equal(apart.Bytes(), together.Bytes()) || n != wantN {
			t.Errorf("fault at %d: the whole call wrote %d bytes (want %d), same as apart: %v", fault, n, wantN, bytes.Equal(apart.Bytes(), together.Bytes()))
		}
		calls, shorts, rets := *w.s.perSpec[w.call[shim.FuncMalloc]], *w.s.perSpec[w.short[shim.FuncMalloc]], *w.s.perSpec[w.ret[shim.FuncMalloc]]
		if fault == 0 && (calls != 1 || shorts+rets != 0) || fault != 0 && (calls != 0 || shorts != 1 || rets != 1) {
			t.Errorf("fault at %d: %d call, %d short entry, %d return samples", fault, calls, shorts, rets)
		}
	}
}

// TestSpareProc checks that wakers lend GOMAXPROCS one P each, in any
// order, and give it back as it was.
func TestSpareProc(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	first, second := spareProc(), spareProc()
	if got := runtime.GOMAXPROCS(0); got != base+2 {
		t.Errorf("two wakers: GOMAXPROCS %d, want %d", got, base+2)
	}
	first()
	if got := runtime.GOMAXPROCS(0); got != base+1 {
		t.Errorf("one waker left: GOMAXPROCS %d, want %d", got, base+1)
	}
	third := spareProc()
	second()
	third()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("no waker left: GOMAXPROCS %d, want %d", got, base)
	}
}

// testInproc returns an in-process source of a session of cfg, without a
// shim region (nothing here starts a program), with 16 top words.
func testInproc(cfg *Config) *inproc {
	s := &session{cfg: cfg, res: &Result{}}
	ip := &inproc{s: s, tr: inprocTraits, words: 16, maps: map[uint32]*procMaps{}}
	s.src = ip
	return ip
}

// TestInprocPackedRecords: entries (whole, short) and returns (one with a
// status) packed from their values read back as the samples written one
// by one, byte for byte.
func TestInprocPackedRecords(t *testing.T) {
	ne := binary.NativeEndian
	entry := func(fn shim.Func, t uint64, flags uint16, words int, seed uint64) shim.Record {
		b := make([]byte, shim.EntryFixed+8*words)
		for i := range len(b) / 8 {
			ne.PutUint64(b[8*i:], seed*0x9e3779b97f4a7c15+uint64(i)*0x1000)
		}
		return shim.Record{Kind: shim.KindEntry, Func: fn, Flags: flags, Time: t, Body: b}
	}
	ret := func(fn shim.Func, t, ptr, status uint64) shim.Record {
		b := make([]byte, shim.ReturnSize)
		for i, v := range []uint64{0x7f1000, ptr, ptr>>4 | 1, 0x401234, status} {
			ne.PutUint64(b[8*i:], v)
		}
		return shim.Record{Kind: shim.KindReturn, Func: fn, Time: t, Body: b}
	}
	type in struct {
		rec   shim.Record
		short bool
	}
	var recs []in
	for i := range uint64(50) {
		t := 1000 + 100*i
		recs = append(recs,
			in{entry(shim.FuncMalloc, t, 0, 16, i), false},
			in{ret(shim.FuncMalloc, t+10, 0x5000+i*48, 0), false},
			in{entry(shim.FuncMalloc, t+20, shim.FlagShort, 1, i+7), true},
			in{entry(shim.FuncPosixMemalign, t+30, 0, 16, i+9), false},
			in{ret(shim.FuncPosixMemalign, t+40, 0x9000+i*64, i%3*12), false})
		// Calls written whole and frees: drainRing packs them from
		// their values (packFast).
		w := wholeRecord(t+50, t+60, 16+i*8, 0x7ffff000, 0x401000+i%3*0x40, 0x5000+i%7*512, (16+i*8+23)&^15|1)
		c := wholeRecord(t+61, t+70, 3, 0x7ffff000, 0x401100, 0x6000+i*64, 0x31)
		c.Func = shim.FuncCalloc
		ne.PutUint64(c.Body[48:], 16+i) // its second argument
		f := shim.Record{Kind: shim.KindFree, Func: shim.FuncFree, Time: t + 80, Body: make([]byte, shim.FreeSize)}
		ne.PutUint64(f.Body, 0x7f2000)
		ne.PutUint64(f.Body[8:], 0x5000+i%7*512)
		recs = append(recs, in{w, false}, in{c, false}, in{f, false})
	}
	read := func(packed bool) ([]string, *perfdata.Stats) {
		ip, path := writeSessionTo(t, nil)
		if packed {
			if pk, err := ip.packer(); pk == nil || err != nil {
				t.Fatalf("no packer: %v", err)
			}
		}
		for _, r := range recs {
			var err error
			switch k := r.rec.Kind; {
			case packed && (k == shim.KindCall || k == shim.KindFree):
				_, err = ip.packFast(owner{7, 8}, &r.rec)
			case k == shim.KindCall:
				_, err = ip.writeWhole(owner{7, 8}, &r.rec)
			default:
				_, err = ip.writeShim(owner{7, 8}, &r.rec, r.short)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := ip.flushPacked(); err != nil {
			t.Fatal(err)
		}
		td, err := ip.tracingData()
		if err != nil {
			t.Fatal(err)
		}
		if err := ip.s.w.Finish(&perfdata.WriterFeatures{TracingData: td}); err != nil {
			t.Fatal(err)
		}
		rd, err := perfdata.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		var out []string
		for rd.Next() {
			if s, ok := rd.Record().(*perfdata.Sample); ok {
				out = append(out, fmt.Sprintf("%s %d/%d %d %x", s.Event.Name, s.Pid, s.Tid, s.Time, s.Raw))
			}
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		return out, rd.Stats()
	}
	one, _ := read(false)
	packed, st := read(true)
	if len(one) != len(recs) || len(packed) != len(one) {
		t.Fatalf("%d samples one by one, %d packed, of %d records", len(one), len(packed), len(recs))
	}
	for i := range one {
		if one[i] != packed[i] {
			t.Fatalf("sample %d:\none by one %s\npacked     %s", i, one[i], packed[i])
		}
	}
	if st.Packed == 0 || st.Unpacked != uint64(len(recs)) {
		t.Errorf("%d packed samples holding %d, want all %d records", st.Packed, st.Unpacked, len(recs))
	}
}
