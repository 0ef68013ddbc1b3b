package recorder

import (
	"errors"
	"io"

	"github.com/faultline/faultline/perfdata"
)

// newWriter starts the recording's perfdata.Writer in the mode cfg asks
// for: pipe mode on any stream, file mode on a seekable target.
func newWriter(cfg *Config, out io.Writer, events []perfdata.WriterEvent, head *perfdata.WriterFeatures) (*perfdata.Writer, error) {
	// KeepUp: a recorder that falls behind loses events (the kernel's
	// rings overflow), so what the compressor cannot keep up with is
	// written uncompressed; not in-process, where a full ring holds the
	// program up but loses nothing (drainInproc).
	opts := &perfdata.WriterOptions{Compress: cfg.Compress, KeepUp: !cfg.InProcess}
	if cfg.InProcess {
		// The in-process method writes every call as it happens, several
		// times the bytes a second of the uprobe method makes: zstd's
		// fastest level, about twice as fast as level 3 for 10-15% more
		// bytes (and still smaller than the uprobe method's files, whose
		// 8 KiB stack copies compress well).
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
