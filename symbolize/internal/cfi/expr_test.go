package cfi

import (
	"errors"
	"strings"
	"testing"
)

type testEnv struct {
	regs map[uint16]uint64
	mem  map[uint64]uint64
}

func (e *testEnv) Reg(r uint16) (uint64, bool) {
	v, ok := e.regs[r]
	return v, ok
}

func (e *testEnv) ReadMem(addr uint64, size int) (uint64, bool) {
	v, ok := e.mem[addr]
	if size < 8 {
		v &= 1<<(8*uint(size)) - 1
	}
	return v, ok
}

func TestEval(t *testing.T) {
	env := &testEnv{
		regs: map[uint16]uint64{6: 0x1000, 7: 0x2000, 40: 0x40},
		mem:  map[uint64]uint64{0x2000: 0x1122334455667788, 0x2008: 0xdeadbeef},
	}
	for _, tc := range []struct {
		name string
		expr []byte
		push []uint64
		want uint64
		err  string
	}{
		{"lit", []byte{0x35}, nil, 5, ""},
		{"const1u", []byte{0x08, 0xff}, nil, 0xff, ""},
		{"const1s", []byte{0x09, 0xff}, nil, ^uint64(0), ""},
		{"const2u", []byte{0x0a, 0x34, 0x12}, nil, 0x1234, ""},
		{"const2s", []byte{0x0b, 0xfe, 0xff}, nil, ^uint64(1), ""},
		{"const4u", []byte{0x0c, 0x78, 0x56, 0x34, 0x12}, nil, 0x12345678, ""},
		{"const4s", []byte{0x0d, 0xff, 0xff, 0xff, 0xff}, nil, ^uint64(0), ""},
		{"const8u", []byte{0x0e, 1, 2, 3, 4, 5, 6, 7, 8}, nil, 0x0807060504030201, ""},
		{"constu", []byte{0x10, 0xe5, 0x8e, 0x26}, nil, 624485, ""},
		{"consts", []byte{0x11, 0xc0, 0xbb, 0x78}, nil, neg(123456), ""},
		{"addr", []byte{0x03, 0x10, 0, 0, 0, 0, 0, 0, 0}, nil, 0x10, ""},
		{"breg7", []byte{0x77, 0x08}, nil, 0x2008, ""},
		{"breg6 negative", []byte{0x76, 0x78}, nil, 0xff8, ""},
		{"bregx", []byte{0x92, 0x28, 0x02}, nil, 0x42, ""},
		{"pushed value", []byte{0x23, 0x10}, []uint64{0x100}, 0x110, ""},
		{"deref", []byte{0x77, 0x00, 0x06}, nil, 0x1122334455667788, ""},
		{"deref_size 4", []byte{0x77, 0x00, 0x94, 0x04}, nil, 0x55667788, ""},
		{"dup plus", []byte{0x33, 0x12, 0x22}, nil, 6, ""},
		{"drop", []byte{0x31, 0x32, 0x13}, nil, 1, ""},
		{"over", []byte{0x31, 0x32, 0x14}, nil, 1, ""},
		{"pick", []byte{0x31, 0x32, 0x33, 0x15, 0x02}, nil, 1, ""},
		{"swap minus", []byte{0x31, 0x35, 0x16, 0x1c}, nil, 4, ""},
		{"rot", []byte{0x31, 0x32, 0x33, 0x17, 0x13, 0x13}, nil, 3, ""},
		{"abs", []byte{0x11, 0x7b, 0x19}, nil, 5, ""},
		{"and", []byte{0x3f, 0x36, 0x1a}, nil, 6, ""},
		{"div signed", []byte{0x11, 0x79, 0x32, 0x1b}, nil, neg(3), ""},
		{"div by -1", []byte{0x35, 0x11, 0x7f, 0x1b}, nil, neg(5), ""},
		{"mod", []byte{0x37, 0x33, 0x1d}, nil, 1, ""},
		{"mul", []byte{0x37, 0x33, 0x1e}, nil, 21, ""},
		{"neg", []byte{0x35, 0x1f}, nil, neg(5), ""},
		{"not", []byte{0x30, 0x20}, nil, ^uint64(0), ""},
		{"or", []byte{0x31, 0x32, 0x21}, nil, 3, ""},
		{"shl", []byte{0x31, 0x34, 0x24}, nil, 16, ""},
		{"shl 64", []byte{0x31, 0x08, 0x40, 0x24}, nil, 0, ""},
		{"shr", []byte{0x11, 0x70, 0x31, 0x25}, nil, 0x7ffffffffffffff8, ""},
		{"shra", []byte{0x11, 0x70, 0x31, 0x26}, nil, ^uint64(7), ""},
		{"xor", []byte{0x33, 0x31, 0x27}, nil, 2, ""},
		{"lt", []byte{0x11, 0x7f, 0x31, 0x2d}, nil, 1, ""},
		{"le", []byte{0x31, 0x31, 0x2c}, nil, 1, ""},
		{"gt", []byte{0x31, 0x11, 0x7f, 0x2b}, nil, 1, ""},
		{"ge", []byte{0x30, 0x31, 0x2a}, nil, 0, ""},
		{"eq", []byte{0x32, 0x32, 0x29}, nil, 1, ""},
		{"ne", []byte{0x32, 0x32, 0x2e}, nil, 0, ""},
		// lit1; bra +1; lit5; lit7  -> branch taken, skips lit5
		{"bra taken", []byte{0x31, 0x28, 0x01, 0x00, 0x35, 0x37, 0x22}, []uint64{0}, 7, ""},
		{"skip", []byte{0x2f, 0x01, 0x00, 0x35, 0x37}, nil, 7, ""},
		{"nop", []byte{0x96, 0x31}, nil, 1, ""},
		{"underflow", []byte{0x22}, nil, 0, "stack underflow"},
		{"empty", []byte{}, nil, 0, "empty stack"},
		{"div zero", []byte{0x31, 0x30, 0x1b}, nil, 0, "division by zero"},
		{"mod zero", []byte{0x31, 0x30, 0x1d}, nil, 0, "division by zero"},
		{"infinite loop", []byte{0x2f, 0xfd, 0xff}, nil, 0, "step limit"},
		{"branch out of range", []byte{0x2f, 0x10, 0x00}, nil, 0, "out of range"},
		{"truncated", []byte{0x0e, 1, 2}, nil, 0, "truncated"},
		{"register location", []byte{0x50}, nil, 0, "not allowed"},
		{"unsupported", []byte{0xe0}, nil, 0, "unsupported"},
		{"bad deref size", []byte{0x77, 0x00, 0x94, 0x03}, nil, 0, "deref size"},
		{"overflow", func() []byte {
			b := make([]byte, maxExprStack+1)
			for i := range b {
				b[i] = 0x30
			}
			return b
		}(), nil, 0, "stack overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Eval(tc.expr, env, tc.push)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Eval = %#x, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Eval = %#x, %v; want %#x", got, err, tc.want)
			}
		})
	}
}

func TestEvalFailures(t *testing.T) {
	env := &testEnv{regs: map[uint16]uint64{7: 0x2000}}
	_, err := Eval([]byte{0x77, 0x00, 0x06}, env, nil)
	if !errors.Is(err, ErrMemory) {
		t.Errorf("unreadable memory: %v, want ErrMemory", err)
	}
	_, err = Eval([]byte{0x73, 0x00}, env, nil)
	if !errors.Is(err, ErrRegister) {
		t.Errorf("missing register: %v, want ErrRegister", err)
	}
	var ee *ExprError
	if !errors.As(err, &ee) || ee.Op != 0x73 || ee.Offset != 0 {
		t.Errorf("error does not name the op: %#v", err)
	}
}

func TestEvalAllocs(t *testing.T) {
	env := &testEnv{regs: map[uint16]uint64{7: 0x2000, 16: 0x1234}}
	plt := []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
	push := []uint64{1}
	if n := testing.AllocsPerRun(100, func() { Eval(plt, env, push) }); n != 0 {
		t.Errorf("Eval allocates %v times", n)
	}
}

func neg(v uint64) uint64 { return -v }
