package procfs

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	Pid, PPid int
	// Name is the executable's name as the kernel keeps it (comm, 15 bytes at most).
	Name string
	// State is R, S, D, Z (exited, not reaped), T and so on.
	State string
}

// Zombie says the process has exited and its parent has not reaped it.
func (s Stat) Zombie() bool { return s.State == "Z" }

// Pids are the pids /proc lists now.
func Pids() []int {
	entries, _ := os.ReadDir("/proc")
	out := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// ReadStat reads a process's stat; an error when it is gone.
func ReadStat(pid int) (Stat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, string(raw))
}

// parseStat reads "pid (comm) state ppid ...": comm may hold spaces and parentheses, so it ends
// at the last ')'.
func parseStat(pid int, raw string) (Stat, error) {
	open, end := strings.IndexByte(raw, '('), strings.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return Stat{}, errors.New("procfs: malformed stat of pid " + strconv.Itoa(pid))
	}
	fields := strings.Fields(raw[end+1:])
	if len(fields) < 2 {
		return Stat{}, errors.New("procfs: short stat of pid " + strconv.Itoa(pid))
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, errors.New("procfs: stat of pid " + strconv.Itoa(pid) + ": parent " + fields[1])
	}
	return Stat{Pid: pid, PPid: ppid, Name: raw[open+1 : end], State: fields[0]}, nil
}

// All are the stats of every process that can be read now.
func All() []Stat {
	var out []Stat
	for _, pid := range Pids() {
		if st, err := ReadStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}
