package attribute

// ReportLive hands the sink every live allocation it has not been given
// yet, its flags decided as they stand: a recording cut into windows
// (analyze's) counts each allocation in the window whose calls made it,
// not in the one where its first fault or its free would have decided
// it. An allocation decided this way that then faults first inside a
// memset is not marked FlagZero.
func (t *Tracker) ReportLive() {
	for _, pid := range sortedKeys(t.spaces) {
		t.spaces[pid].live.Each(func(_, _ uint64, a *Allocation) {
			if !a.decided {
				a.decided = true
				t.report(a)
			}
		})
	}
}

// Current returns owner's resident pages now, in the processes still
// running (End adds what exited ones held).
func (r *Resident) Current(owner int) int64 {
	if owner < len(r.cur) {
		return r.cur[owner]
	}
	return 0
}
