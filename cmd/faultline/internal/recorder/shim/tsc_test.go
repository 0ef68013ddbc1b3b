package shim

import "testing"

func TestTSCUsable(t *testing.T) {
	both := []byte("processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n\nprocessor\t: 1\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n")
	oneLacks := []byte("processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n\nprocessor\t: 1\nflags\t\t: fpu tsc constant_tsc\n")
	for _, c := range []struct {
		src     string
		cpuinfo []byte
		want    bool
	}{
		{"tsc", both, true},
		{"kvm-clock", both, true},
		{"hyperv_clocksource_tsc_page", both, true},
		{"hpet", both, false},
		{"acpi_pm", both, false},
		{"tsc", oneLacks, false},
		{"tsc", []byte("processor\t: 0\n"), false},
	} {
		if got, why := tscUsable(c.src, c.cpuinfo); got != c.want {
			t.Errorf("clocksource %s, cpuinfo %q: %v (%s), want %v", c.src, c.cpuinfo, got, why, c.want)
		}
	}
	ok, why := TSCUsable()
	t.Logf("this machine: %v %s", ok, why)
}
