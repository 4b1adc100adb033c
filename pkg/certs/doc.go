// Package certs makes and checks the X.509 material of a database's TLS: a CA, server
// certificates that name every address clients are given, and client certificates for
// certificate authentication. The hub issues with it; the tests make their own CAs with it.
// PEM in, PEM out; ECDSA P-256 keys.
package certs
