// Package perfdata reads and writes the perf.data files of `perf record`: a
// streaming decoder for both the seekable file format and the pipe format,
// and a Writer (with BuildTracingData for tracepoint formats) that produces
// file-mode recordings perf itself reads, which faultline record and the
// tests' synthetic recordings use.
//
// The format is described in tools/perf/Documentation/perf.data-file-format.txt
// in the Linux tree (https://github.com/torvalds/linux/blob/master/tools/perf/Documentation/perf.data-file-format.txt);
// the kernel record layouts are in include/uapi/linux/perf_event.h and perf's
// own record types in tools/perf/util/event.h and tools/lib/perf/include/perf/event.h.
// Where the documentation is silent the decoder follows what perf itself does
// in tools/perf/util/header.c, session.c and ordered-events.c.
//
// A Reader hands out records one at a time:
//
//	r, err := perfdata.Open("perf.data", nil)
//	if err != nil { ... }
//	defer r.Close()
//	for r.Next() {
//		switch rec := r.Record().(type) {
//		case *perfdata.Sample:
//			...
//		}
//	}
//	if err := r.Err(); err != nil { ... }
//
// Records and the slices they hold are reused: they are valid only until the
// next call to Next. In file mode the byte slices point into a read-only
// memory mapping of the file.
//
// By default records come out in timestamp order, reordered the way perf
// does it (buffering until a FINISHED_ROUND record proves that no earlier
// timestamp can follow). Options.Order = FileOrder delivers them as stored.
package perfdata
