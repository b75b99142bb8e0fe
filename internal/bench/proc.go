package bench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A server's cost is read from Linux's /proc: the CPU time of the process
// listening on its port and of all its descendants (PostgreSQL serves each
// connection from a child process). Elsewhere the figures are left blank.

// clockTicks is USER_HZ, the unit of /proc/PID/stat times on Linux.
const clockTicks = 100

// procCPU returns the CPU time (user + system) of pid and its descendants.
func procCPU(pid int) (time.Duration, bool) {
	children := childrenOf()
	var total time.Duration
	found := false
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if t, ok := cpuOf(p); ok {
			total += t
			found = true
		}
		todo = append(todo, children[p]...)
	}
	return total, found
}

func cpuOf(pid int) (time.Duration, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 15 {
		return 0, false
	}
	// Fields after the command: state is [0]; utime [11], stime [12],
	// and [13], [14] those of its children that ended and were waited
	// for, so that a PostgreSQL backend that exits between two readings
	// takes none of the CPU it used with it.
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which may itself contain spaces.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// machineTimes returns how long the machine's CPUs have been busy, and
// how long they have run in all, busy or idle, from /proc/stat: a row
// whose CPUs were not all busy was bound by waiting (the disk, the
// network, a lock), not by the processors.
func machineTimes() (busy, total int64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal: idle and iowait
	// are the idle time; guest time is counted in user already.
	for i, v := range fields[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, total > 0
}

// childrenOf maps each process to its children.
func childrenOf() map[int][]int {
	out := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		f, ok := statFields(pid)
		if !ok || len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out
}

// rssBytes is the resident memory of pid.
func rssBytes(pid int) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// listenerPID finds the process listening on addr's TCP port on this
// machine, through the socket inodes of /proc/net/tcp{,6} and the file
// descriptors of every process it may read.
func listenerPID(addr string) (int, bool) {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return 0, false
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// local_address is [1] (hex ip:port), st is [3] (0A: LISTEN), inode [9].
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, false
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid, err := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid, err == nil
		}
	}
	return 0, false
}
