package binfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Fetcher gets a debug file by build ID from outside this machine.
type Fetcher interface {
	// Fetch stores the debug file of buildID (lowercase hex) as
	// cacheDir/<buildID>/debuginfo and returns that path. An error wraps
	// ErrNotOnServer when no server has it.
	Fetch(buildID, cacheDir string) (string, error)
}

// ErrNotOnServer is the Fetcher error for a build ID no server knows.
var ErrNotOnServer = errors.New("not on any debuginfod server")

// Debuginfod is a client of the debuginfod protocol
// (https://sourceware.org/elfutils/Debuginfod.html): GET
// URL/buildid/<id>/debuginfo from each server in turn, stored where
// elfutils' own client stores it, so each tool downloads a file once.
type Debuginfod struct {
	URLs []string // server base URLs, tried in order
	// Timeout bounds connecting, the wait for a response, and each wait
	// for more of the body (a stalled download), not the whole download.
	Timeout time.Duration
	// MaxBytes bounds one file; a larger one is not downloaded.
	MaxBytes int64
	// Progress, if set, is called as a download proceeds (total -1 when
	// the server does not say), and once with done == total at its end.
	Progress func(url string, done, total int64)
	// Client makes the requests; nil: one with Timeout's dial and
	// response-header bounds.
	Client *http.Client
}

// Defaults of elfutils' client (debuginfod-client.c): DEBUGINFOD_TIMEOUT
// 90 s; its DEBUGINFOD_MAXSIZE has no default, ours is 1 GiB.
const (
	DefaultDebuginfodTimeout  = 90 * time.Second
	DefaultDebuginfodMaxBytes = 1 << 30
)

// newDebuginfod returns a client for the servers in DEBUGINFOD_URLS
// (space-separated, as elfutils reads it), with DEBUGINFOD_TIMEOUT
// (seconds) and DEBUGINFOD_MAXSIZE (bytes) when set; nil when no URL is
// set, so that nothing is ever fetched unless the user asked for it.
func newDebuginfod(getenv func(string) string) *Debuginfod {
	urls := strings.Fields(getenv("DEBUGINFOD_URLS"))
	if len(urls) == 0 {
		return nil
	}
	d := &Debuginfod{Timeout: DefaultDebuginfodTimeout, MaxBytes: DefaultDebuginfodMaxBytes}
	for _, u := range urls {
		d.URLs = append(d.URLs, strings.TrimSuffix(u, "/"))
	}
	if n, err := strconv.Atoi(getenv("DEBUGINFOD_TIMEOUT")); err == nil && n > 0 {
		d.Timeout = time.Duration(n) * time.Second
	}
	if n, err := strconv.ParseInt(getenv("DEBUGINFOD_MAXSIZE"), 10, 64); err == nil && n > 0 {
		d.MaxBytes = n
	}
	return d
}

func (d *Debuginfod) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	t := d.Timeout
	if t <= 0 {
		t = DefaultDebuginfodTimeout
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: t}).DialContext,
		ResponseHeaderTimeout: t,
		TLSHandshakeTimeout:   t,
	}}
}

// Fetch implements Fetcher.
func (d *Debuginfod) Fetch(buildID, cacheDir string) (string, error) {
	if !validBuildID(buildID) {
		return "", fmt.Errorf("debuginfod: bad build ID %q", buildID)
	}
	var errs []error
	for _, base := range d.URLs {
		p, err := d.fetchFrom(base, buildID, cacheDir)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrNotOnServer) {
			return "", errors.Join(errs...)
		}
	}
	return "", fmt.Errorf("debuginfod: build ID %s: %w (%s)", buildID, ErrNotOnServer, strings.Join(d.URLs, " "))
}

// ServerError is a debuginfod server that did not answer.
type ServerError struct {
	URL string // the server
	Err error  // why: the request's error
}

func (e *ServerError) Error() string { return "debuginfod: " + e.Err.Error() }

// Unwrap returns the request's error.
func (e *ServerError) Unwrap() error { return e.Err }

func (d *Debuginfod) fetchFrom(base, buildID, cacheDir string) (string, error) {
	url := base + "/buildid/" + buildID + "/debuginfo"
	t := d.Timeout
	if t <= 0 {
		t = DefaultDebuginfodTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("debuginfod: %w", err)
	}
	resp, err := d.client().Do(req)
	if err != nil {
		return "", &ServerError{URL: base, Err: err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("debuginfod: %s: %w", url, ErrNotOnServer)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("debuginfod: %s: %s", url, resp.Status)
	}
	max := d.MaxBytes
	if max <= 0 {
		max = DefaultDebuginfodMaxBytes
	}
	if resp.ContentLength > max {
		return "", fmt.Errorf("debuginfod: %s: %d bytes, more than the %d allowed (raise DEBUGINFOD_MAXSIZE)", url, resp.ContentLength, max)
	}
	dir := filepath.Join(cacheDir, buildID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("debuginfod: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".debuginfo.*")
	if err != nil {
		return "", fmt.Errorf("debuginfod: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	// A stalled body ends the download after Timeout without data.
	stall := time.AfterFunc(t, cancel)
	defer stall.Stop()
	var done int64
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			stall.Reset(t)
			done += int64(n)
			if done > max {
				tmp.Close()
				return "", fmt.Errorf("debuginfod: %s: more than the %d bytes allowed (raise DEBUGINFOD_MAXSIZE)", url, max)
			}
			if _, err := tmp.Write(buf[:n]); err != nil {
				tmp.Close()
				return "", fmt.Errorf("debuginfod: %w", err)
			}
			if d.Progress != nil {
				d.Progress(url, done, resp.ContentLength)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			tmp.Close()
			if ctx.Err() != nil {
				return "", fmt.Errorf("debuginfod: %s: no data for %v after %d bytes (raise DEBUGINFOD_TIMEOUT)", url, t, done)
			}
			return "", fmt.Errorf("debuginfod: %s: %w", url, rerr)
		}
	}
	if resp.ContentLength >= 0 && done != resp.ContentLength {
		tmp.Close()
		return "", fmt.Errorf("debuginfod: %s: %d of %d bytes", url, done, resp.ContentLength)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("debuginfod: %w", err)
	}
	p := filepath.Join(dir, "debuginfo")
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("debuginfod: %w", err)
	}
	if d.Progress != nil {
		d.Progress(url, done, done)
	}
	return p, nil
}
