package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/pyroscope"
	"github.com/google/pprof/profile"
	"github.com/spf13/pflag"
)

const pushHelp = `Usage: faultline push --url URL [--label NAME=VALUE]... PROFILE.pb.gz

Sends a profile written by 'faultline analyze' to Grafana Pyroscope, the
continuous-profiling store, through its push API
(push.v1.PusherService/Push, the protocol Grafana Alloy uses). The profile
goes as it is, with the labels:

  __name__       faultline: Grafana lists the profile types as
                 faultline:faults:count:faults:count, faultline:allocs:count:...
                 and faultline:alloc_space:bytes:...
  service_name   the profile's program (its main binary's name), or the
                 value of --label service_name=NAME
  --label        each NAME=VALUE given (e.g. commit=$GIT_SHA, branch=main)

To see it in Grafana: Explore (or Drilldown > Profiles), the Pyroscope data
source, profile type faultline:faults:count, service_name = the program; a
flame graph of the allocation stacks that took the page faults. Label
matchers ({commit="..."}) pick one push; Pyroscope sums pushes of a series
over the time range shown.

URL is the server's base address (http://localhost:4040 for a local
Pyroscope). For Grafana Cloud put the user and token in it:
https://USER:TOKEN@profiles-prod-NNN.grafana.net (shells keep history: read
the token from a variable).

'faultline analyze --push URL' analyzes and pushes in one step.

Example:

  faultline push --url http://localhost:4040 --label commit=$(git rev-parse --short HEAD) faults.pb.gz

Flags:
`

// pushFlags are the flags push and analyze --push share.
type pushFlags struct {
	url         string
	labels      []string
	timeout     time.Duration
	timeoutFlag string
}

// addPushFlags adds the push flags under the names given: push's --url,
// --label, --timeout; analyze's --push, --push-label, --push-timeout.
func addPushFlags(fs *pflag.FlagSet, urlFlag, labelFlag, timeoutFlag string) *pushFlags {
	p := &pushFlags{}
	fs.StringVar(&p.url, urlFlag, "", "the Pyroscope server's base `URL` (http://localhost:4040; https://USER:TOKEN@HOST for Grafana Cloud)")
	fs.StringArrayVar(&p.labels, labelFlag, nil, "add the label `NAME=VALUE` to the pushed profile (repeatable); service_name=NAME overrides the program's name")
	fs.DurationVar(&p.timeout, timeoutFlag, 30*time.Second, "give up pushing after `D`")
	p.timeoutFlag = timeoutFlag
	return p
}

// parse checks the labels before any work is done.
func (p *pushFlags) parse(cmd string) ([]pyroscope.Label, error) {
	var labels []pyroscope.Label
	for _, s := range p.labels {
		l, err := pyroscope.ParseLabel(s)
		if err != nil {
			return nil, usageError("%s: %v", cmd, err)
		}
		labels = append(labels, l)
	}
	if _, err := pyroscope.SeriesLabels("x", labels); err != nil {
		return nil, usageError("%s: %v", cmd, err)
	}
	if p.url != "" {
		if _, err := pyroscope.NewClient(http.DefaultClient, p.url); err != nil {
			return nil, usageError("%s: %v", cmd, err)
		}
	}
	if p.timeout <= 0 {
		return nil, usageError("%s: --%s must be positive", cmd, p.timeoutFlag)
	}
	return labels, nil
}

// push sends raw (p's gzipped bytes) and returns a line saying what went
// where.
func (p *pushFlags) push(raw []byte, prof *profile.Profile, labels []pyroscope.Label) (string, error) {
	series, err := pyroscope.SeriesLabels(serviceName(prof), labels)
	if err != nil {
		return "", err
	}
	c, err := pyroscope.NewClient(&http.Client{Timeout: p.timeout}, p.url)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if err := c.Push(ctx, raw, series); err != nil {
		return "", err
	}
	var kv []string
	for _, l := range series {
		kv = append(kv, fmt.Sprintf("%s=%q", l.Name, l.Value))
	}
	return fmt.Sprintf("pushed %d samples (%.1f KB) to %s as {%s}", len(prof.Sample), float64(len(raw))/1e3, c, strings.Join(kv, ", ")), nil
}

// serviceName is the profile's program: the file of its first mapping,
// which pprof takes for the main binary.
func serviceName(p *profile.Profile) string {
	if len(p.Mapping) > 0 && p.Mapping[0].File != "" {
		return filepath.Base(p.Mapping[0].File)
	}
	return "unknown"
}

func runPush(env *Env, args []string) error {
	fs := newFlagSet("push")
	pf := addPushFlags(fs, "url", "label", "timeout")
	quiet := fs.BoolP("quiet", "q", false, "print only errors")
	if done, err := parseFlags(env, fs, pushHelp, args); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("push: want one profile (PROFILE.pb.gz); see 'faultline push --help'")
	}
	if pf.url == "" {
		return usageError("push: --url is required: the Pyroscope server, e.g. --url http://localhost:4040")
	}
	labels, err := pf.parse("push")
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	raw, err := os.ReadFile(name)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("push: %v", err)}
	}
	prof, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("push: %s is not a pprof profile (%v); write one with 'faultline analyze -o %s'", name, err, name)}
	}
	line, err := pf.push(raw, prof, labels)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("push: %v", err)}
	}
	if !*quiet {
		fmt.Fprintf(env.Stdout, "faultline: %s: %s\n", name, line)
	}
	return nil
}
