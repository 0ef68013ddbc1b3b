package cfi

import "fmt"

// NumRegs is how many DWARF registers a Row tracks: 0–16 cover x86-64's
// general registers and return-address column, 0–32 AArch64's x0–x30, sp
// and pc. Rules for higher-numbered registers (vector registers) are parsed
// and dropped; unwinding does not need them.
const NumRegs = 33

// RuleKind says how a register's value in the caller (or the CFA) is
// recovered.
type RuleKind uint8

const (
	// RuleUnspecified: the CFI says nothing about the register. Unwinders
	// treat it like RuleSameValue for callee-saved registers (as gdb and
	// libunwind do); readelf prints it as "u".
	RuleUnspecified RuleKind = iota
	// RuleUndefined: the value is lost. For the return-address column this
	// marks the outermost frame (_start, clone3, start_thread).
	RuleUndefined
	// RuleSameValue: the caller's value is the callee's.
	RuleSameValue
	// RuleOffset: saved in memory at CFA+Offset.
	RuleOffset
	// RuleValOffset: the value is CFA+Offset.
	RuleValOffset
	// RuleRegister: the value is in register Reg.
	RuleRegister
	// RuleExpression: saved in memory at the address computed by the
	// expression Row.Expr(rule), evaluated with the CFA pushed first.
	RuleExpression
	// RuleValExpression: the value is the result of the expression. For a
	// register the CFA is pushed first; for Row.CFA nothing is.
	RuleValExpression
	// RuleRegOffset: only for Row.CFA: the CFA is register Reg + Offset.
	RuleRegOffset
)

var ruleNames = [...]string{"unspecified", "undefined", "same", "offset", "val_offset", "register", "expression", "val_expression", "reg+offset"}

func (k RuleKind) String() string {
	if int(k) < len(ruleNames) {
		return ruleNames[k]
	}
	return fmt.Sprintf("RuleKind(%d)", k)
}

// Rule is one column of a CFI row.
type Rule struct {
	Kind RuleKind
	// Reg is the register of RuleRegister and RuleRegOffset.
	Reg     uint16
	exprLen uint32
	// Offset is the (already data-alignment-scaled) offset of RuleOffset,
	// RuleValOffset and RuleRegOffset. For the expression kinds it holds
	// the expression's position in the section; use Row.Expr.
	Offset int64
}

// Row is the unwind rule set in force for a range of PCs. Rows are filled by
// Table.Find into caller-provided memory; the expression bytes they refer to
// are owned by the Table and stay valid as long as it.
type Row struct {
	// Start and End bound the PCs (ELF virtual addresses, End exclusive)
	// for which this row holds.
	Start, End uint64
	// CFA is RuleRegOffset or RuleValExpression.
	CFA Rule
	// Regs holds the rule of each DWARF register below NumRegs.
	Regs [NumRegs]Rule
	// RA is the return-address column (16 on x86-64, 30 on AArch64).
	RA uint16
	// Signal is set for signal trampolines (augmentation 'S', glibc's
	// __restore_rt): the caller's PC is exact, not a return address, and
	// its CFA need not be above this frame's.
	Signal bool
	// RASigned is the AArch64 RA_SIGN_STATE (toggled by
	// DW_CFA_AARCH64_negate_ra_state, which is DW_CFA_GNU_window_save's
	// opcode).
	RASigned bool
	// FDE is the FDE's offset in its section, for diagnostics.
	FDE uint64

	data []byte
}

// Expr returns the DWARF expression of a RuleExpression or
// RuleValExpression rule of this row (nil for other kinds).
func (r *Row) Expr(rule Rule) []byte {
	if rule.Kind != RuleExpression && rule.Kind != RuleValExpression {
		return nil
	}
	end := rule.Offset + int64(rule.exprLen)
	if rule.Offset < 0 || end > int64(len(r.data)) {
		return nil
	}
	return r.data[rule.Offset:end]
}

// Rule returns the rule for DWARF register reg (RuleUnspecified when reg is
// not tracked).
func (r *Row) Rule(reg int) Rule {
	if reg < 0 || reg >= NumRegs {
		return Rule{}
	}
	return r.Regs[reg]
}

// String formats the row readelf-style, e.g. "[1040,1066) cfa=r7+16 r16=c-8".
func (r *Row) String() string {
	s := fmt.Sprintf("[%x,%x) cfa=%s", r.Start, r.End, r.fmtRule(r.CFA))
	for i := range r.Regs {
		if r.Regs[i].Kind != RuleUnspecified {
			s += fmt.Sprintf(" r%d=%s", i, r.fmtRule(r.Regs[i]))
		}
	}
	if r.Signal {
		s += " signal"
	}
	return s
}

func (r *Row) fmtRule(x Rule) string {
	switch x.Kind {
	case RuleUnspecified:
		return "u"
	case RuleUndefined:
		return "undef"
	case RuleSameValue:
		return "s"
	case RuleOffset:
		return fmt.Sprintf("c%+d", x.Offset)
	case RuleValOffset:
		return fmt.Sprintf("v%+d", x.Offset)
	case RuleRegister:
		return fmt.Sprintf("r%d", x.Reg)
	case RuleExpression:
		return fmt.Sprintf("exp%x", r.Expr(x))
	case RuleValExpression:
		return fmt.Sprintf("vexp%x", r.Expr(x))
	case RuleRegOffset:
		return fmt.Sprintf("r%d%+d", x.Reg, x.Offset)
	}
	return x.Kind.String()
}
