package analyze

import (
	"context"
	"encoding/binary"
	"runtime"
	"runtime/pprof"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
)

// A file-mode recording runs through symbolize.Pipeline:
// records are read and put in time order on one goroutine, the stacks the
// run will unwind are walked on the others (this one included), and this
// goroutine interns them and feeds everything to the tracker in record
// order, as the serial loop does. So the profile is the same for any
// number of goroutines.

// workers is how many walkers a run uses.
func (o *Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// pipeline runs the records through the pipeline. ok is false when the
// recording is not one it takes (pipe mode, or events whose roles are
// found only from their samples): the caller then runs serially.
func (ru *run) pipeline() (ok bool, err error) {
	n := ru.opts.workers()
	if n <= 1 || ru.r.Meta().PipeMode || len(ru.r.Events()) == 0 {
		return false, nil
	}
	if err := ru.setup(); err != nil {
		return false, nil // the serial run reports it where it always has
	}
	walkEv := make([]bool, len(ru.infos))
	for i, in := range ru.infos {
		if in.guess {
			return false, nil
		}
		walkEv[i] = walks(in)
	}
	// The run proper starts at the first sample, as in the serial run:
	// records before it (an exec, say) reach no tracker.
	ru.tr, ru.b = nil, nil
	ru.nBuildIDs = len(ru.r.Meta().BuildIDs) // NewPipeline adds them
	p := ru.sess.NewPipeline(ru.r, n, func(smp *perfdata.Sample) bool {
		ev := smp.Event
		return ev != nil && ev.Index < len(walkEv) && walkEv[ev.Index]
	})
	defer p.Close()
	pprof.Do(context.Background(), pprof.Labels("stage", "track"), func(context.Context) {
		var n uint64
		for p.Next() {
			rec := p.Record()
			if n++; ru.opts.Progress != nil && n&0xfff == 0 {
				ru.opts.Progress(rec.Common().Offset)
			}
			ru.walk = p.Walk()
			if err = ru.handle(rec); err != nil {
				return
			}
		}
	})
	ru.walk = nil
	return true, err
}

// walks reports whether the run will unwind the stacks of in's samples
// (sample and sysSample call stackOf exactly for these).
func walks(in *eventInfo) bool {
	switch in.role {
	case RoleStack:
		return true
	case RoleAllocEntry, RoleFault:
		return hasStacks(in.ev)
	case RoleSysEnter:
		return in.sys == sysMmap && hasStacks(in.ev)
	}
	return false
}

// unwind returns smp's stack and, for an entry probe, the return address
// on top of its stack (0 when unknown or the [uprobes] trampoline: the
// function was tail-called from a probed one, as realloc(NULL, n) jumps
// into malloc).
func (ru *run) unwind(smp *perfdata.Sample) (attribute.StackID, uint64) {
	var ret uint64
	if len(smp.Stack) >= 8 {
		ret = binary.LittleEndian.Uint64(smp.Stack)
		if m := ru.sess.Region(smp.Pid, ret); m != nil && m.File == "[uprobes]" {
			ret = 0
		}
	}
	return ru.stackOf(smp), ret
}

// stackOf returns smp's interned stack: walked by the pipeline, or
// unwound now.
func (ru *run) stackOf(smp *perfdata.Sample) attribute.StackID {
	if w := ru.walk; w != nil {
		ru.walk = nil
		return attribute.StackID(ru.sess.Intern(w, false))
	}
	id, _ := ru.sess.Unwind(smp, false)
	return attribute.StackID(id)
}
