package contract

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIdentifierBytes is the longest role or database name PostgreSQL keeps (NAMEDATALEN - 1);
// a longer one would be cut short without a word.
const MaxIdentifierBytes = 63

// CredentialProblem says what is wrong with the value of key (SecretKeyUsername,
// SecretKeyPassword or SecretKeyDBName) of a credentials Secret, or "" when nothing is. The hub
// refuses such a Secret (SecretMalformed) and the instance manager keeps the credentials it has
// (CredentialsInvalid). Control characters and quotes are refused outright, although every place
// that writes a credential quotes it: a newline in a password cuts a pgpass or pg_hba.conf line
// in two, and a value no tool has to escape is one no tool can get wrong. The message never holds
// the value.
func CredentialProblem(key, value string) string {
	switch {
	case value == "":
		return "is empty"
	case !utf8.ValidString(value):
		return "is not valid UTF-8"
	case strings.ContainsAny(value, `'"\`):
		return `holds a quote or a backslash ('"\)`
	case strings.ContainsFunc(value, unicode.IsControl):
		return "holds a control character (a newline, say)"
	case key != SecretKeyPassword && len(value) > MaxIdentifierBytes:
		return fmt.Sprintf("is %d bytes long; PostgreSQL keeps names of at most %d", len(value), MaxIdentifierBytes)
	case key != SecretKeyPassword && strings.TrimSpace(value) != value:
		return "starts or ends with a space"
	}
	return ""
}
