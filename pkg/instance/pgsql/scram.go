package pgsql

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// scramVerifier is the SCRAM-SHA-256 verifier PostgreSQL stores for password (RFC 5802, 7677;
// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>"), computed here so that the password
// itself never reaches the server, whose log may quote a failed statement. PostgreSQL prepares a
// password with SASLprep first, which changes nothing in printable ASCII: only such passwords
// get a verifier (passwordForm).
func scramVerifier(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("SCRAM: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}

// passwordForm is what ALTER ROLE ... PASSWORD is given for password: its SCRAM verifier with a
// fresh salt when the password is printable ASCII (every password the hub generates), else the
// password itself, which the server then hashes with SASLprep (this code has no SASLprep). The
// statement runs with its logging off either way (setPassword).
func passwordForm(password string) (string, error) {
	for i := 0; i < len(password); i++ {
		if password[i] < 0x20 || password[i] > 0x7e {
			return password, nil
		}
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("SCRAM salt: %w", err)
	}
	return scramVerifier(password, salt, scramIterations)
}
