package diff

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// editFixtures is testdata/diffedit (its gen.sh): profiles of three runs
// of src/ci.c (base1..3), of ten behaviour-preserving edits of it, and of
// the original and the "moved" edit with their table grown 4×.
const editFixtures = "../../testdata/diffedit"

var edits = []string{"top-comment", "top-lines", "removed", "in-function", "between", "reordered", "moved", "renamed", "locals", "helper"}

func loadEdit(t *testing.T, name string) *profile.Profile {
	t.Helper()
	p, err := load(filepath.Join(editFixtures, name+".pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiffEdits: every edit diffs to no regression and no unmatched site
// against one baseline and against three; the 4× table fails, alone,
// named make_table, by 3 MiB of pages (768 faults, give or take two for
// the heap's edges), whichever file make_table's neighbours moved to.
func TestDiffEdits(t *testing.T) {
	opts := Options{Metric: "faults", Threshold: 0.1, MinDelta: DefaultMinDelta("faults")}
	for _, bases := range [][]string{{"base1"}, {"base1", "base2", "base3"}} {
		for _, name := range append(edits, "grown", "moved-grown") {
			var bs []*profile.Profile
			for _, b := range bases {
				bs = append(bs, loadEdit(t, b))
			}
			r, err := CompareBases(bs, loadEdit(t, name), opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Unmatched != 0 {
				t.Errorf("%s against %v: %d unmatched sites: %+v", name, bases, r.Unmatched, r.Sites)
			}
			if !strings.HasSuffix(name, "grown") {
				if r.Regressed() {
					t.Errorf("%s against %v: %d regressions: %+v", name, bases, r.Regressions, r.Sites)
				}
				continue
			}
			s := r.Sites[0]
			if r.Regressions != 1 || !s.Regressed || !strings.HasPrefix(s.Name, "make_table ci.c:") || s.delta() < 766 || s.delta() > 770 {
				t.Errorf("%s against %v: %d regressions, top %+v; want 1, make_table by 768", name, bases, r.Regressions, s)
			}
		}
	}
}
