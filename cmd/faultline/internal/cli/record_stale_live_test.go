package cli

import (
	"os"
	"strconv"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/libc/libctest"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// TestRemoveStaleLiveWhileOthersRemove: a dead run's probes are all
// removed by the next run even while another process removes probes
// listed before them, which makes a read of uprobe_events skip lines.
// Each trial adds another run's group (fltest_PID) and then a stale one
// (this process's own group, which RemoveStale takes for a dead run whose
// pid was reused), both with record's probes of the system's libc, then
// removes the first group in a goroutine while RemoveStale runs. Before
// RemoveStale removed groups whole and read again, trials left probes of
// the stale group behind.
func TestRemoveStaleLiveWhileOthersRemove(t *testing.T) {
	requireLiveRecord(t)
	lib := libctest.SystemLibc(t)
	tfs, _, err := rec.OpenTracefs(realSystem{})
	if err != nil {
		t.Fatal(err)
	}
	funcs, err := rec.CanonicalProbes([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	defs := func(group string) []rec.UprobeDef {
		d, _, err := rec.UprobeDefinitions(realSystem{}, lib, group, funcs)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	other, stale := defs("fltest_"+strconv.Itoa(os.Getpid())), defs(ourGroup())
	// What a failed trial leaves, the next reads remove.
	t.Cleanup(func() {
		for i := 0; i < 5 && len(rec.ParseProbeGroups(uprobeEvents(t))[ourGroup()]) > 0; i++ {
			tfs.RemoveStale()
		}
	})
	const trials = 20
	for i := 0; i < trials; i++ {
		first, err := tfs.AddUprobes(other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tfs.AddUprobes(stale); err != nil {
			first.Close()
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- first.Close() }()
		_, err = tfs.RemoveStale()
		if cerr := <-done; cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if left, ok := groupEvents(t, ourGroup(), func(evs []string) bool { return len(evs) == 0 }); !ok {
			t.Errorf("trial %d: RemoveStale left %d of the stale group's %d probes: %v", i, len(left), len(stale), left)
			break
		}
	}
	checkNoProbesLeft(t, "after the trials")
}
