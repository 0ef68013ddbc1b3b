package cfi

// DWARF call frame instruction opcodes (DWARF 5 §6.4.2, binutils
// include/dwarf2.def). The high two bits select the three "primary" opcodes
// that carry an operand in their low six bits.
const (
	dwCFAAdvanceLoc = 0x40 // DW_CFA_advance_loc: delta in low 6 bits
	dwCFAOffset     = 0x80 // DW_CFA_offset: register in low 6 bits, ULEB offset
	dwCFARestore    = 0xc0 // DW_CFA_restore: register in low 6 bits

	dwCFANop                       = 0x00
	dwCFASetLoc                    = 0x01
	dwCFAAdvanceLoc1               = 0x02
	dwCFAAdvanceLoc2               = 0x03
	dwCFAAdvanceLoc4               = 0x04
	dwCFAOffsetExtended            = 0x05
	dwCFARestoreExtended           = 0x06
	dwCFAUndefined                 = 0x07
	dwCFASameValue                 = 0x08
	dwCFARegister                  = 0x09
	dwCFARememberState             = 0x0a
	dwCFARestoreState              = 0x0b
	dwCFADefCFA                    = 0x0c
	dwCFADefCFARegister            = 0x0d
	dwCFADefCFAOffset              = 0x0e
	dwCFADefCFAExpression          = 0x0f
	dwCFAExpression                = 0x10
	dwCFAOffsetExtendedSf          = 0x11
	dwCFADefCFASf                  = 0x12
	dwCFADefCFAOffsetSf            = 0x13
	dwCFAValOffset                 = 0x14
	dwCFAValOffsetSf               = 0x15
	dwCFAValExpression             = 0x16
	dwCFAMIPSAdvanceLoc8           = 0x1d
	dwCFAGNUWindowSave             = 0x2d // also DW_CFA_AARCH64_negate_ra_state
	dwCFAGNUArgsSize               = 0x2e
	dwCFAGNUNegativeOffsetExtended = 0x2f
)

// Pointer encodings used by .eh_frame and .eh_frame_hdr (LSB 5.0,
// "DWARF Exception Header Encoding"; gcc unwind-pe.h).
const (
	dwEHPEAbsptr  = 0x00
	dwEHPEUleb128 = 0x01
	dwEHPEUdata2  = 0x02
	dwEHPEUdata4  = 0x03
	dwEHPEUdata8  = 0x04
	dwEHPESleb128 = 0x09
	dwEHPESdata2  = 0x0a
	dwEHPESdata4  = 0x0b
	dwEHPESdata8  = 0x0c

	dwEHPEPcrel   = 0x10
	dwEHPETextrel = 0x20
	dwEHPEDatarel = 0x30
	dwEHPEFuncrel = 0x40
	dwEHPEAligned = 0x50

	dwEHPEIndirect = 0x80
	dwEHPEOmit     = 0xff
)

// DWARF expression opcodes (DWARF 5 §2.5, binutils include/dwarf2.def) that
// the evaluator implements.
const (
	dwOpAddr       = 0x03
	dwOpDeref      = 0x06
	dwOpConst1u    = 0x08
	dwOpConst1s    = 0x09
	dwOpConst2u    = 0x0a
	dwOpConst2s    = 0x0b
	dwOpConst4u    = 0x0c
	dwOpConst4s    = 0x0d
	dwOpConst8u    = 0x0e
	dwOpConst8s    = 0x0f
	dwOpConstu     = 0x10
	dwOpConsts     = 0x11
	dwOpDup        = 0x12
	dwOpDrop       = 0x13
	dwOpOver       = 0x14
	dwOpPick       = 0x15
	dwOpSwap       = 0x16
	dwOpRot        = 0x17
	dwOpAbs        = 0x19
	dwOpAnd        = 0x1a
	dwOpDiv        = 0x1b
	dwOpMinus      = 0x1c
	dwOpMod        = 0x1d
	dwOpMul        = 0x1e
	dwOpNeg        = 0x1f
	dwOpNot        = 0x20
	dwOpOr         = 0x21
	dwOpPlus       = 0x22
	dwOpPlusUconst = 0x23
	dwOpShl        = 0x24
	dwOpShr        = 0x25
	dwOpShra       = 0x26
	dwOpXor        = 0x27
	dwOpBra        = 0x28
	dwOpEq         = 0x29
	dwOpGe         = 0x2a
	dwOpGt         = 0x2b
	dwOpLe         = 0x2c
	dwOpLt         = 0x2d
	dwOpNe         = 0x2e
	dwOpSkip       = 0x2f
	dwOpLit0       = 0x30
	dwOpLit31      = 0x4f
	dwOpReg0       = 0x50
	dwOpReg31      = 0x6f
	dwOpBreg0      = 0x70
	dwOpBreg31     = 0x8f
	dwOpRegx       = 0x90
	dwOpBregx      = 0x92
	dwOpDerefSize  = 0x94
	dwOpNop        = 0x96
)
