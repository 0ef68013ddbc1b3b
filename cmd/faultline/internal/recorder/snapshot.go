package recorder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/launch"
	"github.com/faultline/faultline/cmd/faultline/internal/pagemap"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"golang.org/x/sys/unix"
)

// Page-table snapshots (schema.SnapshotEvent): every process of the
// recording has its resident anonymous memory read from its page tables
// (package pagemap) every Config.ResidentEvery while it runs, and, where
// the launcher could arm it (launch.ExitsEnv), as it calls exit_group,
// the last moment its memory exists. The reads run on goroutines of their
// own and queue finished records; the session's loop writes them between
// drains (writeSnapshots).

// snapTraceID and snapSampleID number the event apart from faultline:rss
// and the in-process events.
const (
	snapTraceID  = shimIDBase - 2
	snapSampleID = shimSampleIDBase - 2
)

// snapSpec is the faultline:resident event.
func snapSpec(flags perfdata.AttrFlags, clock int32) *spec {
	sp := syntheticSpec(schema.SnapshotEvent, snapTraceID, snapSampleID, flags, clock)
	sp.format = snapFormat()
	return sp
}

// snapFieldsOff is where the scalar fields start in the RAW payload
// (after the common fields); the ranges' __data_loc follows them, and the
// ranges themselves start 8-aligned after it.
const (
	snapFieldsOff = 8
	snapLocOff    = snapFieldsOff + 8*7
	snapDataOff   = snapLocOff + 8
)

// snapFormat is faultline:resident's tracefs-style format: perf script
// prints the scalar fields and the number of ranges.
func snapFormat() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "name: %s\nID: %d\nformat:\n", schema.SnapshotEvent, snapTraceID)
	b.WriteString(schema.CommonFieldsFormat)
	pf, args := "", ""
	for i, n := range schema.SnapshotFields {
		fmt.Fprintf(&b, "\tfield:u64 %s;\toffset:%d;\tsize:8;\tsigned:0;\n", n, snapFieldsOff+8*i)
		pf += n + "=%Lu "
		args += ", REC->" + n
	}
	fmt.Fprintf(&b, "\tfield:__data_loc u64[] %s;\toffset:%d;\tsize:4;\tsigned:0;\n", schema.SnapshotRanges, snapLocOff)
	fmt.Fprintf(&b, "\nprint fmt: \"%sranges=%%u\"%s, __get_dynamic_array_len(%s) / 24\n", pf, args, schema.SnapshotRanges)
	return b.Bytes()
}

// snapshotter reads the processes' page tables and queues the records.
type snapshotter struct {
	sp    *spec
	root  int
	every time.Duration

	mu    sync.Mutex
	queue [][]byte // finished sample bodies
	ready chan struct{}
	// queued and written count the records queued and written. An exit's
	// records must come before its process's EXIT record: its read waits
	// (on wrote) until they are in the recording before the process may
	// go on to exit, unless prompt: then the source's drain writes the
	// queued records once it has read the clock, and writes a kernel
	// record only once it is older than that less a margin
	// (sourceTraits.ordered), so the EXIT record, stamped after the
	// process is let go, comes after them. The process waits only for
	// its read.
	queued, written uint64
	wrote           *sync.Cond
	prompt          bool

	notify int    // the exit notification descriptor, or -1
	wake   [2]int // a pipe stop writes to, to end exitLoop's poll at once
	quit   chan struct{}
	wg     sync.WaitGroup

	// Counters, under mu: snapshots taken, at exits; time spent reading.
	periodic, exits uint64
	cost            time.Duration
	held            time.Duration // processes stopped at exit_group, in all (the guard's total)
	unread          uint64        // exits the guard let go before their read (launch.ExitWait)
	failed          error         // the first read that failed for another reason than the process ending
}

// startSnapshots starts reading root's process tree every every (0: not
// while it runs) and, with notify ≥ 0, each process as it exits; prompt:
// an exit's process goes on once its records are queued (snapshotter).
func startSnapshots(sp *spec, root int, every time.Duration, notify int, prompt bool) *snapshotter {
	sn := &snapshotter{sp: sp, root: root, every: every, notify: notify, prompt: prompt, ready: make(chan struct{}, 1), quit: make(chan struct{})}
	sn.wrote = sync.NewCond(&sn.mu)
	if every > 0 {
		sn.wg.Add(1)
		go sn.periodicLoop()
	}
	sn.wake = [2]int{-1, -1}
	if notify >= 0 {
		if err := unix.Pipe2(sn.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			sn.wake = [2]int{-1, -1}
		}
		sn.wg.Add(1)
		go sn.exitLoop()
	}
	return sn
}

