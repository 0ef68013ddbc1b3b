package shim

import (
	"bytes"
	"os"
	"runtime"
	"strings"
)

// TSCUsable reports whether the shim may stamp calls from the CPU's
// time-stamp counter (Options.TSC) on this machine, and if not, why. It
// may where the kernel's CLOCK_MONOTONIC is itself read from the TSC (the
// clocksource is tsc, or a hypervisor's clock scaled from it: kvm-clock,
// Hyper-V's TSC page) and the counter runs at one rate throughout, idle
// states included (the CPU flags constant_tsc and nonstop_tsc): then
// CLOCK_MONOTONIC is the TSC scaled, and a conversion measured over a few
// microseconds holds between them. The shim still checks each thread's
// readings against CLOCK_MONOTONIC and stops using the TSC when they
// disagree (Region.TSCJumps).
func TSCUsable() (bool, string) {
	if runtime.GOARCH != "amd64" {
		return false, "not x86-64"
	}
	src, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return false, "no clocksource in sysfs"
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false, "no /proc/cpuinfo"
	}
	return tscUsable(strings.TrimSpace(string(src)), cpuinfo)
}

// tscClocksources are the clocksources whose CLOCK_MONOTONIC is the TSC
// scaled.
var tscClocksources = map[string]bool{"tsc": true, "kvm-clock": true, "hyperv_clocksource_tsc_page": true}

func tscUsable(clocksource string, cpuinfo []byte) (bool, string) {
	if !tscClocksources[clocksource] {
		return false, "the kernel's clock is " + clocksource + ", not read from the TSC"
	}
	// Every processor's flags line.
	seen := false
	for line := range bytes.Lines(cpuinfo) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(k)) != "flags" {
			continue
		}
		seen = true
		flags := map[string]bool{}
		for _, f := range bytes.Fields(v) {
			flags[string(f)] = true
		}
		for _, need := range []string{"constant_tsc", "nonstop_tsc"} {
			if !flags[need] {
				return false, "the CPU lacks " + need
			}
		}
	}
	if !seen {
		return false, "no CPU flags in /proc/cpuinfo"
	}
	return true, ""
}
