package cfi

// Caps that keep a hostile CFI program from running long.
const (
	maxCFASteps      = 1 << 16 // instructions per Find
	maxRememberDepth = 64      // DW_CFA_remember_state nesting
)

// rowState is the part of a row that DW_CFA_remember_state saves.
type rowState struct {
	cfa      Rule
	regs     [NumRegs]Rule
	raSigned bool
}

// interp runs an FDE's CIE and FDE programs up to a PC.
type interp struct {
	sec     *section
	f       fde
	row     *Row
	initial *rowState // after the CIE's instructions, for DW_CFA_restore
	stack   *[]rowState
	depth   int
	loc     uint64
	pc      uint64
	steps   int
}

// interpret fills row with the rules in force at pc, which must lie in
// [f.begin, f.end). stack is scratch space for remember_state, reused across
// calls.
func interpret(s *section, f fde, pc uint64, row *Row, initial *rowState, stack *[]rowState) error {
	*row = Row{}
	row.data = s.data
	row.FDE = uint64(f.off)
	row.Signal = f.cie.signal
	if f.cie.raReg >= NumRegs {
		return &FormatError{Section: s.name, Offset: int64(f.cie.off), Msg: "return address column not supported"}
	}
	row.RA = uint16(f.cie.raReg)
	in := interp{sec: s, f: f, row: row, stack: stack, loc: f.begin, pc: pc}
	*initial = rowState{}
	in.initial = initial
	done, err := in.run(f.cie.insStart, f.cie.insEnd, true)
	if err != nil {
		return err
	}
	if !done {
		initial.cfa, initial.regs, initial.raSigned = row.CFA, row.Regs, row.RASigned
		in.depth = 0
		done, err = in.run(f.insStart, f.insEnd, false)
		if err != nil {
			return err
		}
	}
	if !done {
		row.Start, row.End = in.loc, f.end
	}
	if row.CFA.Kind == RuleUnspecified {
		return &FormatError{Section: s.name, Offset: int64(f.off), Msg: "no CFA rule"}
	}
	return nil
}

// run executes instructions in [start,end). It returns done=true when an
// advance moved past pc (the row is then complete, with Start and End set).
func (in *interp) run(start, end int, isCIE bool) (done bool, err error) {
	b := buf{sec: in.sec, off: start, end: end}
	row := in.row
	for b.off < b.end {
		in.steps++
		if in.steps > maxCFASteps {
			b.fail("CFA program exceeds step limit")
			return false, b.err
		}
		opPos := b.off
		op := b.u8()
		advance, isAdvance := in.exec(&b, op, opPos, isCIE)
		if b.err != nil {
			return false, b.err
		}
		if isAdvance {
			next := in.loc + advance
			if next < in.loc {
				next = ^uint64(0)
			}
			if in.pc < next {
				row.Start, row.End = in.loc, next
				if row.End > in.f.end {
					row.End = in.f.end
				}
				return true, nil
			}
			in.loc = next
		}
	}
	return false, nil
}

// exec executes the instruction op, read at opPos, with its operands from
// b. For an instruction that advances the location it returns by how much.
func (in *interp) exec(b *buf, op byte, opPos int, isCIE bool) (advance uint64, isAdvance bool) {
	c := &in.f.cie
	switch op & 0xc0 {
	case dwCFAAdvanceLoc:
		return uint64(op&0x3f) * c.codeAlign, true
	case dwCFAOffset:
		in.setReg(uint64(op&0x3f), Rule{Kind: RuleOffset, Offset: int64(b.uleb()) * c.dataAlign})
		return 0, false
	case dwCFARestore:
		in.restore(uint64(op&0x3f), isCIE)
		return 0, false
	}
	if advance, ok := in.advance(b, op, opPos); ok {
		return advance, true
	}
	switch {
	case op == dwCFANop:
	case in.execRegister(b, op, opPos, isCIE):
	case in.execState(b, op, opPos):
	case in.execCFA(b, op, opPos):
	default:
		b.off = opPos
		b.fail("unknown DW_CFA opcode")
	}
	return 0, false
}

// advance executes op if it is one of the instructions that advance the
// location, and returns by how much.
func (in *interp) advance(b *buf, op byte, opPos int) (uint64, bool) {
	c := &in.f.cie
	switch op {
	case dwCFASetLoc:
		newLoc, _ := b.encoded(c.fdeEnc)
		if b.err == nil && newLoc < in.loc {
			b.off = opPos
			b.fail("DW_CFA_set_loc moves backwards")
		}
		return newLoc - in.loc, true
	case dwCFAAdvanceLoc1:
		return uint64(b.u8()) * c.codeAlign, true
	case dwCFAAdvanceLoc2:
		return uint64(b.u16()) * c.codeAlign, true
	case dwCFAAdvanceLoc4:
		return uint64(b.u32()) * c.codeAlign, true
	case dwCFAMIPSAdvanceLoc8:
		return b.u64() * c.codeAlign, true
	}
	return 0, false
}

