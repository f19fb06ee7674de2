package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// playbookParams size the plugin-overhead benchmark.
type playbookParams struct {
	Tasks, Hosts, Rounds int
	// Module is what each task runs: "debug" (controller only, the least
	// work per event, so the plugin's share is largest) or "command".
	Module  string
	Ansible string // ansible-playbook
	Plugins string // the callback_plugins directory
	Flush   time.Duration
}

// playbookResult is the wall time of each run, with and without the plugin,
// and the CPU time (user + system) of ansible-playbook and its workers.
type playbookResult struct {
	Without, With       []time.Duration
	WithoutCPU, WithCPU []time.Duration
	Events              int // events per plugin run, all received by the subscriber
}

// writePlaybook writes an inventory of local hosts and a playbook of tasks
// into dir.
func writePlaybook(dir string, p playbookParams) error {
	var inv strings.Builder
	inv.WriteString("all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n  hosts:\n")
	for i := 1; i <= p.Hosts; i++ {
		fmt.Fprintf(&inv, "    host%02d:\n", i)
	}
	var pb strings.Builder
	pb.WriteString("- name: firehose bench\n  hosts: all\n  gather_facts: false\n  tasks:\n")
	for i := 1; i <= p.Tasks; i++ {
		switch p.Module {
		case "command":
			fmt.Fprintf(&pb, "    - name: task %d\n      ansible.builtin.command: echo %d\n      changed_when: false\n", i, i)
		default:
			fmt.Fprintf(&pb, "    - name: task %d\n      ansible.builtin.debug:\n        msg: \"task %d on {{ inventory_hostname }}\"\n", i, i)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "inventory.yml"), []byte(inv.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.yml"), []byte(pb.String()), 0o644)
}

// runPlaybooks runs the playbook Rounds times without and Rounds times with
// the plugin, alternating which goes first in each round so that drift in
// the machine's load hits both alike.
func runPlaybooks(ctx context.Context, p playbookParams, s *stack, progress io.Writer) (playbookResult, error) {
	dir, err := os.MkdirTemp("", "firehose-bench-ansible-")
	if err != nil {
		return playbookResult{}, err
	}
	defer os.RemoveAll(dir)
	if err := writePlaybook(dir, p); err != nil {
		return playbookResult{}, err
	}
	res := playbookResult{Events: p.Tasks*p.Hosts + p.Hosts + 2} // tasks, stats, start, finish
	for round := 0; round < p.Rounds; round++ {
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		for _, with := range order {
			before := s.received.Load()
			d, cpu, err := runPlaybook(ctx, p, dir, with, s.url)
			if err != nil {
				return res, err
			}
			label := "without"
			if with {
				label = "with"
				if _, err := s.waitReceived(ctx, before+int64(res.Events), 30*time.Second); err != nil {
					return res, fmt.Errorf("plugin run %d: %w", round+1, err)
				}
				res.With = append(res.With, d)
				res.WithCPU = append(res.WithCPU, cpu)
			} else {
				res.Without = append(res.Without, d)
				res.WithoutCPU = append(res.WithoutCPU, cpu)
			}
			fmt.Fprintf(progress, "  round %d %-7s plugin: %v wall, %v CPU\n", round+1, label, d.Round(time.Millisecond), cpu.Round(time.Millisecond))
		}
	}
	return res, nil
}

// runPlaybook runs ansible-playbook once and returns its wall time and the
// CPU time of it and the workers it forked. The exit status must be 0: a
// failing run measures nothing useful.
func runPlaybook(ctx context.Context, p playbookParams, dir string, with bool, url string) (wall, cpu time.Duration, err error) {
	cmd := exec.CommandContext(ctx, p.Ansible, "-i", "inventory.yml", "bench.yml")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANSIBLE_") && !strings.HasPrefix(kv, "FIREHOSE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_HOST_KEY_CHECKING=False",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	if with {
		cmd.Env = append(cmd.Env,
			"ANSIBLE_CALLBACK_PLUGINS="+p.Plugins,
			"ANSIBLE_CALLBACKS_ENABLED=firehose",
			"FIREHOSE_URL="+url,
			fmt.Sprintf("FIREHOSE_FLUSH_TIMEOUT=%g", p.Flush.Seconds()),
		)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if err != nil {
		return wall, 0, fmt.Errorf("ansible-playbook (plugin %v): %w\n%s", with, err, tail(out.String(), 2000))
	}
	if with && strings.Contains(out.String(), "firehose:") {
		return wall, 0, fmt.Errorf("the plugin warned:\n%s", tail(out.String(), 2000))
	}
	// wait4's usage covers the workers ansible-playbook forked and reaped.
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return wall, cpu, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
