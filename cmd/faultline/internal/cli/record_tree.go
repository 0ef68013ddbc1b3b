package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// following tells the user, as it happens, that the command has exited
// but processes it started still run, and that record goes on recording
// them (rec.Config.Following).
func (r *recorder) following(procs []rec.Process) {
	r.logf("%s exited; %s it started still %s: recording until %s (Ctrl-C stops the recording and ends %s)",
		filepath.Base(r.opts.cmd[0]), nameProcesses(procs), plural(len(procs), "runs", "run"),
		plural(len(procs), "it exits", "they exit"), plural(len(procs), "it", "them"))
}

// noteRest adds the summary's line on the processes that outlived the
// command.
func (r *recorder) noteRest(res *rec.Result) {
	rest := res.Rest
	if len(rest.Procs) == 0 {
		return
	}
	cmd := filepath.Base(r.opts.cmd[0])
	if rest.Killed {
		r.notes.add(fmt.Errorf("%s exited, leaving %s running; %s recorded until record was stopped (%s), then killed", cmd, nameProcesses(rest.Procs), plural(len(rest.Procs), "it was", "they were"), res.StoppedBy))
		return
	}
	r.logf("%s exited before %s it started; %s recorded until %s", cmd, nameProcesses(rest.Procs), plural(len(rest.Procs), "it was", "they were"), plural(len(rest.Procs), "it exited", "the last exited"))
}

// nameProcesses names procs for a line: "2 processes (sleep 123, app
// 124)", the first five of them.
func nameProcesses(procs []rec.Process) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s (", len(procs), plural(len(procs), "process", "processes"))
	for i, p := range procs {
		if i == 5 {
			fmt.Fprintf(&b, ", %d more", len(procs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", p.Comm, p.Pid)
	}
	b.WriteString(")")
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
