package recorder

import (
	"encoding/binary"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// Packing. By default the in-process method writes its calls as packed
// samples (schema.PackedEvent, perfdata.Packer): each thread's calls of a
// round in samples of a few hundred calls, delta-encoded, a few bytes a
// call instead of about eighty. perf counts and prints the packed samples;
// perfdata's Reader expands them into the samples they stand for, so
// analysis reads the calls as if written one by one. A call that carries a
// stack stays a sample of its own, beside its entry (packed): the stack
// needs the sample's REGS_USER and STACK_USER.

// packing is the in-process method's packer: the packed event, and the
// buffer calls are built in while packing (the Packer writes the writer's
// buffer itself).
type packing struct {
	spec *spec
	pk   *perfdata.Packer
	buf  []byte
	vals []uint64 // a call's field values (packValues)
	// delta is the stack-delta event, deltas its writer (nil when calls
	// are written one by one or carry no stacks).
	delta  *spec
	deltas *perfdata.StackDeltas
}

// packEvent adds the packed event to l (nothing when calls are written
// one by one).
func (ip *inproc) packEvent(l *specList, attr perfdata.Attr) {
	if !ip.perCall {
		ip.packing.spec = compactEvent(l, attr, schema.PackedEvent, perfdata.PackedFormat)
	}
}

// deltaEvent adds the stack-delta event to l (nothing when calls are
// written one by one).
func (ip *inproc) deltaEvent(l *specList, attr perfdata.Attr) {
	if !ip.perCall {
		ip.packing.delta = compactEvent(l, attr, schema.StackDeltaEvent, perfdata.StackDeltaFormat)
	}
}

// compactEvent adds to l one of the events record writes itself for the
// compact stream, named event, its format made by format from its id.
func compactEvent(l *specList, attr perfdata.Attr, event string, format func(id uint64) []byte) *spec {
	sp := &spec{name: schema.System + ":" + event, kind: kindRange, synthetic: true, attr: attr, format: format(attr.Config)}
	l.add(sp)
	return sp
}

// stackBuffer returns the empty buffer a stack sample is built in
// (writeStack takes it back).
func (ip *inproc) stackBuffer() []byte {
	p := &ip.packing
	if p.delta == nil {
		return ip.sbuf2[:0]
	}
	if p.deltas == nil {
		p.deltas = perfdata.NewStackDeltas(p.delta.synthID, uint16(p.delta.attr.Config))
	}
	return p.deltas.Buffer()
}

// writeStack writes a stack sample's body b, built in stackBuffer's
// buffer, whose stack copy is b[lo:hi] and ends at address top: as a
// stack-delta sample (which keeps b as the thread's previous one), or as
// it is when calls are written one by one.
func (ip *inproc) writeStack(b []byte, lo, hi int, top uint64) error {
	p := &ip.packing
	if p.delta == nil {
		ip.sbuf2 = b[:0]
		return ip.s.w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, b)
	}
	err := p.deltas.AddOwn(ip.s.w, perfdata.MiscUser, b, lo, hi, top)
	*p.delta.count = p.deltas.Written()
	return err
}

// packer returns the Packer, made at the first drain (the events' sample
// ids are known then), or nil when calls are written one by one. It packs
// the events of the calls, each given to it at its first sample
// (packable): a program calls a few of the entry points' hundreds of
// events, and their formats are parsed while it waits for room.
func (ip *inproc) packer() (*perfdata.Packer, error) {
	p := &ip.packing
	if p.spec == nil || p.pk != nil {
		return p.pk, nil
	}
	p.pk = perfdata.NewPacker(p.spec.synthID, uint16(p.spec.attr.Config))
	for _, evs := range [][shim.NumFuncs]*spec{ip.entry, ip.short, ip.ret, ip.call} {
		for _, sp := range evs {
			if sp != nil {
				sp.packing = true
			}
		}
	}
	return p.pk, nil
}

// packable gives sp's format to the Packer at sp's first sample, when its
// samples are packed.
func (ip *inproc) packable(sp *spec) error {
	if !sp.packing || ip.packing.pk == nil {
		return nil
	}
	return ip.addPackable(sp)
}

// addPackable gives sp's format to the Packer (packable).
func (ip *inproc) addPackable(sp *spec) error {
	sp.packing = false
	f, err := perfdata.ParseTraceFormat(schema.System, sp.format)
	if err != nil {
		return err
	}
	ip.packing.pk.AddEvent(sp.synthID, &sp.attr, f)
	return nil
}

