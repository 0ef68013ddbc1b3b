package cfi

// Env gives the DWARF expression evaluator the unwound frame's registers and
// memory. Both methods report failure instead of panicking; an unwinder
// implements ReadMem over its copy of the stack.
type Env interface {
	// Reg returns DWARF register reg's value in the frame being unwound.
	Reg(reg uint16) (uint64, bool)
	// ReadMem reads size (1, 2, 4 or 8) bytes at addr, zero-extended.
	ReadMem(addr uint64, size int) (uint64, bool)
}

// Limits of the expression evaluator.
const (
	maxExprSteps = 10000 // operations per evaluation (loops via bra/skip)
	maxExprStack = 64    // DWARF stack depth
)

// Eval evaluates a DWARF expression as used in CFI (DW_CFA_def_cfa_expression,
// DW_CFA_expression, DW_CFA_val_expression) and returns the value on top of
// the stack. push holds values pushed before the first operation (the CFA
// for register rules; none for the CFA rule). Eval never panics and does not
// allocate unless it returns an error; failures are *ExprError.
//
// Supported: DW_OP_addr, lit0–31, const1u…const8s, constu/consts, breg0–31,
// bregx, dup, drop, over, pick, swap, rot, deref, deref_size, abs, and, div,
// minus, mod, mul, neg, not, or, plus, plus_uconst, shl, shr, shra, xor,
// bra, skip, eq, ge, gt, le, lt, ne, nop. Register location operations
// (DW_OP_reg*, regx) are rejected: CFI expressions compute values.
func Eval(expr []byte, env Env, push []uint64) (uint64, error) {
	var st [maxExprStack]uint64
	sp := 0
	if len(push) > maxExprStack {
		return 0, &ExprError{Msg: "too many initial values"}
	}
	for _, v := range push {
		st[sp] = v
		sp++
	}
	r := exprReader{expr: expr, ok: true}
	for steps := 0; r.pc < len(expr); steps++ {
		opPos := r.pc
		op := expr[r.pc]
		r.pc++
		fail := func(msg string, err error) (uint64, error) {
			return 0, &ExprError{Offset: opPos, Op: op, Msg: msg, Err: err}
		}
		if steps >= maxExprSteps {
			return fail("step limit exceeded", nil)
		}
		need := func(n int) bool { return sp >= n }
		var v uint64
		pushes := false // v is to be pushed
		switch {
		case op >= dwOpLit0 && op <= dwOpLit31:
			v, pushes = uint64(op-dwOpLit0), true
		case op >= dwOpBreg0 && op <= dwOpBreg31:
			off := r.sleb()
			if !r.ok {
				return fail("truncated operand", nil)
			}
			rv, rok := env.Reg(uint16(op - dwOpBreg0))
			if !rok {
				return fail("register unavailable", ErrRegister)
			}
			v, pushes = rv+uint64(off), true
		case op >= dwOpReg0 && op <= dwOpReg31, op == dwOpRegx:
			return fail("register location not allowed in CFI expression", nil)
		default:
			switch op {
			case dwOpAddr:
				v, pushes = r.fixed(8), true
			case dwOpConst1u:
				v, pushes = r.fixed(1), true
			case dwOpConst1s:
				v, pushes = uint64(int64(int8(r.fixed(1)))), true
			case dwOpConst2u:
				v, pushes = r.fixed(2), true
			case dwOpConst2s:
				v, pushes = uint64(int64(int16(r.fixed(2)))), true
			case dwOpConst4u:
				v, pushes = r.fixed(4), true
			case dwOpConst4s:
				v, pushes = uint64(int64(int32(r.fixed(4)))), true
			case dwOpConst8u, dwOpConst8s:
				v, pushes = r.fixed(8), true
			case dwOpConstu:
				v, pushes = r.uleb(), true
			case dwOpConsts:
				v, pushes = uint64(r.sleb()), true
			case dwOpBregx:
				reg := r.uleb()
				off := r.sleb()
				if !r.ok {
					return fail("truncated operand", nil)
				}
				if reg >= 1<<16 {
					return fail("register number too large", nil)
				}
				rv, rok := env.Reg(uint16(reg))
				if !rok {
					return fail("register unavailable", ErrRegister)
				}
				v, pushes = rv+uint64(off), true
			case dwOpDup:
				if !need(1) {
					return fail("stack underflow", nil)
				}
				v, pushes = st[sp-1], true
			case dwOpDrop:
				if !need(1) {
					return fail("stack underflow", nil)
				}
				sp--
			case dwOpOver:
				if !need(2) {
					return fail("stack underflow", nil)
				}
				v, pushes = st[sp-2], true
			case dwOpPick:
				idx := r.fixed(1)
				if !r.ok {
					return fail("truncated operand", nil)
				}
				if uint64(sp) <= idx {
					return fail("stack underflow", nil)
				}
				v, pushes = st[sp-1-int(idx)], true
			case dwOpSwap:
				if !need(2) {
					return fail("stack underflow", nil)
				}
				st[sp-1], st[sp-2] = st[sp-2], st[sp-1]
			case dwOpRot:
				if !need(3) {
					return fail("stack underflow", nil)
				}
				st[sp-1], st[sp-2], st[sp-3] = st[sp-2], st[sp-3], st[sp-1]
			case dwOpDeref, dwOpDerefSize:
				size := 8
				if op == dwOpDerefSize {
					size = int(r.fixed(1))
					if !r.ok {
						return fail("truncated operand", nil)
					}
					if size != 1 && size != 2 && size != 4 && size != 8 {
						return fail("unsupported deref size", nil)
					}
				}
				if !need(1) {
					return fail("stack underflow", nil)
				}
				m, mok := env.ReadMem(st[sp-1], size)
				if !mok {
					return fail("memory read failed", ErrMemory)
				}
				st[sp-1] = m
			case dwOpAbs, dwOpNeg, dwOpNot:
				if !need(1) {
					return fail("stack underflow", nil)
				}
				x := st[sp-1]
				switch op {
				case dwOpAbs:
					if int64(x) < 0 {
						x = -x
					}
				case dwOpNeg:
					x = -x
				case dwOpNot:
					x = ^x
				}
				st[sp-1] = x
			case dwOpPlusUconst:
				n := r.uleb()
				if !r.ok {
					return fail("truncated operand", nil)
				}
				if !need(1) {
					return fail("stack underflow", nil)
				}
				st[sp-1] += n
			case dwOpAnd, dwOpDiv, dwOpMinus, dwOpMod, dwOpMul, dwOpOr, dwOpPlus,
				dwOpShl, dwOpShr, dwOpShra, dwOpXor,
				dwOpEq, dwOpGe, dwOpGt, dwOpLe, dwOpLt, dwOpNe:
				if !need(2) {
					return fail("stack underflow", nil)
				}
				b, a := st[sp-1], st[sp-2] // a op b, b on top
				sp -= 2
				var r uint64
				switch op {
				case dwOpAnd:
					r = a & b
				case dwOpOr:
					r = a | b
				case dwOpXor:
					r = a ^ b
				case dwOpPlus:
					r = a + b
				case dwOpMinus:
					r = a - b
				case dwOpMul:
					r = a * b
				case dwOpDiv:
					if b == 0 {
						return fail("division by zero", nil)
					}
					if int64(b) == -1 {
						r = -a // avoids the MinInt64 / -1 trap
					} else {
						r = uint64(int64(a) / int64(b))
					}
				case dwOpMod:
					if b == 0 {
						return fail("division by zero", nil)
					}
					r = a % b
				case dwOpShl:
					if b < 64 {
						r = a << b
					}
				case dwOpShr:
					if b < 64 {
						r = a >> b
					}
				case dwOpShra:
					if b >= 64 {
						b = 63
					}
					r = uint64(int64(a) >> b)
				case dwOpEq:
					r = b2u(a == b)
				case dwOpNe:
					r = b2u(a != b)
				case dwOpGe:
					r = b2u(int64(a) >= int64(b))
				case dwOpGt:
					r = b2u(int64(a) > int64(b))
				case dwOpLe:
					r = b2u(int64(a) <= int64(b))
				case dwOpLt:
					r = b2u(int64(a) < int64(b))
				}
				st[sp] = r
				sp++
			case dwOpSkip, dwOpBra:
				off := int64(int16(r.fixed(2)))
				if !r.ok {
					return fail("truncated operand", nil)
				}
				take := true
				if op == dwOpBra {
					if !need(1) {
						return fail("stack underflow", nil)
					}
					sp--
					take = st[sp] != 0
				}
				if take {
					target := int64(r.pc) + off
					if target < 0 || target > int64(len(expr)) {
						return fail("branch target out of range", nil)
					}
					r.pc = int(target)
				}
			case dwOpNop:
			default:
				return fail("unsupported operation", nil)
			}
		}
		if !r.ok {
			return fail("truncated operand", nil)
		}
		if pushes {
			if sp >= maxExprStack {
				return fail("stack overflow", nil)
			}
			st[sp] = v
			sp++
		}
	}
	if sp == 0 {
		return 0, &ExprError{Offset: len(expr), Msg: "empty stack at end of expression"}
	}
	return st[sp-1], nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// exprReader decodes operands; ok turns false on a truncated operand.
type exprReader struct {
	expr []byte
	pc   int
	ok   bool
}

func (r *exprReader) uleb() uint64 {
	v, n := uleb128(r.rest())
	r.leb(n)
	return v
}

func (r *exprReader) sleb() int64 {
	v, n := sleb128(r.rest())
	r.leb(n)
	return v
}

// rest is the expression after pc.
func (r *exprReader) rest() []byte {
	if r.pc >= len(r.expr) {
		return nil
	}
	return r.expr[r.pc:]
}

// leb moves past a LEB128 operand of n bytes; n is 0 when it is truncated.
func (r *exprReader) leb(n int) {
	if n == 0 {
		r.ok = false
		r.pc = max(r.pc, len(r.expr))
		return
	}
	r.pc += n
}

// fixed reads an n-byte little-endian operand (x86-64 and AArch64 CFI).
func (r *exprReader) fixed(n int) uint64 {
	if len(r.expr)-r.pc < n {
		r.ok = false
		return 0
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(r.expr[r.pc+i])
	}
	r.pc += n
	return v
}
