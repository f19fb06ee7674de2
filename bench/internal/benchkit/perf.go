package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// PerfRecorder is a `perf record` attached to a process.
type PerfRecorder struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// StartPerf attaches `perf record -F 999 -g` to pid, writing to out (and
// perf's own output to out.log). Read it with `perf report -i out`.
func StartPerf(pid int, out string) (*PerfRecorder, error) {
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-p", strconv.Itoa(pid), "-o", out)
	lf, err := os.Create(out + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("perf record: %w", err)
	}
	r := &PerfRecorder{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		lf.Close()
		close(r.done)
	}()
	return r, nil
}

// Stop ends the recording: SIGINT makes perf write its data file; it is
// killed if it has not finished within 30s.
func (r *PerfRecorder) Stop() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}