// recordBuffer starts a sample: in the writer's own buffer
// (perfdata.Writer.RecordBuffer) when calls are written one by one, its
// header's 8 bytes filled in by CommitRecord; in the packing buffer when
// they are packed (commitCall).
func (ip *inproc) recordBuffer() []byte {
	if ip.packing.pk != nil {
		return append(ip.packing.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	}
	return append(ip.s.w.RecordBuffer(shimSampleMax), 0, 0, 0, 0, 0, 0, 0, 0)
}

// commitCall writes a call's sample b, built in recordBuffer: into its
// thread's packed sample, or as it is.
func (ip *inproc) commitCall(b []byte) error {
	if pk := ip.packing.pk; pk != nil {
		ip.packing.buf = b[:0]
		return pk.Add(ip.s.w, perfdata.MiscUser, b[8:])
	}
	return ip.s.w.CommitRecord(uint32(perfdata.RecordSample), perfdata.MiscUser, b)
}

// flushPacked writes every thread's packed sample: before each
// FINISHED_ROUND, whose promise covers them.
func (ip *inproc) flushPacked() error {
	p := &ip.packing
	if p.pk == nil {
		return nil
	}
	err := p.pk.Flush(ip.s.w)
	*p.spec.count = p.pk.Written()
	return err
}

// packValues packs a sample of sp stamped t whose raw payload's fields
// after the common ones are vals, each 8 bytes but a status's 4 (the
// calls' formats: entryFields, returnFields), without building it; it
// returns the bytes the sample would have had one by one (writeCall's
// count). ok is false when calls are written one by one.
func (ip *inproc) packValues(sp *spec, g owner, t uint64, vals []uint64, status bool) (n int, ok bool, err error) {
	p := &ip.packing
	if p.pk == nil {
		return 0, false, nil
	}
	if err := ip.packable(sp); err != nil {
		return 0, true, err
	}
	fields := 8 * len(vals)
	if status {
		fields -= 4
	}
	*sp.count++
	return unpackedBytes(fields), true, p.pk.AddFields(ip.s.w, perfdata.MiscUser, sp.synthID, g.pid, g.tid, t, vals)
}

// unpackedBytes is the size a packed sample whose fields after the common
// ones take fields bytes would have had written one by one (writeCall's
// count): IDENTIFIER, TID, TIME, the raw size, then the payload (common
// fields, the fields) padded as finishRaw pads it.
func unpackedBytes(fields int) int { return sampleHeadBytes + 4 + (4+8+fields+7)&^7 - 4 }

// packFast packs a call the shim wrote whole (shim.KindCall) during
// which its thread took no fault, or a free (shim.KindFree): the fn__call
// sample writeCall would pack, or the free writeShim would, the values
// read straight from the record into an array on the stack.
func (ip *inproc) packFast(g owner, rec *shim.Record) (int, error) {
	var a [packCallValues]uint64
	var sp *spec
	n, t0 := 1, rec.Time
	if rec.Kind == shim.KindFree {
		if sp = ip.entry[shim.FuncFree]; sp == nil {
			return ip.writeShim(g, rec, false)
		}
		a[0] = rec.Ptr()
	} else {
		fn := rec.Func
		if sp = ip.call[fn]; sp == nil || fn.Status() {
			return ip.writeWhole(g, rec)
		}
		t0 = rec.EntryTime()
		a[0] = rec.IP()
		n += len(fn.Args())
		for i := 1; i < n; i++ {
			if i <= 2 { // the record holds two arguments (writeWhole)
				a[i] = rec.CallArg(i - 1)
			}
		}
		a[n], a[n+1], a[n+2] = rec.RetIP(), rec.Ptr(), rec.Hdr()
		n += 3
	}
	ip.seen(t0, rec.Time)
	if sp.packing {
		if err := ip.addPackable(sp); err != nil {
			return 0, err
		}
	}
	*sp.count++
	return unpackedBytes(8 * n), ip.packing.pk.AddFields(ip.s.w, perfdata.MiscUser, sp.synthID, g.pid, g.tid, rec.Time, a[:n])
}

// packCallValues bounds a whole call's values: __probe_ip, three
// arguments, the return address, the pointer and the chunk header.
const packCallValues = 7

// packRecord packs an entry or a return without a stack (writeShim): the
// values of the sample writeShim would build, in its order. ok is false
// when calls are written one by one or sp's samples are not packed with
// as many fields.
func (ip *inproc) packRecord(sp *spec, g owner, rec *shim.Record, short bool) (n int, ok bool, err error) {
	pk := ip.packing.pk
	if pk == nil || rec.Kind != shim.KindEntry && rec.Kind != shim.KindReturn {
		return 0, false, nil
	}
	v := append(ip.packing.vals[:0], rec.IP())
	status := false
	if rec.Kind == shim.KindReturn {
		v = append(v, rec.RetIP(), rec.Ptr(), rec.Hdr())
		if status = rec.Func.Status(); status {
			v = append(v, rec.Status())
		}
	} else {
		w, _ := rec.Words(ip.words)
		for i := range rec.Func.Args() {
			v = append(v, rec.Arg(i))
		}
		switch {
		case short:
			v = append(v, rec.SP(), binary.NativeEndian.Uint64(w))
		case rec.Func != shim.FuncFree:
			v = append(v, rec.SP(), rec.BP())
			for k := 0; k+8 <= len(w); k += 8 {
				v = append(v, binary.NativeEndian.Uint64(w[k:]))
			}
		}
	}
	ip.packing.vals = v
	if pk.Fields(sp.synthID) != len(v) {
		return 0, false, nil
	}
	return ip.packValues(sp, g, rec.Time, v, status)
}
