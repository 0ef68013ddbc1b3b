package launch

import (
	"slices"
	"testing"
)

func TestCommandEnv(t *testing.T) {
	for _, c := range []struct {
		env, want []string
	}{
		// No preload: only the marker goes.
		{[]string{"A=1", Env + "=1", "LD_PRELOAD=/u.so"}, []string{"A=1", "LD_PRELOAD=/u.so"}},
		// The carried value replaces the user's LD_PRELOAD (record puts
		// the user's into it), wherever either stands.
		{[]string{"LD_PRELOAD=/u.so", "A=1", PreloadEnv + "=/shim.so /u.so", Env + "=nothp"}, []string{"A=1", "LD_PRELOAD=/shim.so /u.so"}},
		{[]string{PreloadEnv + "=/shim.so", "B="}, []string{"B=", "LD_PRELOAD=/shim.so"}},
		// A name that merely starts like a marker stays.
		{[]string{Env + "X=1", "LD_PRELOADX=2"}, []string{Env + "X=1", "LD_PRELOADX=2"}},
	} {
		if got := commandEnv(c.env); !slices.Equal(got, c.want) {
			t.Errorf("commandEnv(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}
