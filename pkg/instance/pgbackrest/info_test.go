package pgbackrest

import (
	"strings"
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	out := `[{"archive":[{"database":{"id":1,"repo-key":1},"id":"15-1","max":"000000010000000000000004","min":"000000010000000000000001"},
	{"database":{"id":1,"repo-key":1},"id":"15-1","max":"000000020000000000000006","min":"000000020000000000000004"}],
	"backup":[{"archive":{"start":"000000010000000000000002","stop":"000000010000000000000003"},"label":"20261205-051455F",
	"lsn":{"start":"0/2000028","stop":"0/3000050"},"timestamp":{"start":1764911695,"stop":1764911700},"type":"full"}],
	"name":"orders","repo":[{"key":1,"status":{"code":0,"message":"ok"}}],"status":{"code":0,"message":"ok"}},
	{"name":"other","status":{"code":99,"message":"other"},"repo":[{"key":1,"status":{"code":99,"message":"[AccessError] denied"}}]}]`
	info, err := parseInfo([]byte(out), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != "ok" || info.ArchiveMin != "000000010000000000000001" || info.ArchiveMax != "000000020000000000000006" {
		t.Errorf("info %+v: want ok, archive 1/1 to 2/6 across the two timelines", info)
	}
	if len(info.Backups) != 1 || info.Backups[0].StartLSN != "0/2000028" || !info.Backups[0].Stop.Equal(time.Unix(1764911700, 0)) {
		t.Errorf("backups %+v", info.Backups)
	}
	if _, err := parseInfo([]byte(out), "other"); err == nil || !strings.Contains(err.Error(), "[AccessError] denied") {
		t.Errorf("an unreadable repository: %v, want the repository's message", err)
	}
	if _, err := parseInfo([]byte(out), "missing"); err == nil {
		t.Error("a stanza not in the output: no error")
	}
}
