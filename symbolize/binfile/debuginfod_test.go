package binfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// debuginfodServer is a real debuginfod (elfutils; Debian's debuginfod
// package) serving dir on 127.0.0.1, stopped by the test's cleanup. Its
// verbose log lists every request it answers.
type debuginfodServer struct {
	url string
	mu  sync.Mutex
	log bytes.Buffer
}

func (s *debuginfodServer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Write(p)
}

// settled returns the number of requests for buildID once the log has
// stopped growing for a while: debuginfod logs a request after answering
// it, on its own thread.
func (s *debuginfodServer) settled(buildID string) int {
	n := s.requests(buildID)
	for quiet := 0; quiet < 5; quiet++ {
		time.Sleep(100 * time.Millisecond)
		if m := s.requests(buildID); m != n {
			n, quiet = m, 0
		}
	}
	return n
}

// requests counts the log's lines that name buildID: one per request.
func (s *debuginfodServer) requests(buildID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(l, "/buildid/"+buildID) {
			n++
		}
	}
	return n
}

func startDebuginfod(t *testing.T, dir string) *debuginfodServer {
	t.Helper()
	bin, err := exec.LookPath("debuginfod")
	if err != nil {
		t.Skip("debuginfod is not installed (Debian: apt-get install debuginfod); skipping the test against a real server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &debuginfodServer{url: "http://127.0.0.1:" + strconv.Itoa(port)}
	cmd := exec.Command(bin, "-F", "-p", strconv.Itoa(port), "-d", filepath.Join(t.TempDir(), "db.sqlite"), "-t", "0", "-g", "0", "-v", dir)
	cmd.Stdout, cmd.Stderr = s, s
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return s
}

// waitIndexed waits until the server answers for buildID (its first scan
// is asynchronous).
func (s *debuginfodServer) waitIndexed(t *testing.T, buildID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.url + "/buildid/" + buildID + "/debuginfo") // GET only: it refuses HEAD
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Fatalf("debuginfod did not index %s in 30 s; its log:\n%s", buildID, s.log.String())
}

// TestDebuginfodRealServer builds a program, splits its debug info off
// (objcopy --only-keep-debug, then --strip-all), serves only the debug
// file from a real debuginfod, and opens the stripped binary: without
// DEBUGINFOD_URLS nothing is asked of the server (its log shows no
// request) and frames have no file:line; with it, the debug file is
// fetched once into the client cache and main is named with the file and
// line addr2line gives from the unstripped build.
func TestDebuginfodRealServer(t *testing.T) {
	for _, tool := range []string{"gcc", "objcopy", "nm", "addr2line"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	work, srv, cache := t.TempDir(), t.TempDir(), t.TempDir()
	src, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(work, "prog")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("gcc", "-O2", "-g", "-ffile-prefix-map="+src+"=/fixture", "-Wl,--build-id=sha1", "-o", prog,
		filepath.Join(src, "inline.c"), filepath.Join(src, "inline2.c"))
	run("objcopy", "--only-keep-debug", prog, filepath.Join(srv, "prog.debug"))
	stripped := filepath.Join(work, "prog.stripped")
	run("objcopy", "--strip-all", prog, stripped)

	id, err := FileBuildID(stripped)
	if err != nil || len(id) == 0 {
		t.Fatalf("build ID of %s: %x %v", stripped, id, err)
	}
	bid := fmt.Sprintf("%x", id)
	var mainAddr uint64
	for _, l := range strings.Split(run("nm", prog), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[2] == "main" {
			mainAddr, _ = strconv.ParseUint(f[0], 16, 64)
		}
	}
	if mainAddr == 0 {
		t.Fatal("nm: no main")
	}
	want := strings.TrimSpace(run("addr2line", "-e", prog, strconv.FormatUint(mainAddr, 16)))

	s := startDebuginfod(t, srv)
	s.waitIndexed(t, bid)
	before := s.settled(bid)

	env := map[string]string{"HOME": work, "DEBUGINFOD_CACHE_PATH": cache}
	getenv := func(k string) string { return env[k] }
	open := func() *Binary {
		t.Helper()
		l := NewLocator("", getenv)
		l.DebugDirs = nil // this machine's /usr/lib/debug has nothing to do with it
		b, err := l.Open(stripped, bid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}

	// No URL: no request, no file:line.
	b := open()
	if f := b.Symbolize(mainAddr, nil); f[len(f)-1].Line != 0 {
		t.Errorf("without debuginfod main is named %+v", f[len(f)-1])
	}
	if n := s.settled(bid); n != before {
		t.Errorf("without DEBUGINFOD_URLS the server saw %d requests for %s", n-before, bid)
	}

	// With the URL: fetched once, named as addr2line names it.
	env["DEBUGINFOD_URLS"] = s.url
	b = open()
	if b.DebugFile != filepath.Join(cache, bid, "debuginfo") {
		t.Errorf("debug file %q, want the client cache's", b.DebugFile)
	}
	f := b.Symbolize(mainAddr, nil)
	got := fmt.Sprintf("%s:%d", f[len(f)-1].File, f[len(f)-1].Line)
	if got != want {
		t.Errorf("main named %s, addr2line says %s", got, want)
	}
	if n := s.settled(bid); n != before+1 {
		t.Errorf("fetching: the server saw %d requests, want 1", n-before)
	}
	open() // from the cache now
	if n := s.settled(bid); n != before+1 {
		t.Errorf("a second open asked the server again (%d requests)", n-before)
	}
}

// TestDebuginfodBounds: a server's 404 is "not on any server"; a file
// larger than MaxBytes, or one that stalls, is not kept.
func TestDebuginfodBounds(t *testing.T) {
	s := startTestServer(t)
	cache := t.TempDir()
	const bid = "0123456789abcdef0123456789abcdef01234567"
	d := &Debuginfod{URLs: []string{s + "/missing"}, Timeout: time.Second, MaxBytes: 1000}
	if _, err := d.Fetch(bid, cache); !errors.Is(err, ErrNotOnServer) {
		t.Errorf("404: %v", err)
	}
	d.URLs = []string{s + "/big"}
	if _, err := d.Fetch(bid, cache); err == nil || !strings.Contains(err.Error(), "DEBUGINFOD_MAXSIZE") {
		t.Errorf("2000 bytes with a bound of 1000: %v", err)
	}
	d.URLs = []string{s + "/stall"}
	if _, err := d.Fetch(bid, cache); err == nil || !strings.Contains(err.Error(), "DEBUGINFOD_TIMEOUT") {
		t.Errorf("stalled: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, bid)); len(ents) != 0 {
		t.Errorf("left in the cache: %v", ents)
	}
	var calls []int64
	d = &Debuginfod{URLs: []string{s + "/ok"}, Progress: func(_ string, done, total int64) { calls = append(calls, done, total) }}
	p, err := d.Fetch(bid, cache)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); len(b) != 500 || len(calls) < 2 || calls[len(calls)-2] != 500 || calls[len(calls)-1] != 500 {
		t.Errorf("ok: %d bytes, progress %v", len(b), calls)
	}
	if newDebuginfod(func(string) string { return "" }) != nil {
		t.Error("a client without DEBUGINFOD_URLS")
	}
}

func startTestServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/big/", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 2000)) })
	mux.HandleFunc("/ok/", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 500)) })
	mux.HandleFunc("/stall/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}
