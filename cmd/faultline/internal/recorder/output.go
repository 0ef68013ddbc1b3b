package recorder

import (
	"errors"
	"io"

	"github.com/faultline/faultline/perfdata"
)

// newWriter starts the recording's perfdata.Writer in the mode cfg asks
// for: pipe mode on any stream, file mode on a seekable target.
func newWriter(cfg *Config, out io.Writer, events []perfdata.WriterEvent, head *perfdata.WriterFeatures) (*perfdata.Writer, error) {
	// KeepUp: a recorder that falls behind holds up the program (the
	// shim's rings fill) or loses events (the kernel's), so what the
	// compressor cannot keep up with is written uncompressed.
	opts := &perfdata.WriterOptions{Compress: cfg.Compress, KeepUp: true}
	if cfg.InProcess {
		// The in-process method writes every call as it happens, several
		// times the bytes a second of the uprobe method makes: zstd's
		// fastest level keeps the recorder ahead of the program (about
		// twice the speed of level 3 for a few percent more bytes).
		opts.Level = 1
	}
	if cfg.Pipe {
		return perfdata.NewPipeWriter(out, events, head, opts)
	}
	t, ok := out.(perfdata.WriterTarget)
	if !ok {
		return nil, errors.New("a file-mode recording needs a seekable output; write pipe mode (Config.Pipe) to a stream")
	}
	// The formats and names go near the start too (pipe mode has them
	// there anyway), so that a recording cut short still decodes.
	opts.Early, opts.TracingData = true, head.TracingData
	return perfdata.NewWriter(t, events, opts)
}