// SnapshotCounts says what the page-table reads took: the snapshots
// taken while the processes ran (Periodic) and as they exited (Exits),
// the CPU time spent reading (Cost), and the first read that failed for
// another reason than its process ending (nil: none).
type SnapshotCounts struct {
	Periodic, Exits uint64
	Cost            time.Duration
	// Held is how long the processes were stopped at exit_group, in all
	// (the read and the write of its records), as the guard held them;
	// Unread counts the exits it let go after launch.ExitWait without
	// record's read (record stopped or starved of CPU).
	Held   time.Duration
	Unread uint64
	Err    error
}

// counts returns the counts so far.
func (sn *snapshotter) counts() SnapshotCounts {
	if sn == nil {
		return SnapshotCounts{}
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return SnapshotCounts{Periodic: sn.periodic, Exits: sn.exits, Cost: sn.cost, Held: sn.held, Unread: sn.unread, Err: sn.failed}
}

// stop ends the reads; what they queued stays for writeSnapshots.
func (sn *snapshotter) stop() {
	if sn == nil || sn.quit == nil {
		return
	}
	close(sn.quit)
	sn.mu.Lock()
	sn.wrote.Broadcast()
	sn.mu.Unlock()
	if sn.wake[1] >= 0 {
		unix.Write(sn.wake[1], []byte{1})
	}
	sn.wg.Wait()
	for _, fd := range sn.wake {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	sn.quit = nil
	if sn.notify >= 0 {
		sn.drainTotals()
		unix.Close(sn.notify)
		sn.notify = -1
	}
}

// holdExits makes each exit read from now on hold its process until its
// records are written (the final drain writes kernel records whatever
// their time).
func (sn *snapshotter) holdExits() {
	if sn == nil {
		return
	}
	sn.mu.Lock()
	sn.prompt = false
	sn.mu.Unlock()
}

// readyChan is ready when records are queued (nil without snapshots).
func (sn *snapshotter) readyChan() <-chan struct{} {
	if sn == nil {
		return nil
	}
	return sn.ready
}

func (sn *snapshotter) periodicLoop() {
	defer sn.wg.Done()
	runtime.LockOSThread() // for threadCPU
	defer runtime.UnlockOSThread()
	sc := pagemap.NewScanner()
	t := time.NewTicker(sn.every)
	defer t.Stop()
	var rs []pagemap.Range
	var pids []int
	var tree procTree
	for {
		select {
		case <-sn.quit:
			return
		case <-t.C:
		}
		start := threadCPU()
		pids = tree.list(pids[:0], sn.root)
		for _, pid := range pids {
			rs, _ = sn.take(sc, rs[:0], pid, schema.SnapshotPeriodic)
		}
		sn.mu.Lock()
		sn.cost += threadCPU() - start
		sn.mu.Unlock()
	}
}

// take reads pid's page tables and status and queues its records; it
// returns the count of records queued once they are.
func (sn *snapshotter) take(sc *pagemap.Scanner, rs []pagemap.Range, pid int, kind uint64) ([]pagemap.Range, uint64) {
	begin := monoNow()
	rs, err := sc.Scan(rs, pid)
	end := monoNow()
	if err != nil {
		if !errors.Is(err, pagemap.ErrGone) {
			sn.mu.Lock()
			if sn.failed == nil {
				sn.failed = fmt.Errorf("reading the page tables of pid %d: %w", pid, err)
			}
			sn.mu.Unlock()
		}
		return rs, 0
	}
	hwm, anon := readStatus(pid)
	recs := snapRecords(nil, sn.sp, uint32(pid), kind, begin, end, hwm, anon, rs)
	sn.mu.Lock()
	sn.queue = append(sn.queue, recs...)
	sn.queued += uint64(len(recs))
	upTo := sn.queued
	if kind == schema.SnapshotExit {
		sn.exits++
	} else {
		sn.periodic++
	}
	sn.mu.Unlock()
	select {
	case sn.ready <- struct{}{}:
	default:
	}
	return rs, upTo
}

// snapRecords appends to out the sample bodies of one snapshot: its
// ranges in records of at most schema.SnapshotMaxRanges, each covering
// the address space from where the last one stopped.
func snapRecords(out [][]byte, sp *spec, pid uint32, kind, begin, end, hwm, anon uint64, rs []pagemap.Range) [][]byte {
	const top = 1<<64 - 1
	lo := uint64(0)
	for {
		n := min(len(rs), schema.SnapshotMaxRanges)
		hi := uint64(top)
		if n < len(rs) {
			hi = rs[n].Start
		}
		out = append(out, snapRecord(sp, pid, kind, begin, end, lo, hi, hwm, anon, rs[:n]))
		rs = rs[n:]
		if len(rs) == 0 {
			return out
		}
		lo = hi
	}
}

// snapRecord is one sample body: IDENTIFIER, IP, PID/TID, TIME, CPU/res,
// then RAW with the fields and the ranges.
func snapRecord(sp *spec, pid uint32, kind, begin, end, lo, hi, hwm, anon uint64, rs []pagemap.Range) []byte {
	ne := binary.NativeEndian
	b := make([]byte, 0, 48+snapDataOff+24*len(rs)+8)
	b = ne.AppendUint64(b, sp.synthID)
	b = ne.AppendUint64(b, 0)
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint32(b, pid)
	b = ne.AppendUint64(b, end)
	b = ne.AppendUint64(b, 0)
	at := len(b)
	b = ne.AppendUint32(b, 0)
	b = appendCommon(b, sp, pid)
	for _, v := range []uint64{uint64(pid), kind, begin, lo, hi, hwm, anon} {
		b = ne.AppendUint64(b, v)
	}
	b = ne.AppendUint32(b, uint32(24*len(rs))<<16|snapDataOff)
	b = ne.AppendUint32(b, 0)
	for _, r := range rs {
		var fl uint64
		if r.Flags&pagemap.Present != 0 {
			fl |= schema.SnapPresent
		}
		if r.Flags&pagemap.Swapped != 0 {
			fl |= schema.SnapSwapped
		}
		if r.Flags&pagemap.Huge != 0 {
			fl |= schema.SnapHuge
		}
		b = ne.AppendUint64(b, r.Start)
		b = ne.AppendUint64(b, r.End)
		b = ne.AppendUint64(b, fl)
	}
	return finishRaw(b, at)
}

// writeSnapshots writes the queued records.
func (s *session) writeSnapshots() error {
	sn := s.snap
	if sn == nil {
		return nil
	}
	sn.mu.Lock()
	q := sn.queue
	sn.queue = nil
	sn.mu.Unlock()
	for _, b := range q {
		*s.perSpec[sn.sp]++
		if err := s.w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, b); err != nil {
			return err
		}
	}
	sn.mu.Lock()
	sn.written += uint64(len(q))
	sn.wrote.Broadcast()
	sn.mu.Unlock()
	return nil
}

// stopping reports whether stop was called (reads no longer wait for
// their records to be written).
func (sn *snapshotter) stopping() bool {
	select {
	case <-sn.quit:
		return true
	default:
		return false
	}
}

// exitLoop takes each process's snapshot as the guard asks (a process
// stopped at exit_group: launch.ExitMsg) and replies once its records are
// written (or queued: prompt); the guard lets the process go on then, or after
// launch.ExitWait if the reply is late. The guard's totals (Pid 0) say
// how long the processes were held and how many went unread.
func (sn *snapshotter) exitLoop() {
	defer sn.wg.Done()
	runtime.LockOSThread() // for threadCPU
	defer runtime.UnlockOSThread()
	sc := pagemap.NewScanner()
	var rs []pagemap.Range
	fds := []unix.PollFd{{Fd: int32(sn.notify), Events: unix.POLLIN}, {Fd: int32(sn.wake[0]), Events: unix.POLLIN}}
	buf := make([]byte, launch.ExitMsgSize+1)
	for {
		select {
		case <-sn.quit:
			return
		default:
		}
		n, err := unix.Poll(fds, 100)
		if err != nil && err != unix.EINTR {
			return
		}
		if n == 0 || fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			continue
		}
		m, ok, open := sn.readExitMsg(buf)
		if !open {
			return // the guard is done: no process holds the filter any more
		}
		if !ok || m.Pid == 0 {
			continue
		}
		start := threadCPU()
		var upTo uint64
		rs, upTo = sn.take(sc, rs[:0], int(m.Pid), schema.SnapshotExit)
		sn.mu.Lock()
		sn.cost += threadCPU() - start
		for !sn.prompt && sn.written < upTo && !sn.stopping() {
			sn.wrote.Wait()
		}
		sn.mu.Unlock()
		unix.Write(sn.notify, binary.NativeEndian.AppendUint64(nil, m.ID))
	}
}

