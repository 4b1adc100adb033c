package procfs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Stat
		ok   bool
	}{
		{"42 (postgres) S 7 42 42 0 -1", Stat{Pid: 42, PPid: 7, Name: "postgres", State: "S"}, true},
		{"43 (a) b) (c) Z 1 43", Stat{Pid: 43, PPid: 1, Name: "a) b) (c", State: "Z"}, true},
		{"44 (x y) R", Stat{}, false},
		{"45 no parens", Stat{}, false},
	} {
		got, err := parseStat(tc.want.Pid, tc.raw)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q: %+v, %v; want %+v (ok %t)", tc.raw, got, err, tc.want, tc.ok)
		}
	}
}

func TestReadsThisProcess(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil || st.PPid != os.Getppid() || st.Zombie() {
		t.Fatalf("%+v, %v; want this process, parent %d, running", st, err, os.Getppid())
	}
	found := false
	for _, s := range All() {
		found = found || s.Pid == os.Getpid()
	}
	if !found {
		t.Fatal("All does not list this process")
	}
}
