package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/faultline/faultline/perfdata/schema"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize/binfile"
)

// WriteText prints the summary for a terminal: totals first, then where
// the faults went, then the top sites.
func (s *Summary) WriteText(w io.Writer) {
	t := &s.Tracker
	pct := func(a, b uint64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
	}
	if s.Selection != nil {
		s.Selection.writeText(w)
	}
	fmt.Fprintf(w, "Faults:       %d, attributed to an allocation %d (%s)", t.Faults, t.Attributed, pct(t.Attributed, t.Faults))
	if t.InFlight > 0 {
		fmt.Fprintf(w, ", %d of them inside the allocator", t.InFlight)
		if t.InAllocator > 0 {
			fmt.Fprintf(w, " (%d on its own heap or arena memory, charged to the call they served; label inside=allocator)", t.InAllocator)
		}
	}
	if t.Approx > 0 {
		fmt.Fprintf(w, ", %d by time window", t.Approx)
	}
	if m := s.Resident.MappedFaults; m > 0 {
		fmt.Fprintf(w, "; %d more (%s) to memory the program mapped itself (via=mmap)", m, pct(m, t.Faults))
	}
	fmt.Fprintln(w)
	if len(s.Classes) > 0 {
		keys := slices.SortedFunc(maps.Keys(s.Classes), func(a, b string) int {
			return cmp.Or(cmp.Compare(s.Classes[b], s.Classes[a]), cmp.Compare(a, b)) // most faults first
		})
		var parts []string
		for i, k := range keys {
			if i == 8 {
				parts = append(parts, fmt.Sprintf("%d more classes", len(keys)-i))
				break
			}
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Classes[k]))
		}
		fmt.Fprintf(w, "  not in any allocation: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "Allocations:  %d (entries %d, returns %d", t.Allocations, t.Entries, t.Returns)
	if t.UnpairedEntries+t.UnpairedReturns > 0 {
		fmt.Fprintf(w, "; unpaired: %d entries, %d returns", t.UnpairedEntries, t.UnpairedReturns)
	}
	if t.RetIPMismatches > 0 {
		fmt.Fprintf(w, ", %d return-address mismatches", t.RetIPMismatches)
	}
	if t.Frees > 0 {
		fmt.Fprintf(w, "; frees %d", t.Frees)
	}
	fmt.Fprintln(w, ")")
	if t.Untracked > 0 {
		fmt.Fprintf(w, "Limits:       %d allocations not tracked (--max-live reached): counted, but their faults are unattributed\n", t.Untracked)
	}
	if t.PendingOverflows > 0 {
		fmt.Fprintf(w, "Limits:       %d times a thread held %d faults for allocator calls whose return never came; the calls were dropped as unpaired\n", t.PendingOverflows, 1<<16)
	}
	s.writeLost(w, pct)
	if s.LostBuffer > 0 {
		fmt.Fprintf(w, "  LOST records: %d events dropped from full ring buffers (the same losses, counted per buffer)\n", s.LostBuffer)
	}
	if lw := &s.LostWindows; lw.Windows > 0 {
		fmt.Fprintf(w, "Confidence:   %d faults (%s) fell in windows where allocation events were lost (%d windows, %.1f ms in all, +10 ms after each); their attribution may be wrong\n",
			lw.Faults, pct(lw.Faults, t.Faults), lw.Windows, float64(lw.Span)/1e6)
	}
	if lw := &s.LostWindows; lw.Unplaced > 0 {
		fmt.Fprintf(w, "Confidence:   %d lost samples carry no time, so the faults they affect cannot be told\n", lw.Unplaced)
	}
	u := &s.Unwind
	fmt.Fprintf(w, "Stacks:       %d unwound, %s reached the root frame", u.Samples, pct(u.Complete, u.Samples))
	if u.Samples > u.Complete {
		var keys []string
		for k, v := range u.ByStop {
			if k != "root" && k != "zero-pc" && v > 0 {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, u.ByStop[k]))
		}
		fmt.Fprintf(w, " (stopped early: %s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if s.NoFaultStacks {
		how := "record the fault event with --call-graph dwarf"
		if s.FromRecord {
			how = "record with faultline record --fault-stacks"
		}
		fmt.Fprintf(w, "By touch:     the recording has no fault stacks, so no fault names the code that touched the memory; %s\n", how)
	}
	s.writeMismatch(w)
	s.writeStackNeed(w, pct)
	s.writeAllocStacks(w)
	for _, f := range s.Fallbacks {
		fmt.Fprintf(w, "Approximate:  %s\n", f)
	}
	switch {
	case s.DecodeError != "":
		fmt.Fprintln(w, "Truncated:    decoding stopped at a corrupt record (see the warning); everything before it is counted")
	case s.Truncated:
		fmt.Fprintln(w, "Truncated:    the recording was cut short; everything before the cut is counted")
	}
	if len(s.TopSites) > 0 {
		fmt.Fprintln(w, "\nTop allocation sites by faults:")
		fmt.Fprintf(w, "%8s %7s %10s  %-14s %s\n", "faults", "allocs", "bytes", "flags", "site")
		for _, t := range s.TopSites {
			flags := strings.Join(t.Flags, ",")
			if flags == "" {
				flags = "-"
			}
			fmt.Fprintf(w, "%8d %7d %10s  %-14s %s\n", t.Faults, t.Allocs, report.FormatBytes(t.Size), flags, t.Name)
		}
	}
	s.writeResident(w)
}

// writeResident states the resident memory's peak, when, who held it, how
// much of the process's own peak it explains, and the churn.
func (s *Summary) writeResident(w io.Writer) {
	rs := &s.Resident
	if rs.PeakBytes == 0 {
		return
	}
	fmt.Fprintf(w, "\nResident:     peak %s at %.3f s, %s at the end", mib(rs.PeakBytes), float64(rs.PeakTime)/1e9, mib(rs.EndBytes))
	own, whose := rs.PeakBytes, "the tracked peak"
	if len(rs.Processes) > 0 && rs.OwnPeakBytes > 0 {
		// Every process's pages against one process's RSS would say
		// nothing: the program's own process against its own.
		own, whose = rs.OwnPeakBytes, fmt.Sprintf("its own tracked peak, %s,", mib(rs.OwnPeakBytes))
	}
	switch {
	case rs.ProcessAnon > 0 && own > rs.ProcessAnon:
		// RssAnon is sampled: its peak can fall between two reads.
		fmt.Fprintf(w, "; the process's own peak anonymous RSS as read %s (%s is above it: RssAnon is read now and then and can miss its peak; peak RSS with file pages %s)",
			mib(rs.ProcessAnon), whose, mib(rs.ProcessHWM))
	case rs.ProcessAnon > 0:
		fmt.Fprintf(w, "; the process's own peak anonymous RSS %s (%s is %.1f%% of it; peak RSS with file pages %s)",
			mib(rs.ProcessAnon), whose, 100*float64(own)/float64(rs.ProcessAnon), mib(rs.ProcessHWM))
	case rs.ProcessHWM > 0:
		fmt.Fprintf(w, "; the process's own peak RSS %s, file pages included", mib(rs.ProcessHWM))
	}
	fmt.Fprintln(w)
	s.writeSnapshots(w)
	s.writeProcesses(w)
	if rs.MapCalls > 0 {
		fmt.Fprintf(w, "  memory-map calls %d; %d faults in the program's own mappings (via=mmap); %d re-faults on released pages (refault=yes)\n",
			rs.MapCalls, rs.MappedFaults, rs.Refaults)
	} else if rs.MapEvents {
		fmt.Fprintln(w, "  memory-map calls: none recorded (the program made none through the C library's wrappers)")
	} else {
		fmt.Fprintln(w, "  no memory-map calls recorded (syscalls:sys_enter_mmap, …): releases are not seen, so the resident memory only grows until exit")
	}
	if rs.KernelMaps > 0 {
		fmt.Fprintf(w, "  %d faults (unattributed) in %d anonymous mappings no recorded call made, only the kernel's mmap records show (the C library's own map calls, raw system calls): their releases are not seen either\n",
			rs.KernelMapFaults, rs.KernelMaps)
	}
	if len(rs.AtPeak) > 0 {
		fmt.Fprintln(w, "  held at the peak:")
		for _, v := range rs.AtPeak {
			fmt.Fprintf(w, "  %10s  %s\n", report.FormatBytes(v.Value), v.Name)
		}
	}
	if len(rs.Churn) > 0 {
		fmt.Fprintln(w, "  churn (re-faults):")
		for _, v := range rs.Churn {
			fmt.Fprintf(w, "  %10d  %s\n", v.Value, v.Name)
		}
	}
}

// writeSnapshots says how far the fault-built figures were from what the
// page tables held.
func (s *Summary) writeSnapshots(w io.Writer) {
	ss := s.Resident.Snapshots
	if ss == nil {
		return
	}
	fmt.Fprintf(w, "  page tables: %d snapshots (%d at exits); at the largest the faults had built %s of the %s held",
		ss.Snapshots, ss.Exits, mib(ss.Tracked), mib(ss.Held))
	if ss.MaxOffHeld > 0 {
		fmt.Fprintf(w, "; at most %s off (%.1f%% of %s)", mib(ss.MaxOff), 100*float64(ss.MaxOff)/float64(ss.MaxOffHeld), mib(ss.MaxOffHeld))
	}
	fmt.Fprintf(w, "; the snapshots added %s no fault showed and removed %s\n", mib(ss.Added), mib(ss.Removed))
}

// writeProcesses gives each process's tracked peak against its own peak
// RSS, for recordings of several.
func (s *Summary) writeProcesses(w io.Writer) {
	ps := s.Resident.Processes
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "  %d processes; largest tracked peaks against each one's own peak RSS (file pages included):\n", len(ps))
	for _, p := range ps[:min(len(ps), 5)] {
		fmt.Fprintf(w, "  %10s  pid %d %s", report.FormatBytes(p.PeakBytes), p.Pid, p.Comm)
		if p.HWM > 0 {
			fmt.Fprintf(w, " (%.1f%% of %s)", 100*float64(p.PeakBytes)/float64(p.HWM), report.FormatBytes(p.HWM))
		}
		fmt.Fprintln(w)
	}
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// writeLost says which events lost samples. A stack instance's losses
// (RoleStack) lose no call: those calls get inferred callers, so they are
// told apart from the range events' losses, which leave attribution
// incomplete. The advice names the recorder's flags.
func (s *Summary) writeLost(w io.Writer, pct func(a, b uint64) string) {
	var lost []string
	var stackLost, stackAll uint64
	inproc := true // every lossy event is the in-process shim's
	for _, e := range s.Events {
		if e.Role == RoleStack.String() {
			stackLost += e.Lost
			stackAll += e.Lost + e.Samples
			continue
		}
		if e.Lost > 0 {
			lost = append(lost, fmt.Sprintf("%s %d of %d (%s)", e.Name, e.Lost, e.Lost+e.Samples, pct(e.Lost, e.Lost+e.Samples)))
			inproc = inproc && strings.HasPrefix(e.Name, schema.System+":")
		}
	}
	switch {
	case len(lost) > 0 && inproc && s.FromRecord:
		// The shim's own losses: no kernel ring overflowed; calls the
		// shim could not record (record's summary said why).
		fmt.Fprintf(w, "Lost samples: %s\n", strings.Join(lost, "; "))
		fmt.Fprintln(w, "  attribution is incomplete where the in-process shim could not record calls; record's own summary named why (the program ran on past --shim-wait because record was stopped, its output stalled or it was starved of CPU; or a signal handler interrupted the shim); a larger -m does not help")
	case len(lost) > 0:
		fmt.Fprintf(w, "Lost samples: %s\n", strings.Join(lost, "; "))
		if s.FromRecord {
			fmt.Fprintln(w, "  attribution is incomplete where allocation events were lost; record with a larger -m (the call and fault rings)")
		} else {
			fmt.Fprintln(w, "  attribution is incomplete where allocation events were lost; record with a larger -m or a smaller --call-graph dwarf size")
		}
	case stackLost > 0:
		fmt.Fprintln(w, "Lost samples: no call or fault")
	default:
		fmt.Fprintln(w, "Lost samples: none")
	}
	if stackLost > 0 {
		fmt.Fprintf(w, "Stack samples lost: %d of %d (%s; every call kept, those calls get inferred callers); ", stackLost, stackAll, pct(stackLost, stackAll))
		if s.FromRecord {
			fmt.Fprintln(w, "raise --stack-mmap-pages or --stack-every")
		} else {
			fmt.Fprintln(w, "give the stack events a larger buffer or a smaller --call-graph dwarf size")
		}
	}
}

// lossComments carries the recording's per-event losses into the profile
// as one comment (report.LossComment) for diff: every event that took part
// in the analysis and has samples or losses is named, lost or not (a
// recording of faultline record probes functions a program may never call).
func lossComments(events []EventSummary) []string {
	var es []report.EventLoss
	for _, e := range events {
		if e.Role == RoleNone.String() || e.Samples == 0 && e.Lost == 0 {
			continue
		}
		es = append(es, report.EventLoss{Name: e.Name, Role: e.Role, Samples: e.Samples, Lost: e.Lost})
	}
	if len(es) == 0 {
		return nil
	}
	return []string{report.LossComment(es)}
}

// writeAllocStacks says where allocation stacks came from in a recording
// whose entries lack stacks for some calls.
func (s *Summary) writeAllocStacks(w io.Writer) {
	if s.AllocStacks == nil {
		return
	}
	var all, faults int64
	for _, t := range s.AllocStacks {
		all += t.Allocs
		faults += t.Faults
	}
	share := func(kind string) string {
		t := s.AllocStacks[kind]
		a, f := "-", "-"
		if all > 0 {
			a = fmt.Sprintf("%.1f%%", 100*float64(t.Allocs)/float64(all))
		}
		if faults > 0 {
			f = fmt.Sprintf("%.1f%%", 100*float64(t.Faults)/float64(faults))
		}
		return fmt.Sprintf("%d allocations (%s) with %d faults (%s)", t.Allocs, a, t.Faults, f)
	}
	fmt.Fprintf(w, "Alloc stacks: sampled %s; inferred %s; leaf only %s\n",
		share(report.StackSampled), share(report.StackInferred), share(report.StackLeaf))
	if t := s.TopStacks; t != nil && t.User+t.Library+t.Short > 0 {
		fmt.Fprintln(w, "  inferred: exact leaf (the first caller in the user's code, unwound from the entry's top stack words), callers split over the stacks sampled at that leaf in proportion (label stack=inferred)")
		n := t.User + t.Library + t.Short
		fmt.Fprintf(w, "  leaves from %d stack words: %d of %d calls without a stack reached the user's code", t.Words, t.User, n)
		if t.Library > 0 {
			fmt.Fprintf(w, ", %d ended in the system's code (a system library or a standard-library template: leaf at the last frame reached)", t.Library)
		}
		if t.Short > 0 {
			fmt.Fprintf(w, ", %d ended inside the allocator's wrappers (leaf: where the allocator returned to, shared by the wrapper's callers)", t.Short)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "  inferred: exact leaf (where the allocator returned to), callers split over the stacks sampled at that leaf in proportion (label stack=inferred)")
	}
	if j := s.StackJoin; j != nil && (j.Unmatched > 0) {
		fmt.Fprintf(w, "  %d stack samples found no call (their range sample was lost)\n", j.Unmatched)
	}
}

// writeMismatch says how many frames lie in binaries whose file here is
// not the one that ran, which those are, and what to do.
func (s *Summary) writeMismatch(w io.Writer) {
	var refused, used []string
	for _, e := range s.Warnings {
		var me *binfile.MismatchError
		if errors.As(e, &me) {
			if me.Used {
				used = append(used, me.Path)
			} else {
				refused = append(refused, me.Path)
			}
		}
	}
	if len(refused) > 0 {
		what := "a binary whose file here is not the one that ran"
		if len(refused) > 1 {
			what = fmt.Sprintf("%d binaries whose files here are not the ones that ran", len(refused))
		}
		fmt.Fprintf(w, "Binaries:     %d frames left unnamed in %s (%s); %s\n",
			s.Unwind.Refused, what, strings.Join(refused, ", "), (&binfile.MismatchError{}).Fix())
	}
	if len(used) > 0 {
		fmt.Fprintf(w, "Binaries:     named with files that are not the ones that ran (--allow-mismatch): %s; frames may be misnamed\n", strings.Join(used, ", "))
	}
}

// stackEndShare is the share of walks stopped at the end of the copied
// stack past which the summary says what copy size would have reached.
const stackEndShare = 0.02

// maxStackCopy is the largest user stack copy the kernel makes (a
// multiple of 8 below 64 KiB: perf_event_attr.sample_stack_user).
const maxStackCopy = 65528

// writeStackNeed names the stack copy size that would have let the walks
// that stopped at the end of their copy reach the root, from how deep they
// were (symbolize.StackNeed), when more than stackEndShare of walks did.
func (s *Summary) writeStackNeed(w io.Writer, pct func(a, b uint64) string) {
	u := &s.Unwind
	n := &u.Need
	if u.Samples == 0 || float64(n.Walks) <= stackEndShare*float64(u.Samples) {
		return
	}
	flag := func(size uint64) string {
		if s.FromRecord {
			return fmt.Sprintf("--stack-size %d", size)
		}
		return fmt.Sprintf("perf record --call-graph dwarf,%d", size)
	}
	fmt.Fprintf(w, "  %d stacks (%s) stopped at the end of the copied stack: ", n.Walks, pct(n.Walks, u.Samples))
	known := n.Walks - n.Unknown
	switch size, _, ok := n.Reaching(1); {
	case known == 0:
		fmt.Fprintf(w, "how deep they go is unknown (no stack mapping above them); record with a larger copy, e.g. %s\n", flag(maxStackCopy))
		return
	case ok && (size <= maxStackCopy || n.Max <= maxStackCopy):
		fmt.Fprintf(w, "%s would have copied them up to their root frame (the deepest needed %d bytes)", flag(min(size, maxStackCopy)), n.Max)
	default:
		within := n.Within(maxStackCopy)
		fmt.Fprintf(w, "the deepest needed %d bytes, more than the kernel copies; %s reaches the root for %d of them (%s)", n.Max, flag(maxStackCopy), within, pct(within, known))
	}
	if n.Estimated > 0 {
		fmt.Fprintf(w, "; for %d the top of the stack came from its mapping, an over-estimate", n.Estimated)
	}
	fmt.Fprintln(w)
}
