package launch

import (
	"runtime"
	"syscall"
	"unsafe"
)

// ExitsEnv, when set in a launcher's environment, asks it to stop every
// process of the command as it calls exit_group, for the recorder to read
// its memory while it still exists: the launcher installs a seccomp filter
// that turns exit_group into a user notification (seccomp_unotify(2)),
// inherited by every child and kept across execve, and sends the
// notification descriptor over the socket at descriptor ExitsFD before it
// waits on FD. The guard receives it and answers each notification with
// SECCOMP_USER_NOTIF_FLAG_CONTINUE once the recorder has read the process,
// or after ExitWait (exitrelay.go): the call then runs as it would have. No ptrace is involved, and a program that
// dies by a signal is not stopped. Installing the filter needs
// CAP_SYS_ADMIN (no_new_privs is not set: set-uid programs keep working);
// without it the launcher goes on without one and closes the socket.
const ExitsEnv = "FAULTLINE_RECORD_EXITS"

// ExitsFD is the socket the notification descriptor is sent over (the
// second of ExtraFiles).
const ExitsFD = 4

// The seccomp ABI, as seccomp(2) and seccomp_unotify(2) give it: the
// filter's return values, its classic-BPF opcodes, struct seccomp_data's
// layout, the audit architectures and the syscall numbers.
const (
	seccompSetModeFilter = 1
	seccompFlagNewListen = 1 << 3
	seccompRetAllow      = 0x7fff0000
	seccompRetUserNotif  = 0x7fc00000
	bpfLdWAbs            = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK              = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK              = 0x06 // BPF_RET | BPF_K
	seccompDataNr        = 0    // offsetof(struct seccomp_data, nr)
	seccompDataArch      = 4    // offsetof(struct seccomp_data, arch)
	auditArchX8664       = 0xc000003e
	auditArchAarch64     = 0xc00000b7
	sysSeccompAmd64      = 317
	sysSeccompArm64      = 277
	sysExitGroupAmd64    = 231
	sysExitGroupArm64    = 94
)

// exitFilter returns the filter that stops exit_group of this
// architecture, and the seccomp syscall's number; ok is false on an
// architecture it does not know.
func exitFilter() (prog []syscall.SockFilter, sysSeccomp uintptr, ok bool) {
	var arch, nr uint32
	switch runtime.GOARCH {
	case "amd64":
		arch, nr, sysSeccomp = auditArchX8664, sysExitGroupAmd64, sysSeccompAmd64
	case "arm64":
		arch, nr, sysSeccomp = auditArchAarch64, sysExitGroupArm64, sysSeccompArm64
	default:
		return nil, 0, false
	}
	return []syscall.SockFilter{
		{Code: bpfLdWAbs, K: seccompDataArch},
		{Code: bpfJeqK, Jt: 0, Jf: 3, K: arch}, // another ABI (32-bit): allow
		{Code: bpfLdWAbs, K: seccompDataNr},
		{Code: bpfJeqK, Jt: 0, Jf: 1, K: nr},
		{Code: bpfRetK, K: seccompRetUserNotif},
		{Code: bpfRetK, K: seccompRetAllow},
	}, sysSeccomp, true
}

// armExits installs the exit filter and sends its notification
// descriptor over ExitsFD, which it closes; on any failure the recorder
// receives nothing and the command runs without the filter.
func armExits() {
	defer syscall.Close(ExitsFD)
	prog, sysSeccomp, ok := exitFilter()
	if !ok {
		return
	}
	fprog := syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, seccompFlagNewListen, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return
	}
	syscall.Sendmsg(ExitsFD, []byte{1}, syscall.UnixRights(int(fd)), nil, 0)
	syscall.Close(int(fd))
}
