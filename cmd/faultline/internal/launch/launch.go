// Package launch is the launcher faultline record starts the recorded
// command with where its in-process shim cannot be the launcher (the
// shim's launcher keeps this protocol; recorder/shim/csrc/launch.c):
// faultline re-executes itself with Env set, and this package's init
// waits on a pipe (file descriptor FD) until every event is open, then
// execs the command. The events are opened on the launcher's pid
// with enable_on_exec and inherit, so they switch on exactly at the exec
// and follow every thread and child the command makes. A Go program cannot
// fork without exec, hence the re-exec.
//
// The package depends on nothing that os and os/signal (for the guard,
// guard.go) do not, so that the Go runtime runs its init right after
// theirs, before the packages the rest of faultline needs (protobuf,
// pprof, grpc, compression tables: a few milliseconds of init here), and
// on the main thread: exec from another thread would hand the pid to a
// new task and leave the events on the dead one.
package launch

import (
	"os"
	"syscall"
)

// Env marks a launcher process; its value is Mode or ModeNoTHP.
const Env = "FAULTLINE_RECORD_LAUNCH"

// The values of Env.
const (
	Mode      = "1"
	ModeNoTHP = "nothp" // transparent huge pages off for the command
)

// PreloadEnv carries the LD_PRELOAD value the command is to run with: set
// only at the exec, so the launcher (faultline itself) never loads it.
const PreloadEnv = "FAULTLINE_RECORD_PRELOAD"

// FD is the pipe the launcher waits on (the first of ExtraFiles).
const FD = 3

// prctl(2) options, as <linux/prctl.h> numbers them.
const (
	prSetPdeathsig  = 1
	prSetTHPDisable = 41
)

func init() {
	mode, ok := syscall.Getenv(Env)
	if _, guard := syscall.Getenv(GuardEnv); !ok || guard {
		return // not a launcher, or the guard that starts one (guard.go)
	}
	os.Exit(run(mode, os.Args[1:], syscall.Environ()))
}

// run waits for the go byte, then execs args[0] with argv args[1:] and
// environment env (less Env; PreloadEnv becomes LD_PRELOAD). It returns
// only on failure: 127 as a shell would.
func run(mode string, args, env []string) int {
	// The command must not outlive record (kill -9, a crash): the kernel
	// sends SIGKILL when the thread that forked us exits, and the setting
	// survives the exec below (not for set-uid or file-capability
	// programs). The recorder keeps that thread alive while we run. Set
	// before the gate is read: if record is already gone the read sees
	// EOF.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0); e != 0 {
		os.Stderr.WriteString("faultline: PR_SET_PDEATHSIG: " + e.Error() + "\n")
		return 127
	}
	if _, ok := syscall.Getenv(ExitsEnv); ok {
		armExits()
	}
	var b [1]byte
	n, _ := syscall.Read(FD, b[:])
	syscall.Close(FD)
	if n != 1 || len(args) < 2 {
		// The recorder went away before arming (error or Ctrl-C): do not
		// run the command unrecorded.
		return 127
	}
	if mode == ModeNoTHP {
		// Inherited by children and kept across execve (prctl(2),
		// PR_SET_THP_DISABLE).
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTHPDisable, 1, 0); e != 0 {
			os.Stderr.WriteString("faultline: disabling transparent huge pages: " + e.Error() + "\n")
			return 127
		}
	}
	err := syscall.Exec(args[0], args[1:], commandEnv(env))
	os.Stderr.WriteString("faultline: cannot run " + args[0] + ": " + err.Error() + "\n")
	return 127
}

// commandEnv is the command's environment: env without Env, PreloadEnv
// and ExitsEnv, and with PreloadEnv's value as LD_PRELOAD when it is set.
func commandEnv(env []string) []string {
	preload, have := "", false
	for _, e := range env {
		if hasPrefix(e, PreloadEnv+"=") {
			preload, have = e[len(PreloadEnv)+1:], true
		}
	}
	out := make([]string, 0, len(env))
	for _, e := range env {
		if hasPrefix(e, Env+"=") || hasPrefix(e, PreloadEnv+"=") || hasPrefix(e, ExitsEnv+"=") || have && hasPrefix(e, "LD_PRELOAD=") {
			continue
		}
		out = append(out, e)
	}
	if have {
		out = append(out, "LD_PRELOAD="+preload)
	}
	return out
}

// hasPrefix is strings.HasPrefix: importing strings would hold this
// package's init back behind some fifty others (GODEBUG=inittrace).
func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
