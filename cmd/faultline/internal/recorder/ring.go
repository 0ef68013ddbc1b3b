package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/faultline/faultline/perfdata"
	"golang.org/x/sys/unix"
)

// ring is one perf ring buffer, mapped from its owner event's descriptor
// as perf_event_open(2) "MMAP layout" describes it: a metadata page, then
// a power-of-two data area that the kernel fills up to data_head and the
// reader releases up to data_tail, as cilium/ebpf's perf reader reads
// its rings.
type ring struct {
	fd   int // the owner's; closed with the other events
	kind kind
	cpu  int
	size int // data bytes

	mem  []byte // the whole mapping
	meta *unix.PerfEventMmapPage
	data []byte
	// tail is how far read has handed out records; it is published to
	// data_tail when the next read starts, so the record read last stays
	// valid until then.
	tail uint64
	wrap []byte // a record that wraps around the end, made contiguous
	// skipped counts the bytes read passed over because they did not
	// start with a record the kernel could have written.
	skipped uint64
}

// rawRecord is one record read from a ring: its header and its body (the
// bytes after the 8-byte header). Data is valid until the ring's next read.
type rawRecord struct {
	Header recordHeader
	Data   []byte
}

// recordHeader is struct perf_event_header.
type recordHeader struct {
	Type perfdata.RecordType
	Misc uint16
	Size uint16
}

// mapRing maps the ring of the event fd, pages data pages (a power of
// two) after the metadata page.
func mapRing(fd int, pages int, k kind, cpu int) (*ring, error) {
	pg := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+pages)*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	off, size := uint64(pg), uint64(pages*pg)
	// data_offset and data_size are there since Linux 4.1 (commit
	// e8c6deac6962); before, the data follows the first page.
	if meta.Data_size != 0 {
		off, size = meta.Data_offset, meta.Data_size
	}
	if off+size > uint64(len(mem)) || size&(size-1) != 0 {
		unix.Munmap(mem)
		return nil, fmt.Errorf("the kernel's ring metadata says data at %#x, %#x bytes, in a %#x-byte mapping", off, size, len(mem))
	}
	return &ring{fd: fd, kind: k, cpu: cpu, size: int(size), mem: mem, meta: meta,
		data: mem[off : off+size], tail: atomic.LoadUint64(&meta.Data_tail)}, nil
}

// read hands out the next record, or reports false when the ring is
// empty. It allocates only for the first record that wraps around the end
// of the ring and is larger than any before it.
func (r *ring) read(raw *rawRecord) bool {
	atomic.StoreUint64(&r.meta.Data_tail, r.tail)
	head := atomic.LoadUint64(&r.meta.Data_head)
	if head == r.tail {
		return false
	}
	// Records are 8-byte aligned and the data area is a power of two, so
	// a header never wraps.
	size := uint64(len(r.data))
	start := r.tail % size
	ne := binary.NativeEndian
	n := uint64(ne.Uint16(r.data[start+6:]))
	if n < 8 || n > head-r.tail {
		// Not what the kernel writes: skip what is there rather than
		// read garbage as records, and count it.
		r.skipped += head - r.tail
		r.tail = head
		atomic.StoreUint64(&r.meta.Data_tail, r.tail)
		return false
	}
	raw.Header = recordHeader{Type: perfdata.RecordType(ne.Uint32(r.data[start:])), Misc: ne.Uint16(r.data[start+4:]), Size: uint16(n)}
	if end := start + n; end <= size {
		raw.Data = r.data[start+8 : end]
	} else {
		if cap(r.wrap) < int(n) {
			r.wrap = make([]byte, n)
		}
		w := r.wrap[:n]
		c := copy(w, r.data[start:])
		copy(w[c:], r.data[:n-uint64(c)])
		raw.Data = w[8:]
	}
	r.tail += n
	return true
}

// unmap releases the mapping (the event's descriptor stays open).
func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem, r.meta, r.data = nil, nil, nil
	}
}

// ringWatermark is how full a ring gets before the kernel wakes the
// reader (wakeup_watermark): an eighth, the fill at which the drain loop
// reads again at once without waiting. A ring then has 7/8 of its size
// of room left while the loop wakes up and drains it.
func ringWatermark(bytes int) uint32 { return uint32(bytes / 8) }

// poller wakes the drain loop when a ring passes its watermark: one epoll
// set of the ring owners' descriptors, waited on by one goroutine, and an
// eventfd that ends the wait (cilium/ebpf's internal/epoll.Poller). The
// owners are edge-triggered: each wakeup of a ring is reported once. An
// owner whose task has exited polls EPOLLHUP for good, which level
// triggering would report on every wait, and its ring still takes the
// records of the other threads' events (-p); edge-triggered, it is
// reported once at the exit and again at each later wakeup of its ring.
type poller struct {
	epfd, efd int
	wake      chan struct{} // receives when a ring has data; never blocks the poller
	errc      chan error    // receives epoll_wait's failure, once
	done      chan struct{}
}

func newPoller(rings []*ring) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	p := &poller{epfd: epfd, efd: -1, wake: make(chan struct{}, 1), errc: make(chan error, 1), done: make(chan struct{})}
	if p.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	add := func(fd int, events uint32) error {
		ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
		return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	}
	err = add(p.efd, unix.EPOLLIN)
	for _, r := range rings {
		if err == nil {
			err = add(r.fd, unix.EPOLLIN|unix.EPOLLET)
		}
	}
	if err != nil {
		p.closeFDs()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	go p.wait(1 + len(rings))
	return p, nil
}

func (p *poller) wait(n int) {
	defer close(p.done)
	events := make([]unix.EpollEvent, n)
	for {
		k, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.errc <- os.NewSyscallError("epoll_wait", err)
			return
		}
		for _, ev := range events[:k] {
			if int(ev.Fd) == p.efd {
				return
			}
		}
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// close ends the wait and closes the poller's own descriptors.
func (p *poller) close() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(p.efd, one[:])
	<-p.done
	p.closeFDs()
}

func (p *poller) closeFDs() {
	unix.Close(p.efd)
	unix.Close(p.epfd)
}
