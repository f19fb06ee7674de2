package benchkit

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUWindow measures, over one measurement window, the CPU used by the
// process under test, by this process (the load generator), and by
// everything else on the machine. The last is a noise indicator on a shared
// machine: what other engineers' tests took from the cores meanwhile.
type CPUWindow struct {
	pid         int
	inProcess   bool // the system under test runs inside this process
	proc0       time.Duration
	procOK      bool
	self0, sys0 time.Duration
	sysOK       bool
}

// CPUUse is what a CPUWindow measured. Percentages are of one core; -1
// means unknown (e.g. no process under test, or no /proc).
type CPUUse struct {
	// Proc is the process under test's CPU, and ProcTime the CPU time
	// behind it (valid when Proc >= 0).
	Proc     float64
	ProcTime time.Duration
	// Self is this process's CPU.
	Self float64
	// Other is the machine's busy time minus Proc and Self, at least 0.
	Other float64
}

// StartCPUWindow takes the first sample. pid is the process under test; 0
// means none (Proc and Other are then unknown).
func StartCPUWindow(pid int) CPUWindow {
	w := CPUWindow{pid: pid}
	w.proc0, w.procOK = ProcCPU(pid)
	w.self0 = SelfCPU()
	w.sys0, w.sysOK = SystemBusy()
	return w
}

// StartCPUWindowInProcess is StartCPUWindow for a system under test that
// runs inside this process (an in-process nats-server): its CPU is part of
// Self, Proc is unknown, and Other is still measured.
func StartCPUWindowInProcess() CPUWindow {
	w := StartCPUWindow(0)
	w.inProcess = true
	return w
}

// End takes the second sample; elapsed is the window's length.
func (w CPUWindow) End(elapsed time.Duration) CPUUse {
	u := CPUUse{Proc: -1, Other: -1}
	proc1, ok := ProcCPU(w.pid)
	self1 := SelfCPU()
	sys1, ok2 := SystemBusy()
	if ok && w.procOK {
		u.ProcTime = proc1 - w.proc0
		u.Proc = 100 * float64(u.ProcTime) / float64(elapsed)
	}
	u.Self = 100 * float64(self1-w.self0) / float64(elapsed)
	if w.sysOK && ok2 && (u.Proc >= 0 || w.inProcess) {
		u.Other = max(0, 100*float64(sys1-w.sys0)/float64(elapsed)-max(u.Proc, 0)-u.Self)
	}
	return u
}

// ProcCPU returns the user+system CPU time consumed so far by pid, from
// /proc/<pid>/stat (clock ticks of 1/100 s, Linux's USER_HZ).
func ProcCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// SelfCPU returns this process's user+system CPU time.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SystemBusy returns the CPU time all cores have spent not idle, from the
// first line of /proc/stat (ticks of 1/100 s).
func SystemBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already included in user/nice
			break
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond, true
}
