package symbolize_test

import (
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/symtest"
)

// TestWalkerMatchesUnwind: a Prewalker and a Walker (the pipeline's
// parts, run here on one goroutine) give every sample of the fixtures the
// stack Session.Unwind gives it — the same StackID, so the same interned
// locations — through forks, execs, threads and uprobe trampolines. The
// serial Unwind is what the other tests check against perf script.
func TestWalkerMatchesUnwind(t *testing.T) {
	for _, name := range []string{"basic.plain", "basic.z", "forkexec.plain", "threads.plain", "forkexec.tp"} {
		t.Run(name, func(t *testing.T) {
			path := "../testdata/perf/" + name + ".data"
			_, refSess := symtest.Open(t, path, fixtureConfig)
			ref := refSession{refSess}
			r, sess := symtest.Open(t, path, fixtureConfig)
			pre, walkers := sess.NewPrewalker(1)
			var w symbolize.Walk
			n := 0
			for r.Next() {
				rec := r.Record()
				if pre.Changes(rec) {
					pre.Observe(rec)
				}
				smp, ok := rec.(*perfdata.Sample)
				if !ok {
					sess.Observe(rec)
					ref.observe(rec)
					continue
				}
				want := ref.unwind(smp)
				pre.Prepare(smp, &w, !r.Stable())
				walkers[0].Walk(&w)
				if got := sess.Intern(&w, false); got != want {
					t.Fatalf("sample at %#x: walker's stack %d %v, Unwind's %d %v", smp.Offset, got, sess.Stack(got), want, ref.s.Stack(want))
				}
				n++
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatal("no samples")
			}
			if got, want := sess.Stats(), ref.s.Stats(); got.Samples != want.Samples || got.Complete != want.Complete || got.Frames != want.Frames {
				t.Errorf("stats: walker %+v, Unwind %+v", got, want)
			}
		})
	}
}

// refSession is the serial Unwind the walker is checked against.
type refSession struct{ s *symbolize.Session }

func (r refSession) observe(rec perfdata.Record) { r.s.Observe(rec) }
func (r refSession) unwind(smp *perfdata.Sample) symbolize.StackID {
	id, _ := r.s.Unwind(smp, false)
	return id
}

// TestWalkSteadyStateAllocs: preparing, walking and interning known
// samples again allocates nothing, however many there are (the walk's
// buffers, the row cache and the replica maps are reused).
func TestWalkSteadyStateAllocs(t *testing.T) {
	sess, smps := loadSamples(t, "../testdata/perf/basic.plain.data", fixtureConfig)
	pre, walkers := sess.NewPrewalker(1)
	replayPath(t, pre, "../testdata/perf/basic.plain.data")
	var w symbolize.Walk
	cycle := func() {
		for _, s := range smps {
			pre.Prepare(s, &w, true)
			walkers[0].Walk(&w)
			sess.Intern(&w, false)
		}
	}
	cycle()
	if n := testing.AllocsPerRun(3, cycle); n != 0 {
		t.Errorf("walking %d known samples again: %v allocations, want 0", len(smps), n)
	}
}

// BenchmarkWalk measures a walker's part of a sample (the part that runs
// in parallel) in steady state; BenchmarkSessionUnwind is the whole serial
// unwind.
func BenchmarkWalk(b *testing.B) {
	path, cfg := unwindInput()
	sess, smps := loadSamples(b, path, cfg)
	pre, walkers := sess.NewPrewalker(1)
	replayPath(b, pre, path)
	ws := make([]symbolize.Walk, len(smps))
	for i, s := range smps {
		pre.Prepare(s, &ws[i], true)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		walkers[0].Walk(&ws[i])
		if i++; i == len(ws) {
			i = 0
		}
	}
}

// replayPath gives a Prewalker the maps of a recording (at its end).
func replayPath(tb testing.TB, pre *symbolize.Prewalker, path string) {
	r, err := perfdata.Open(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		if rec := r.Record(); pre.Changes(rec) {
			pre.Observe(rec)
		}
	}
}
