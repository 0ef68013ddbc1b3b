package symbolize

// The external tests (package symbolize_test) drive the pipeline's parts
// and wait for background loading through these names, which are not API.

// Prewalker is prewalker, for the external tests.
type Prewalker = prewalker

// NewPrewalker is newPrewalker, for the external tests.
func (s *Session) NewPrewalker(n int) (*prewalker, []*walker) { return s.newPrewalker(n) }

// WaitLoaded is waitLoaded, for the external tests' measurements.
func (s *Table) WaitLoaded() { s.waitLoaded() }