// execRegister executes op if it is one of the instructions that set a
// register's rule, and reports whether it was.
func (in *interp) execRegister(b *buf, op byte, opPos int, isCIE bool) bool {
	c := &in.f.cie
	switch op {
	case dwCFAOffsetExtended, dwCFAOffsetExtendedSf, dwCFAGNUNegativeOffsetExtended,
		dwCFAValOffset, dwCFAValOffsetSf:
		// The register is saved at (or, val_, is) CFA + a factored offset.
		reg := b.uleb()
		var factored int64
		switch op {
		case dwCFAOffsetExtendedSf, dwCFAValOffsetSf:
			factored = b.sleb()
		case dwCFAGNUNegativeOffsetExtended:
			factored = -int64(b.uleb())
		default:
			factored = int64(b.uleb())
		}
		kind := RuleOffset
		if op == dwCFAValOffset || op == dwCFAValOffsetSf {
			kind = RuleValOffset
		}
		in.setReg(reg, Rule{Kind: kind, Offset: factored * c.dataAlign})
	case dwCFARestoreExtended:
		in.restore(b.uleb(), isCIE)
	case dwCFAUndefined:
		in.setReg(b.uleb(), Rule{Kind: RuleUndefined})
	case dwCFASameValue:
		in.setReg(b.uleb(), Rule{Kind: RuleSameValue})
	case dwCFARegister:
		reg := b.uleb()
		reg2 := b.uleb()
		if b.err == nil && reg2 >= 1<<16 {
			b.off = opPos
			b.fail("register number too large")
		}
		in.setReg(reg, Rule{Kind: RuleRegister, Reg: uint16(reg2)})
	case dwCFAExpression, dwCFAValExpression:
		reg := b.uleb()
		n := b.uleb()
		pos, l := b.block(n)
		kind := RuleExpression
		if op == dwCFAValExpression {
			kind = RuleValExpression
		}
		in.setReg(reg, Rule{Kind: kind, Offset: int64(pos), exprLen: uint32(l)})
	default:
		return false
	}
	return true
}

// execState executes op if it is DW_CFA_remember_state or
// DW_CFA_restore_state, and reports whether it was.
func (in *interp) execState(b *buf, op byte, opPos int) bool {
	row := in.row
	switch op {
	case dwCFARememberState:
		if in.depth >= maxRememberDepth {
			b.off = opPos
			b.fail("DW_CFA_remember_state nested too deeply")
			break
		}
		if in.depth == len(*in.stack) {
			*in.stack = append(*in.stack, rowState{})
		}
		(*in.stack)[in.depth] = rowState{cfa: row.CFA, regs: row.Regs, raSigned: row.RASigned}
		in.depth++
	case dwCFARestoreState:
		if in.depth == 0 {
			b.off = opPos
			b.fail("DW_CFA_restore_state without remember_state")
			break
		}
		in.depth--
		st := &(*in.stack)[in.depth]
		// The CFA rule is restored too (DWARF 5 §6.4.2.4 says
		// "register rules"; GCC, LLVM, readelf and libgcc all treat
		// the CFA as part of the saved row).
		row.CFA, row.Regs, row.RASigned = st.cfa, st.regs, st.raSigned
	default:
		return false
	}
	return true
}

// execCFA executes op if it is one of the instructions that set the CFA
// rule (or the two GNU ones that change nothing the unwinder reads but the
// return address's signing), and reports whether it was.
func (in *interp) execCFA(b *buf, op byte, opPos int) bool {
	c := &in.f.cie
	row := in.row
	switch op {
	case dwCFADefCFA:
		reg := b.uleb()
		off := b.uleb()
		in.setCFA(reg, int64(off), b, opPos)
	case dwCFADefCFASf:
		reg := b.uleb()
		off := b.sleb() * c.dataAlign
		in.setCFA(reg, off, b, opPos)
	case dwCFADefCFARegister:
		reg := b.uleb()
		off := int64(0)
		if row.CFA.Kind == RuleRegOffset {
			off = row.CFA.Offset
		}
		in.setCFA(reg, off, b, opPos)
	case dwCFADefCFAOffset:
		off := b.uleb()
		row.CFA.Offset = int64(off)
		if row.CFA.Kind != RuleRegOffset && b.err == nil {
			b.off = opPos
			b.fail("DW_CFA_def_cfa_offset without a register CFA rule")
		}
	case dwCFADefCFAOffsetSf:
		off := b.sleb() * c.dataAlign
		row.CFA.Offset = off
		if row.CFA.Kind != RuleRegOffset && b.err == nil {
			b.off = opPos
			b.fail("DW_CFA_def_cfa_offset_sf without a register CFA rule")
		}
	case dwCFADefCFAExpression:
		n := b.uleb()
		pos, l := b.block(n)
		row.CFA = Rule{Kind: RuleValExpression, Offset: int64(pos), exprLen: uint32(l)}
	case dwCFAGNUArgsSize:
		b.uleb() // only matters for landing pads
	case dwCFAGNUWindowSave:
		row.RASigned = !row.RASigned
	default:
		return false
	}
	return true
}

func (in *interp) setReg(reg uint64, r Rule) {
	if reg < NumRegs {
		in.row.Regs[reg] = r
	}
}

func (in *interp) restore(reg uint64, isCIE bool) {
	if reg >= NumRegs {
		return
	}
	if isCIE {
		in.row.Regs[reg] = Rule{}
		return
	}
	in.row.Regs[reg] = in.initial.regs[reg]
}

func (in *interp) setCFA(reg uint64, off int64, b *buf, opPos int) {
	if b.err != nil {
		return
	}
	if reg >= 1<<16 {
		b.off = opPos
		b.fail("CFA register number too large")
		return
	}
	in.row.CFA = Rule{Kind: RuleRegOffset, Reg: uint16(reg), Offset: off}
}
