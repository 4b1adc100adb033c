// Package objectstore is the small S3 client of dbfleet's local tools and tests: what they need
// of a store to set one up and to look into it (make a bucket, put, get and list objects),
// signed with AWS Signature Version 4 over HTTPS, path-style (https://host/bucket/key), as
// pgBackRest addresses a store too. It is not the path backups take: the instances archive and
// back up with pgBackRest.
package objectstore
