package analyze

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
)

// TestStackSizeAdvice: testdata/deepstack/default.data was recorded with
// faultline record's default 8 KiB stack copy below six frames of deep()
// (testdata/deepstack/src/deep.c), each holding a 4096-byte array, so no
// stack reaches the root; the summary names a --stack-size. sized.data is
// the same program recorded with that size (gen.sh took it from this
// summary): there at least 99% of the stacks reach the root.
func TestStackSizeAdvice(t *testing.T) {
	def := analyzeDir(t, "deepstack", "default", report.ByAlloc)
	var buf bytes.Buffer
	def.Summary.WriteText(&buf)
	m := regexp.MustCompile(`(\d+) stacks \(100\.0%\) stopped at the end of the copied stack: --stack-size (\d+) would have copied them up to their root frame \(the deepest needed (\d+) bytes\)`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatalf("the summary names no --stack-size for the stacks cut short:\n%s", buf.String())
	}
	size, _ := strconv.ParseUint(m[2], 10, 64)
	deepest, _ := strconv.ParseUint(m[3], 10, 64)
	// Six frames of 4096-byte arrays: more than 24576 bytes; the kernel
	// copies at most 65528, in multiples of 8.
	if u := def.Summary.Unwind; m[1] != strconv.FormatUint(u.Samples, 10) || u.Complete != 0 {
		t.Errorf("%s stacks cut short of %d, %d complete; want all of them cut short", m[1], u.Samples, u.Complete)
	}
	if deepest <= 6*4096 || size < deepest || size > 65528 || size%8 != 0 {
		t.Errorf("--stack-size %d for a deepest need of %d bytes: want a multiple of 8 from the need (> 24576) to 65528", size, deepest)
	}

	sized := analyzeDir(t, "deepstack", "sized", report.ByAlloc)
	r, err := perfdata.Open("../../testdata/deepstack/sized.data", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	used := uint32(0)
	for _, ev := range r.Events() {
		used = max(used, ev.Attr.SampleStackUser)
	}
	if uint64(used) != size {
		t.Fatalf("sized.data was recorded with a %d-byte stack copy, the summary now names %d: run testdata/deepstack/gen.sh again", used, size)
	}
	if u := sized.Summary.Unwind; u.Samples == 0 || float64(u.Complete) < 0.99*float64(u.Samples) {
		t.Errorf("with --stack-size %d: %d of %d stacks reached the root, want >= 99%%", size, u.Complete, u.Samples)
	}
	buf.Reset()
	sized.Summary.WriteText(&buf)
	if bytes.Contains(buf.Bytes(), []byte("--stack-size")) {
		t.Errorf("sized.data's summary still gives stack advice:\n%s", buf.String())
	}
}
