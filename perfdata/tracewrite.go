package perfdata

import (
	"encoding/binary"
	"unsafe"
)

// tracingDataVersion is the tracing data version perf writes
// (tools/perf/util/trace-event-info.c VERSION); 0.6 adds saved_cmdlines.
const tracingDataVersion = "0.6"

// TraceSystem is one ftrace event system and the format texts of its events
// (each what /sys/kernel/tracing/events/SYSTEM/NAME/format shows).
type TraceSystem struct {
	Name    string
	Formats [][]byte
}

// BuildTracingData builds the TRACING_DATA feature as perf's
// tracing_data_get writes it (tools/perf/util/trace-event-info.c), for
// WriterFeatures.TracingData and WriterOptions.TracingData: headerPage and headerEvent are tracefs's events/header_page and
// events/header_event; no ftrace-internal formats, kallsyms, printk formats
// or saved cmdlines. Integers are in this machine's byte order.
func BuildTracingData(pageSize uint32, headerPage, headerEvent []byte, systems []TraceSystem) []byte {
	bo := binary.NativeEndian
	b := []byte("\x17\x08\x44tracing")
	b = append(b, tracingDataVersion...)
	b = append(b, 0)
	var big byte
	if bo.Uint16([]byte{0, 1}) == 1 {
		big = 1
	}
	b = append(b, big, byte(unsafe.Sizeof(uintptr(0))))
	b = bo.AppendUint32(b, pageSize)
	for _, h := range []struct {
		name string
		data []byte
	}{{"header_page", headerPage}, {"header_event", headerEvent}} {
		b = append(b, h.name...)
		b = append(b, 0)
		b = bo.AppendUint64(b, uint64(len(h.data)))
		b = append(b, h.data...)
	}
	b = bo.AppendUint32(b, 0) // ftrace's own formats
	b = bo.AppendUint32(b, uint32(len(systems)))
	for _, s := range systems {
		b = append(b, s.Name...)
		b = append(b, 0)
		b = bo.AppendUint32(b, uint32(len(s.Formats)))
		for _, f := range s.Formats {
			b = bo.AppendUint64(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	b = bo.AppendUint32(b, 0) // kallsyms
	b = bo.AppendUint32(b, 0) // ftrace_printk
	b = bo.AppendUint64(b, 0) // saved_cmdlines
	return b
}
