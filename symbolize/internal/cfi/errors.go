package cfi

import (
	"errors"
	"fmt"
)

// ErrNoFDE is returned by Table.Find when no FDE covers the PC. Callers fall
// back to another unwinding method (frame pointers).
var ErrNoFDE = errors.New("cfi: no FDE covers pc")

// ErrNoCFI is returned by Load when the binary has neither .eh_frame nor
// .debug_frame.
var ErrNoCFI = errors.New("cfi: no .eh_frame or .debug_frame section")

// FormatError reports malformed call frame information at an offset in a
// section.
type FormatError struct {
	Section string // ".eh_frame", ".debug_frame", ".eh_frame_hdr"
	Offset  int64  // offset in the section of the byte that could not be decoded
	Msg     string
	Err     error
}

func (e *FormatError) Error() string {
	return withCause(fmt.Sprintf("cfi: %s at 0x%x: %s", e.Section, e.Offset, e.Msg), e.Err)
}

// withCause appends the underlying error, if any, to an error message.
func withCause(s string, err error) string {
	if err != nil {
		s += ": " + err.Error()
	}
	return s
}

func (e *FormatError) Unwrap() error { return e.Err }

// ExprError reports a DWARF expression that could not be evaluated: a
// malformed or unsupported operation, a stack underflow or overflow, an
// unreadable register or memory word, or the step cap.
type ExprError struct {
	Offset int  // offset of the operation within the expression
	Op     byte // the DW_OP_* opcode
	Msg    string
	Err    error // ErrMemory for failed memory reads, ErrRegister for missing registers
}

func (e *ExprError) Error() string {
	return withCause(fmt.Sprintf("cfi: dwarf expression op 0x%02x at 0x%x: %s", e.Op, e.Offset, e.Msg), e.Err)
}

func (e *ExprError) Unwrap() error { return e.Err }

// ErrMemory is wrapped by ExprError when Env.ReadMem fails; an unwinder
// treats it as "the stack copy ended" rather than as bad CFI.
var ErrMemory = errors.New("memory not readable")

// ErrRegister is wrapped by ExprError when Env.Reg has no value for a
// register the expression needs.
var ErrRegister = errors.New("register value unknown")
