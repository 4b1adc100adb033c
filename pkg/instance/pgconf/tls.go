package pgconf

import (
	"net"
	"os"
	"path/filepath"
)

// tlsDirName is the directory, in the data volume's root (beside the data directory, so that
// neither pg_basebackup nor pg_rewind copies it), where the manager keeps the TLS files postgres
// and the replication tools read: copies of the mounted Secret's, mode 0600 and owned by the
// user postgres runs as, which postgres and libpq require of a private key.
const tlsDirName = ".dbfleet-tls"

// TLS is an instance's TLS material, PEM encoded: its server certificate and key, the CA it
// trusts (for the servers it connects to and the client certificates it is shown), and the
// replication role's client certificate and key.
type TLS struct {
	ServerCert, ServerKey, CACert, ClientCert, ClientKey string
}

// TLSFiles are the paths of the TLS material beside a data directory.
type TLSFiles struct {
	ServerCert, ServerKey, CACert, ClientCert, ClientKey string
}

// TLSPaths are the TLS files for the data directory dataDir.
func TLSPaths(dataDir string) TLSFiles {
	dir := filepath.Join(filepath.Dir(dataDir), tlsDirName)
	return TLSFiles{
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		CACert:     filepath.Join(dir, "ca.crt"),
		ClientCert: filepath.Join(dir, "replication.crt"),
		ClientKey:  filepath.Join(dir, "replication.key"),
	}
}

// WriteTLS writes t's files beside dataDir and reports whether any changed, so the caller knows
// to reload (postgres reads its certificate and key again on a reload; a walreceiver reads the
// client files on its next connection).
func WriteTLS(dataDir string, t TLS, owner *Owner) (bool, error) {
	paths := TLSPaths(dataDir)
	if err := os.MkdirAll(filepath.Dir(paths.ServerCert), 0o700); err != nil {
		return false, err
	}
	if owner != nil {
		if err := os.Chown(filepath.Dir(paths.ServerCert), owner.UID, owner.GID); err != nil {
			return false, err
		}
	}
	changed := false
	// The keys first: a certificate is never newer than its key for long.
	for _, f := range [][2]string{
		{paths.ServerKey, t.ServerKey}, {paths.ServerCert, t.ServerCert}, {paths.CACert, t.CACert},
		{paths.ClientKey, t.ClientKey}, {paths.ClientCert, t.ClientCert},
	} {
		c, err := writeIfChanged(f[0], []byte(f[1]), owner)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

// Upstream is how an instance reaches another over TLS: it dials Host (an address, or a name)
// and verifies the server's certificate for ServerName when Host is an IP address (libpq's host
// and hostaddr), for Host itself when it is a name, under the CA of TLS; it presents the
// replication role's client certificate.
type Upstream struct {
	Host, Port string
	ServerName string
	TLS        TLSFiles
}

// hosts are libpq's host (the name verified and matched in a password file) and hostaddr (the
// address dialled, empty for a name).
func (u Upstream) hosts() (host, hostaddr string) {
	if net.ParseIP(u.Host) != nil && u.ServerName != "" {
		return u.ServerName, u.Host
	}
	return u.Host, ""
}

// HostName is the name the server's certificate is verified for, which a password file's line
// must name too.
func (u Upstream) HostName() string {
	host, _ := u.hosts()
	return host
}

// Params are the libpq connection parameters that reach u with verify-full.
func (u Upstream) Params() []string {
	host, hostaddr := u.hosts()
	out := []string{"host=" + connValue(host)}
	if hostaddr != "" {
		out = append(out, "hostaddr="+connValue(hostaddr))
	}
	return append(out, "port="+connValue(u.Port), "sslmode=verify-full",
		"sslrootcert="+connValue(u.TLS.CACert), "sslcert="+connValue(u.TLS.ClientCert), "sslkey="+connValue(u.TLS.ClientKey))
}

// Env is Params as libpq's environment variables, for tools that take no connection string
// (pg_basebackup's WAL streaming connection included).
func (u Upstream) Env() []string {
	host, hostaddr := u.hosts()
	out := []string{"PGHOST=" + host, "PGPORT=" + u.Port, "PGSSLMODE=verify-full",
		"PGSSLROOTCERT=" + u.TLS.CACert, "PGSSLCERT=" + u.TLS.ClientCert, "PGSSLKEY=" + u.TLS.ClientKey}
	if hostaddr != "" {
		out = append(out, "PGHOSTADDR="+hostaddr)
	}
	return out
}