// readExitMsg reads one message from the guard; totals are kept as they
// come. open is false at the socket's end.
func (sn *snapshotter) readExitMsg(buf []byte) (m launch.ExitMsg, ok, open bool) {
	n, err := unix.Read(sn.notify, buf)
	if err == unix.EINTR || err == unix.EAGAIN {
		return m, false, true
	}
	if err != nil || n == 0 {
		return m, false, false
	}
	if m, ok = launch.ParseExitMsg(buf[:n]); ok && m.Pid == 0 {
		sn.mu.Lock()
		sn.held, sn.unread = time.Duration(m.HeldNs), uint64(m.Unread)
		sn.mu.Unlock()
	}
	return m, ok, true
}

// drainTotals reads the guard's messages already queued, for its last
// totals.
func (sn *snapshotter) drainTotals() {
	buf := make([]byte, launch.ExitMsgSize+1)
	for {
		fds := []unix.PollFd{{Fd: int32(sn.notify), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err != nil || n == 0 || fds[0].Revents&unix.POLLIN == 0 {
			return
		}
		if _, _, open := sn.readExitMsg(buf); !open {
			return
		}
	}
}

// threadCPU is the calling thread's CPU time: what the reads cost,
// without the time they waited for a CPU.
func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// readStatus reads VmHWM and RssAnon, in bytes, from /proc/PID/status (0
// for what it cannot read).
func readStatus(pid int) (hwm, anon uint64) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0
	}
	var buf [4096]byte
	n, _ := unix.Read(fd, buf[:])
	unix.Close(fd)
	b := buf[:max(n, 0)]
	h, _ := statusKB(b, "VmHWM:")
	a, _ := statusKB(b, "RssAnon:")
	return h << 10, a << 10
}

