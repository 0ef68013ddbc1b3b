package shim

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayoutMatchesABI compiles a program that prints abi.h's offsets
// and sizes with the C compiler (the independent source of the layout)
// and compares them with this package's constants.
func TestLayoutMatchesABI(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc): the layout is checked against abi.h by compiling it")
	}
	dir := t.TempDir()
	src := `#include <stdio.h>
#include <stddef.h>
#include "abi.h"
#define O(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
#define S(s) printf("sizeof." #s " %zu\n", sizeof(struct s))
int main(void) {
	O(fl_ctrl, magic); O(fl_ctrl, version); O(fl_ctrl, nslots); O(fl_ctrl, ring_bytes);
	O(fl_ctrl, stack_size); O(fl_ctrl, stack_every); O(fl_ctrl, stack_min); O(fl_ctrl, words);
	O(fl_ctrl, glibc); O(fl_ctrl, wake); O(fl_ctrl, sleeping); O(fl_ctrl, detached);
	O(fl_ctrl, abandoned); O(fl_ctrl, abandoned_time); O(fl_ctrl, wait_ns); O(fl_ctrl, unrecorded);
	O(fl_ctrl, slots_full); O(fl_ctrl, slot_state);
	O(fl_ctrl, tsc); O(fl_ctrl, tsc_jumps); O(fl_ctrl, tsc_jump_time); O(fl_ctrl, map_calls);
	O(fl_ring, head); O(fl_ring, busy); O(fl_ring, pid); O(fl_ring, tid); O(fl_ring, waiting);
	O(fl_ring, nested); O(fl_ring, waits); O(fl_ring, clock_reads); O(fl_ring, interrupted); O(fl_ring, tail); O(fl_ring, tail_seq);
	S(fl_rec); S(fl_entry); S(fl_regs); S(fl_return); S(fl_free); S(fl_call); S(fl_sys); S(fl_ctrl); S(fl_ring);
	O(fl_sys, ret);
	O(fl_call, ip); O(fl_call, ptr); O(fl_call, hdr); O(fl_call, ret_ip); O(fl_call, entry_time); O(fl_call, args); O(fl_call, sp);
	O(fl_return, ptr); O(fl_return, hdr); O(fl_return, ret_ip);
	printf("FL_MAGIC %u\nFL_VERSION %u\nFL_CTRL_BYTES %u\nFL_MAX_SLOTS %u\nFL_RING_HDR %u\nFL_MAX_WORDS %u\nFL_MAX_STACK %u\n",
		FL_MAGIC, FL_VERSION, FL_CTRL_BYTES, FL_MAX_SLOTS, FL_RING_HDR, FL_MAX_WORDS, FL_MAX_STACK);
	printf("FL_FN_FREE %d\nFL_FN_PVALLOC %d\nFL_NFN %d\nFL_ENTRY %d\nFL_RETURN %d\nFL_FREE %d\nFL_CALL %d\nFL_SYS %d\n",
		FL_FN_FREE, FL_FN_PVALLOC, FL_NFN, FL_ENTRY, FL_RETURN, FL_FREE, FL_CALL, FL_SYS);
	printf("FL_SYS_MMAP %d\nFL_SYS_MUNMAP %d\nFL_SYS_MREMAP %d\nFL_SYS_MADVISE %d\nFL_SYS_BRK %d\nFL_NSYS %d\n",
		FL_SYS_MMAP, FL_SYS_MUNMAP, FL_SYS_MREMAP, FL_SYS_MADVISE, FL_SYS_BRK, FL_NSYS);
	printf("FL_F_STACK_BIG %d\nFL_F_STACK_SMALL %d\nFL_F_SHORT %d\n", FL_F_STACK_BIG, FL_F_STACK_SMALL, FL_F_SHORT);
	printf("FL_BUSY_NO %d\nFL_BUSY_RECORD %d\nFL_BUSY_CALL %d\n", FL_BUSY_NO, FL_BUSY_RECORD, FL_BUSY_CALL);
	return 0;
}
`
	if err := os.WriteFile(filepath.Join(dir, "layout.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("csrc")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(cc, "-I", abs, "-o", bin, filepath.Join(dir, "layout.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		got[k] = n
	}
	want := map[string]int{
		"fl_ctrl.magic": offMagic, "fl_ctrl.version": offVersion, "fl_ctrl.nslots": offNSlots,
		"fl_ctrl.ring_bytes": offRingBytes, "fl_ctrl.stack_size": offStackSize, "fl_ctrl.stack_every": offStackEvery,
		"fl_ctrl.stack_min": offStackMin, "fl_ctrl.words": offWords, "fl_ctrl.glibc": offGlibc,
		"fl_ctrl.wake": offWake, "fl_ctrl.sleeping": offSleeping, "fl_ctrl.detached": offDetached,
		"fl_ctrl.abandoned": offAbandoned, "fl_ctrl.abandoned_time": offAbandonedTime, "fl_ctrl.wait_ns": offWaitNs,
		"fl_ctrl.unrecorded": offUnrecorded, "fl_ctrl.slots_full": offSlotsFull, "fl_ctrl.slot_state": offSlotState,
		"fl_ctrl.tsc": offTSC, "fl_ctrl.tsc_jumps": offTSCJumps, "fl_ctrl.tsc_jump_time": offTSCJumpTime, "fl_ctrl.map_calls": offMapCalls,
		"fl_ring.head": offHead, "fl_ring.busy": offBusy, "fl_ring.pid": offPid, "fl_ring.tid": offTid,
		"fl_ring.waiting": offWaiting, "fl_ring.nested": offNested, "fl_ring.waits": offWaits, "fl_ring.clock_reads": offClockReads, "fl_ring.interrupted": offInterrupted,
		"fl_ring.tail": offTail, "fl_ring.tail_seq": offTailSeq,
		"sizeof.fl_rec": RecHeader, "sizeof.fl_entry": EntryFixed, "sizeof.fl_regs": RegsBytes,
		"sizeof.fl_return": ReturnSize, "sizeof.fl_free": FreeSize, "sizeof.fl_call": CallSize,
		"sizeof.fl_sys": SysSize, "fl_sys.ret": 40,
		// A whole call's return fields where a return has them (Ptr, Hdr,
		// RetIP read both), then its own (EntryTime, CallArg, CallSP).
		"fl_return.ptr": 8, "fl_return.hdr": 16, "fl_return.ret_ip": 24,
		"fl_call.ip": 0, "fl_call.ptr": 8, "fl_call.hdr": 16, "fl_call.ret_ip": 24,
		"fl_call.entry_time": 32, "fl_call.args": 40, "fl_call.sp": 56,
		"FL_MAGIC": Magic, "FL_VERSION": Version, "FL_CTRL_BYTES": CtrlBytes, "FL_MAX_SLOTS": MaxSlots,
		"FL_RING_HDR": RingHeader, "FL_MAX_WORDS": MaxWords, "FL_MAX_STACK": MaxStack,
		"FL_FN_FREE": int(FuncFree), "FL_FN_PVALLOC": int(FuncPvalloc), "FL_NFN": int(NumCFuncs),
		"FL_ENTRY": KindEntry, "FL_RETURN": KindReturn, "FL_FREE": KindFree, "FL_CALL": KindCall, "FL_SYS": KindSys,
		"FL_SYS_MMAP": int(SysMmap), "FL_SYS_MUNMAP": int(SysMunmap), "FL_SYS_MREMAP": int(SysMremap),
		"FL_SYS_MADVISE": int(SysMadvise), "FL_SYS_BRK": int(SysBrk), "FL_NSYS": int(NumSys),
		"FL_BUSY_NO": busyNo, "FL_BUSY_RECORD": busyRecord, "FL_BUSY_CALL": busyCall,
		"FL_F_STACK_BIG": FlagStackBig, "FL_F_STACK_SMALL": FlagStackSmall, "FL_F_SHORT": FlagShort,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: abi.h says %d (present %v), shim.go %d", k, g, ok, w)
		}
	}
	if got["sizeof.fl_ctrl"] > CtrlBytes || got["sizeof.fl_ring"] > RingHeader {
		t.Errorf("control block %d bytes (room %d), ring header %d (room %d)", got["sizeof.fl_ctrl"], CtrlBytes, got["sizeof.fl_ring"], RingHeader)
	}
}

// TestObjectMatchesSource rebuilds the shim with csrc/build.sh --check:
// the embedded object is what its source builds to. Only the compiler that
// built it (csrc/shim.gcc) gives the same bytes; with another the test
// skips, saying which.
func TestObjectMatchesSource(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the embedded shim is checked against its source by rebuilding it")
	}
	built, err := os.ReadFile("csrc/shim.gcc")
	if err != nil {
		t.Fatalf("committed fixture missing: %v", err)
	}
	out, err := exec.Command("gcc", "--version").Output()
	if err != nil {
		t.Fatalf("gcc --version: %v", err)
	}
	have, _, _ := strings.Cut(string(out), "\n")
	if want := strings.TrimSpace(string(built)); have != want {
		t.Skipf("the embedded shim was built by %q and this machine has %q, which builds other bytes: the check needs that compiler", want, have)
	}
	if out, err := exec.Command("sh", "csrc/build.sh", "--check").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(Object) < 1024 || !bytes.HasPrefix(Object, []byte("\x7fELF")) {
		t.Fatalf("embedded object: %d bytes, not an ELF file", len(Object))
	}
}
