package symbolize

import (
	"fmt"

	"github.com/faultline/faultline/symbolize/unwind"
)

// ArchError refuses a recording made on an architecture whose stacks this
// package does not unwind. Its register numbers mean other registers than
// x86-64's, so unwinding it anyway would give wrong stacks, not fewer.
type ArchError struct {
	Machine string // as the recording's ARCH feature names it ("aarch64")
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("the recording was made on %s; faultline unwinds x86_64 recordings only", e.Machine)
}

// recordingArch is the architecture whose register layout a recording's
// samples use, named by machine as uname(2) gives it. A recording that
// does not say (no ARCH feature, or a pipe whose features have not arrived
// yet) is taken as x86_64, the layout of every recording this package has
// been checked against; CheckArch looks again once a pipe's features are in.
func recordingArch(machine string) (unwind.Arch, error) {
	if machine == "" {
		return unwind.ArchX86_64, nil
	}
	if a := unwind.ArchFromMachine(machine); a == unwind.ArchX86_64 {
		return a, nil
	}
	return unwind.ArchUnknown, &ArchError{Machine: machine}
}

// Arch returns the architecture whose registers the session's samples are
// read with.
func (s *Session) Arch() unwind.Arch { return s.arch }

// CheckArch refuses, with an *ArchError, a recording whose ARCH feature
// arrived after NewSession (pipe mode sends features as records) and names
// an architecture the session cannot unwind. Call it before the first
// sample is unwound.
func (s *Session) CheckArch() error {
	if s.meta == nil {
		return nil
	}
	a, err := recordingArch(s.meta.Arch)
	if err != nil {
		return err
	}
	if a != s.arch {
		return &ArchError{Machine: s.meta.Arch}
	}
	return nil
}