// procTree finds a process's descendants from each process's parent
// (/proc/PID/stat). It remembers the parents it read: a process's parent
// changes only when its parent exits (then it is reparented to an
// ancestor, or to init), so a pid is read again only when its remembered
// parent is gone. The pids of the system's other processes are listed
// each time (one read of /proc), not read.
type procTree struct {
	parent map[int]int
	seen   map[int]bool
	buf    [512]byte
}

// list appends root and its descendants to pids.
func (pt *procTree) list(pids []int, root int) []int {
	if pt.parent == nil {
		pt.parent, pt.seen = map[int]int{}, map[int]bool{}
	}
	d, err := os.Open("/proc")
	if err != nil {
		return append(pids, root)
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	clear(pt.seen)
	live := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pt.seen[pid] = true
			live = append(live, pid)
		}
	}
	children := map[int][]int{}
	for _, pid := range live {
		pp, ok := pt.parent[pid]
		if !ok || !pt.seen[pp] {
			if pp, ok = pt.readPPid(pid); !ok {
				continue
			}
			pt.parent[pid] = pp
		}
		children[pp] = append(children[pp], pid)
	}
	for pid := range pt.parent {
		if !pt.seen[pid] {
			delete(pt.parent, pid)
		}
	}
	start := len(pids)
	pids = append(pids, root)
	for i := start; i < len(pids); i++ {
		pids = append(pids, children[pids[i]]...)
	}
	return pids
}

// readPPid reads pid's parent from /proc/PID/stat.
func (pt *procTree) readPPid(pid int) (int, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	n, _ := unix.Read(fd, pt.buf[:])
	unix.Close(fd)
	return statPPid(pt.buf[:max(n, 0)])
}

// statPPid reads the parent pid from a /proc/PID/stat line: the fourth
// field, after the command name in parentheses (which may hold spaces
// and parentheses: the last ')' ends it).
func statPPid(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}

// exitsSocket makes the socket pair the guard asks for the exit reads
// over (launch.ExitMsg): ours, and the guard's, passed as the launcher's
// extra files after the gate (descriptor launch.ExitsFD), which the guard
// keeps for itself.
func exitsSocket() (ours *os.File, theirs []*os.File) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	return os.NewFile(uintptr(fds[0]), "exits"), []*os.File{os.NewFile(uintptr(fds[1]), "exits-launcher")}
}

// exitNotifier waits, at most a second, for the guard to say that the
// launcher armed the exit notifications, and returns the socket the guard
// asks for the exit reads over; -1 when it was not armed (the kernel
// refused the filter, or faultline lacks CAP_SYS_ADMIN).
func (h *heldCommand) exitNotifier() int {
	if h == nil || h.exits == nil {
		return -1
	}
	defer h.exits.Close()
	fd, err := unix.Dup(int(h.exits.Fd()))
	if err != nil {
		return -1
	}
	unix.CloseOnExec(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(time.Second)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		var b [1]byte
		if err != nil || n == 0 {
			break
		}
		if k, err := unix.Read(fd, b[:]); err == nil && k == 1 {
			return fd
		}
		break
	}
	unix.Close(fd)
	return -1
}
