package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"
)

// The screen: narration, timestamped timeline lines, and below them a live table. On a terminal
// the table is redrawn in place every poll; otherwise (a log, CI) it is printed at milestones only.

type screen struct {
	mu         sync.Mutex
	tty        bool
	table      string // the live table as last drawn
	drawn      int    // its lines on the terminal
	phase      string
	phaseStart time.Time
}

var out = &screen{tty: isTerminal(os.Stdout), phaseStart: time.Now()}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// erase removes the live table from the terminal.
func (s *screen) erase() {
	if s.tty && s.drawn > 0 {
		fmt.Printf("\x1b[%dA\x1b[J", s.drawn)
		s.drawn = 0
	}
}

func (s *screen) redraw() {
	if s.tty && s.table != "" {
		fmt.Print(s.table)
		s.drawn = rows(s.table, terminalWidth())
	}
}

// rows is how many terminal rows text takes, long lines wrapping at width.
func rows(text string, width int) int {
	n := 0
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		n += max(1, (utf8.RuneCountInString(line)+width-1)/width)
	}
	return n
}

// terminalWidth is stdout's width in columns, 80 when unknown.
func terminalWidth() int {
	var ws struct{ rows, cols, x, y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdout.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	if errno != 0 || ws.cols == 0 {
		return 80
	}
	return int(ws.cols)
}

// print writes lines above the live table.
func (s *screen) print(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	fmt.Println(text)
	s.redraw()
}

// say narrates in plain words.
func say(format string, args ...any) { out.print(fmt.Sprintf(format, args...)) }

// event is a timeline line, stamped with the time since the phase began.
func event(format string, args ...any) {
	out.print(fmt.Sprintf("  [%s +%5.1fs] %s", out.phase, time.Since(out.phaseStart).Seconds(), fmt.Sprintf(format, args...)))
}

// startPhase begins a phase: a heading, and the clock of its timeline.
func startPhase(name, heading string) {
	out.mu.Lock()
	out.phase, out.phaseStart = name, time.Now()
	out.mu.Unlock()
	say("")
	say("━━ %s", heading)
}

// restartClock starts the phase's clock again: timestamps count from the action that follows.
func restartClock() {
	out.mu.Lock()
	out.phaseStart = time.Now()
	out.mu.Unlock()
}

// since is the time since the phase began.
func since() time.Duration { return time.Since(out.phaseStart).Round(100 * time.Millisecond) }

// live replaces the live table (on a terminal).
func (s *screen) live(table string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if table == s.table && s.drawn > 0 {
		return
	}
	s.table = table
	if s.tty {
		s.erase()
		s.redraw()
	}
}

// settle leaves the current table on screen for good (a milestone): the next live table is drawn
// below it. Off a terminal this is where tables are printed.
func (s *screen) settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == "" {
		return
	}
	if !s.tty {
		fmt.Print(s.table)
	}
	s.drawn = 0
	s.table = ""
}

// para narrates a paragraph, wrapped to the terminal (at most 100 columns).
func para(format string, args ...any) { wrapped("", "", fmt.Sprintf(format, args...)) }

// bullet narrates a list item, wrapped with a hanging indent.
func bullet(format string, args ...any) { wrapped("  - ", "    ", fmt.Sprintf(format, args...)) }

func wrapped(first, rest, text string) {
	width := 100
	if out.tty {
		width = min(width, terminalWidth())
	}
	var lines []string
	line := first
	for _, word := range strings.Fields(text) {
		if utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width && strings.TrimSpace(line) != "" {
			lines = append(lines, line)
			line = rest
		}
		if strings.TrimSpace(line) != "" {
			line += " "
		}
		line += word
	}
	out.print(strings.Join(append(lines, line), "\n"))
}
