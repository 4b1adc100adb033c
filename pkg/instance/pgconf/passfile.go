package pgconf

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// replicationPassfilePrefix starts the name of the standby's password file, in the data
// volume's root (beside the data directory, so neither pg_basebackup nor pg_rewind copies it).
const replicationPassfilePrefix = ".dbfleet-replication-pgpass-"

// PassfileLine is one line of a libpq password file: host:port:*:user:password, with ':' and
// '\' escaped.
func PassfileLine(host, port, user, password string) string {
	escape := strings.NewReplacer(`\`, `\\`, ":", `\:`).Replace
	return fmt.Sprintf("%s:%s:*:%s:%s\n", escape(host), escape(port), escape(user), escape(password))
}

// writePassfile makes a password file in dir (mode 0600, owned by owner) hold exactly line and
// returns its path: the same file for as long as line does not change, a file of a new name
// when it does (the older ones removed), so that primary_conninfo, which names it, changes with
// the password and a reload makes the walreceiver log in again. An empty line removes them all.
func writePassfile(dir, line string, owner *Owner) (string, error) {
	old, err := filepath.Glob(filepath.Join(dir, replicationPassfilePrefix+"*"))
	if err != nil {
		return "", err
	}
	keep := ""
	for _, path := range old {
		if data, err := os.ReadFile(path); err == nil && line != "" && string(data) == line && keep == "" {
			keep = path
		}
	}
	if keep == "" && line != "" {
		suffix := make([]byte, 6)
		if _, err := rand.Read(suffix); err != nil {
			return "", err
		}
		keep = filepath.Join(dir, replicationPassfilePrefix+hex.EncodeToString(suffix))
		if err := writeFile(keep, []byte(line), owner); err != nil {
			return "", err
		}
	}
	for _, path := range old {
		if path != keep {
			_ = os.Remove(path)
		}
	}
	return keep, nil
}
