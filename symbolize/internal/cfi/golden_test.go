package cfi

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the readelf golden files in testdata")

// goldenFrames returns the committed readelf -wF output for a fixture,
// regenerating it with readelf under -update.
func goldenFrames(t *testing.T, bin, golden string) io.Reader {
	t.Helper()
	if *update {
		out, err := exec.Command("readelf", "--debug-dump=frames-interp", bin).Output()
		if err != nil && len(out) == 0 {
			t.Fatalf("readelf: %v", err)
		}
		data := out
		if strings.HasSuffix(golden, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(out)
			zw.Close()
			data = b.Bytes()
		}
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(out)
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(golden, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return bytes.NewReader(data)
}

// TestGoldenDebugFrame checks .debug_frame (and the crt .eh_frame) of a
// small committed binary against readelf's interpretation.
func TestGoldenDebugFrame(t *testing.T) {
	crossCheck(t, "testdata/frames", goldenFrames(t, "testdata/frames", "testdata/frames.readelf.txt"))
}

// TestGoldenStaticGlibc checks every row of a static glibc binary (the
// unwinder's fixture) against readelf's interpretation.
func TestGoldenStaticGlibc(t *testing.T) {
	const bin = "../../unwind/testdata/prog"
	crossCheck(t, bin, goldenFrames(t, bin, "testdata/prog.readelf.txt.gz"))
}
