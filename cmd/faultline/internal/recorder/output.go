package recorder

import (
	"errors"
	"io"

	"github.com/faultline/faultline/perfdata"
)

// newWriter starts the recording's perfdata.Writer in the mode cfg asks
// for (pipe mode on any stream, file mode on a seekable target), with the
// compression level and KeepUp the source asks for.
func newWriter(cfg *Config, tr sourceTraits, out io.Writer, events []perfdata.WriterEvent, head *perfdata.WriterFeatures) (*perfdata.Writer, error) {
	opts := &perfdata.WriterOptions{Compress: cfg.Compress, KeepUp: tr.writer.KeepUp, Level: tr.writer.Level}
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
